"""A fold worker killed with SIGKILL between prepare and commit (docs/pipeline.md, "Recovery").

A real Celery worker (its own process group, its own queue, on the Redis broker of
./scripts/test and the PostgreSQL test database) prepares a candidate and then sleeps (it runs
as tests/worker/pausing_worker.py, which patches the pause into that process); the test kills
it there. `recover` must then commit the
candidate when the head is still the one it was built on, and discard it when the head moved.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from django.core.management import call_command
from django.db import connection

from tests import factories as f
from tests.scenarios import seeds
from threads.models import SummaryPhase, SummaryVersion, TaskRun, Thread
from threads.services import fold_recovery, folding
from threads.services.tasks import task_run_start

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    # Seeding would otherwise fold eagerly in the test process and move the head.
    pytest.mark.usefixtures("no_fold_triggers"),
]

BASE_DIR = Path(__file__).resolve().parents[2]
TRIGGER = {"kind": "manual", "reason": "worker test"}


def _worker_db_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}?conn_max_age=0"


@pytest.fixture
def redis_url() -> str:
    if connection.vendor != "postgresql":
        pytest.skip("the worker shares the PostgreSQL test database (DATABASE_URL=postgres://)")
    url = os.environ.get("CTXADMIN_TEST_REDIS_URL")
    if not url:
        pytest.skip("no Redis: ./scripts/test exports CTXADMIN_TEST_REDIS_URL for this run")
    return url


@pytest.fixture
def pausing_worker(redis_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A solo-pool worker on a queue of its own that sleeps 60 s after every prepare."""
    queue = f"fold-kill-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": _worker_db_url(),
        "CELERY_BROKER_URL": redis_url,
        "CTXADMIN_TASKS_EAGER": "0",
    }
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.worker.pausing_worker",
                "60",
                "-A",
                "ctxadmin",
                "worker",
                "--pool=solo",
                "-Q",
                queue,
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--hostname",
                f"{queue}@%h",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while b" ready." not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield {
            "process": process,
            "queue": queue,
            "log": log_path,
            # Not the current app: the product's own tasks keep being sent by ctxadmin's app.
            "sender": Celery(broker=redis_url, set_as_current=False),
        }
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _fold_then_kill(worker: dict[str, Any], thread: Thread) -> tuple[SummaryVersion, TaskRun]:
    sender, queue = worker["sender"], worker["queue"]
    run = task_run_start(
        workspace=thread.workspace,
        thread=thread,
        kind="fold",
        send=lambda task_id: sender.send_task(
            "ctxadmin.fold_thread", args=(str(thread.pk), TRIGGER), task_id=task_id, queue=queue
        ),
    )
    deadline = time.monotonic() + 60
    while not (prepared := SummaryVersion.objects.filter(task_id=run.pk).first()):
        if time.monotonic() > deadline:
            pytest.fail(f"no prepared version:\n{worker['log'].read_text()[-3000:]}")
        time.sleep(0.1)
    # The worker now sleeps between prepare and commit: kill it, children and all, at once.
    os.killpg(worker["process"].pid, signal.SIGKILL)
    worker["process"].wait(timeout=30)
    prepared.refresh_from_db()
    assert prepared.phase == SummaryPhase.PREPARED
    thread.refresh_from_db()
    assert thread.head_version == 0
    return prepared, TaskRun.objects.get(pk=run.pk)


def test_recover_commits_the_candidate_of_a_killed_worker(
    pausing_worker: dict[str, Any], workspace: Any
) -> None:
    thread = f.make_thread(workspace, "killed-commit")
    seeds.order_change(thread)
    prepared, run = _fold_then_kill(pausing_worker, thread)
    assert run.state == "STARTED"
    call_command("recover", "--older-than", "0")
    prepared.refresh_from_db()
    assert prepared.phase == SummaryPhase.COMMITTED and prepared.verification["ok"] is True
    thread.refresh_from_db()
    assert (thread.head_version, thread.covered_until) == (prepared.version, 7)
    run.refresh_from_db()
    assert run.result is not None
    assert run.result["recovered"] is True and run.result["outcome"] == "committed"
    # A second sweep finds nothing left to decide.
    assert fold_recovery.recover_prepared(older_than=timedelta(0)) == []


def test_recover_discards_the_candidate_when_the_head_moved(
    pausing_worker: dict[str, Any], workspace: Any
) -> None:
    thread = f.make_thread(workspace, "killed-discard")
    seeds.refund_timeout(thread)
    prepared, _ = _fold_then_kill(pausing_worker, thread)
    seeds.routine_units(thread, 1)
    winner = folding.fold_run(thread_id=thread.pk, trigger=TRIGGER)  # another worker's fold
    assert winner is not None and winner.phase == SummaryPhase.COMMITTED
    call_command("recover", "--older-than", "0")
    prepared.refresh_from_db()
    assert prepared.phase == SummaryPhase.DISCARDED
    thread.refresh_from_db()
    assert (thread.head_version, thread.covered_until) == (winner.version, 8)
