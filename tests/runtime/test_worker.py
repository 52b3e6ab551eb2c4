"""Tasks through real workers: Redis + PostgreSQL (production's shape), and the embedded
default — a filesystem queue and SQLite, no service at all."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction

from tests import factories
from tests.factories import tamper
from tests.runtime.conftest import wait_for_task
from tests.runtime.test_integrity import fill
from threads.models import TaskState, Thread
from threads.services.tasks import task_run_start
from threads.tasks import verify_thread_task

ROOT = Path(__file__).resolve().parents[2]


def send_verify(thread: Thread) -> str:
    with transaction.atomic():
        run = task_run_start(
            workspace=thread.workspace,
            thread=thread,
            kind="verify",
            send=lambda task_id: verify_thread_task.apply_async((str(thread.pk),), task_id=task_id),
        )
    return run.id


@pytest.mark.postgres
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_verify_through_redis_and_the_worker(real_worker: None, workspace: Any) -> None:
    thread = factories.make_thread(workspace, "worker-verify")
    events = fill(thread, units=5)

    run = wait_for_task(send_verify(thread))
    assert run.state == TaskState.SUCCESS, run.result
    assert isinstance(run.result, dict)
    assert run.result["chain_ok"] is True
    assert run.result["verified_until"] == len(events)
    assert (run.done, run.total) == (len(events), len(events))
    thread.refresh_from_db()
    assert thread.verified_at is not None and thread.chain_ok

    tamper(events[9], status="timeout")  # seq 10
    run = wait_for_task(send_verify(thread))
    assert run.state == TaskState.SUCCESS and isinstance(run.result, dict), run.result
    assert (run.result["chain_ok"], run.result["first_bad_seq"]) == (False, 10)
    thread.refresh_from_db()
    assert (thread.chain_ok, thread.first_bad_seq) == (False, 10)


EMBEDDED_SEND = """
from django.db import transaction
from tests import factories
from tests.runtime.test_integrity import fill
from tests.runtime.test_worker import send_verify

workspace, _ = factories.make_workspace("embedded")
thread = factories.make_thread(workspace, "embedded-verify")
fill(thread, units=3)
print(send_verify(thread))
"""


def test_verify_on_the_embedded_default(tmp_path: Path) -> None:
    """No broker service, no PostgreSQL: a worker reads the filesystem queue on SQLite."""
    if connection.vendor != "sqlite":
        pytest.skip("the embedded default is SQLite: covered by the SQLite run")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CTXADMIN_TASKS_EAGER")
    }
    env.update(CTXADMIN_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="ctxadmin.settings")

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    manage("migrate", "--noinput")
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ctxadmin",
            "worker",
            "--pool=solo",
            "-Q",
            "celery",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        task_id = manage("shell", "-c", EMBEDDED_SEND).strip().splitlines()[-1]
        # The task waits in the queue folder until the worker takes it.
        db = sqlite3.connect(tmp_path / "ctxadmin.sqlite3", timeout=30)
        deadline = time.monotonic() + 120
        state, result = "PENDING", "null"
        while time.monotonic() < deadline:
            state, result = db.execute(
                "SELECT state, result FROM threads_taskrun WHERE id = ?", (task_id,)
            ).fetchone()
            if state in ("SUCCESS", "FAILURE"):
                break
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.3)
        db.close()
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        log.close()
    worker_log = (tmp_path / "worker.log").read_text()
    assert state == "SUCCESS", worker_log
    answer = json.loads(result)
    assert answer["chain_ok"] is True and answer["verified_until"] == 12
    assert "ctxadmin.verify_thread" in worker_log and "succeeded" in worker_log
