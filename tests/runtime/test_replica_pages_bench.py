"""The smoke version of bench/replica_pages.py (docs/benchmarks.md, "Read replica under appending
agents — `bench/replica_pages.py`"): at tiny sizes, over the PostgreSQL test database, with a
real streaming replica the script builds from the test cluster. Only on the PostgreSQL run,
with the primary on this machine (as tests/runtime/test_replica_failsafe.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from threads.models import Event

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
PRIMARY = connection.settings_dict

if PRIMARY["ENGINE"] != "django.db.backends.postgresql":
    pytest.skip("needs the PostgreSQL run: a streaming replica of it", allow_module_level=True)
if str(PRIMARY.get("HOST", "")) not in ("127.0.0.1", "localhost", ""):
    pytest.skip("needs the primary on this machine, to build its replica", allow_module_level=True)
if not shutil.which("pg_basebackup") and not Path("/usr/lib/postgresql/15/bin").exists():
    pytest.skip("needs PostgreSQL's pg_basebackup and pg_ctl", allow_module_level=True)


def test_pages_are_measured_on_both_sides_while_agents_append(tmp_path: Path) -> None:
    host, port = PRIMARY.get("HOST") or "127.0.0.1", PRIMARY.get("PORT") or 5432
    dsn = f"postgres://{PRIMARY['USER'] or 'postgres'}@{host}:{port}/{PRIMARY['NAME']}"
    out = tmp_path / "replica-pages.json"
    args = ["--threads=20", "--events=40", "--requests=2", "--warmup=0", "--ramp=0.3", "--smoke"]
    # One gunicorn worker boots faster than two; the agents' load is the same path.
    env = {
        **os.environ,
        "CTXADMIN_BENCH_SERVER_ARGS": "--workers 1 --worker-class gthread --threads 8 --timeout 60",
    }
    run = subprocess.run(
        [sys.executable, "bench/replica_pages.py", f"--dsn={dsn}", *args, "--no-docs"]
        + [f"--results={out}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]

    # The agents appended through the API: their exchanges are in the log, chained as any.
    appended = Event.objects.filter(kind="message", data__content__startswith="Could you check")
    assert appended.filter(data__content__icontains="ticket 10000000 ").exists()
    result = json.loads(out.read_text())
    assert set(result["pages"]) >= {"thread list, first page", "Operations"}
    for label, page in result["pages"].items():
        # The replica side read the replica; the script refuses a primary side that did.
        assert page["replica"]["statements_on_replica"] > 0, label
        assert page["primary"]["statements_on_replica"] == 0, label
        assert page["replica"]["p50_ms"] > 0 and page["primary"]["p50_ms"] > 0, label
    assert result["lag"]["samples"] > 0 and result["lag"]["streaming_all_along"]
    assert result["fallbacks"] == {"replica_pages": 10, "unavailable": 0, "lagging": 0}
