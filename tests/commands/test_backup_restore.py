"""The backup and restore of docs/operations.md, run: scripts/backup-restore-check on SQLite
(the PostgreSQL variant, pg_dump -Fc / pg_restore, runs the same checks on a throwaway
cluster: `scripts/backup-restore-check`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_restored_backup_verifies_and_matches_the_original() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/backup-restore-check", "--sqlite"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chain heads equal: True" in done.stdout
    assert "backup-restore-check: OK" in done.stdout
