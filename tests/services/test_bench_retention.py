"""bench/retention.py, tiny (docs/benchmarks.md, "Retention — `bench/retention.py`"): what it
builds is what retention then finds, and its dry run and run agree on what goes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from threads.models import Workspace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import retention as bench  # noqa: E402

pytestmark = pytest.mark.django_db


def test_the_bench_deletes_the_idle_half_and_prunes_the_rest(workspace: Any) -> None:
    Workspace.objects.filter(pk=workspace.pk).update(
        retention_days=bench.RETENTION_DAYS, keep_checkpoints=2
    )
    workspace.refresh_from_db()
    built = bench.build(workspace, threads=6, events=8, checkpoints=4)
    assert built["idle_threads"] == 3 and built["checkpoints"] == 24

    measures = bench.measure(workspace, batch=2, vacuums=False)

    dry, run, left = measures["dry_run"], measures["run"], measures["left"]
    assert (dry["threads"], dry["checkpoints"]) == (run["threads"], run["checkpoints"]) == (3, 6)
    assert dry["bytes_estimated"] == run["bytes_estimated"] > 0
    assert left == {
        "threads": 3,
        "events": 24,
        "checkpoints": 6,
        "tombstones": 3,
        "tombstones_verifying": 3,
    }
    assert "| dry run |" in bench.table(
        {
            "built": built,
            "measures": measures,
            "measured_at": "now",
            "server_version": "test",
            "environment": {"cpus": 1, "load_before": 0.0},
            "command": "test",
            "keep": 2,
            "batch": 2,
        }
    )
