"""scripts/audit hands pip-audit a requirements file it can read: every line a pinned
`name==version`, none of the workspace's own packages (an editable path such as
`-e ./clients/python` has no version pip-audit can deduce, and it refuses the whole file
before auditing anything). Offline: only the export is run, not the audit."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]+\])?==\S+( ;.*)?$")


def _export_command() -> list[str]:
    lines = (ROOT / "scripts" / "audit").read_text().splitlines()
    (line,) = [line for line in lines if line.startswith("uv export")]
    return shlex.split(line.split(">", 1)[0])


def test_the_audited_requirements_are_all_pinned_packages() -> None:
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".local" / "bin"))
    if uv is None:
        pytest.skip("uv is not installed")
    command = _export_command()
    exported = subprocess.run(
        [uv, *command[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "UV_OFFLINE": "1"},
    ).stdout
    requirements = [
        line.strip()
        for line in exported.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert requirements, exported[:500]
    not_pinned = [line for line in requirements if not PINNED.match(line)]
    assert not not_pinned, not_pinned
    names = {re.split(r"[=\[ ;]", line, maxsplit=1)[0].lower() for line in requirements}
    assert "django" in names
    assert not names & {"ctxadmin", "ctxadmin-client"}
