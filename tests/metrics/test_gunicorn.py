"""/metrics from a real gunicorn with two workers (docs/operations.md): requests spread over
both, and whichever worker answers the scrape, every counter holds the exact number of the
whole server, the process-local latency histogram included (multiprocess mode). On the
PostgreSQL run the fold and the chain check go through Redis to the real Celery worker, so
its counts are in the same figures; on the SQLite run gunicorn runs them itself (eager)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from tests import factories as f

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "gunicorn-metrics-token"


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if connection.vendor == "postgresql":
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}?conn_max_age=0"
    pytest.skip(f"no URL for {connection.vendor}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def gunicorn(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A gunicorn with two workers on a free port, over the test database; its URL and the
    multiprocess directory."""
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "PROMETHEUS_MULTIPROC_DIR": str(multiproc),
        "CTXADMIN_METRICS_TOKEN": TOKEN,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
    }
    if os.environ.get("CTXADMIN_TEST_WORKER") == "1" and os.environ.get("CELERY_BROKER_URL"):
        env["CTXADMIN_TASKS_EAGER"] = "0"  # tasks go through the broker to the real worker
    log = (tmp_path / "gunicorn.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:ctxadmin.gunicorn_conf",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "ctxadmin.wsgi",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, (tmp_path / "gunicorn.log").read_text()
            try:
                if httpx.get(f"{url}/metrics", headers=_auth(), timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
            time.sleep(0.3)
        yield url, multiproc
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    # A new connection per request: gunicorn's workers take connections as they come.
    response = httpx.get(f"{url}/metrics", headers=_auth(), timeout=30)
    assert response.status_code == 200, response.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def _histogram_pids(multiproc: Path) -> set[str]:
    return {p.stem.rsplit("_", 1)[-1] for p in multiproc.glob("histogram_*.db")}


def _finished(url: str, task_id: str, agent: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while True:
        task = httpx.get(f"{url}/api/v1/tasks/{task_id}/", headers=agent, timeout=30).json()
        if task["state"] in ("SUCCESS", "FAILURE"):
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.3)


def test_counters_are_exact_across_two_gunicorn_workers(
    gunicorn: tuple[str, Path], workspace_and_key: tuple[Any, str]
) -> None:
    url, multiproc = gunicorn
    workspace, key = workspace_and_key
    thread = f.make_thread(workspace, external_id="spread")
    agent = {"Authorization": f"Bearer {key}"}
    events = f"{url}/api/v1/threads/{thread.pk}/events/"
    appended = 0
    for n in range(6):
        batch = {"events": [f.user(f"question {n}"), f.assistant(f"answer {n}")]}
        response = httpx.post(events, json=batch, headers=agent, timeout=30)
        assert response.status_code == 201, response.text
        appended += 2
    context = f"{url}/api/v1/threads/{thread.pk}/context/"
    requests = 0
    # Until both workers have answered a context request (and at least 10 of them).
    while requests < 10 or len(_histogram_pids(multiproc)) < 2:
        assert requests < 300, "every request went to one worker"
        assert httpx.get(context, headers=agent, timeout=30).status_code == 200
        requests += 1
    overflow = httpx.get(context, params={"window": 1}, headers=agent, timeout=30)
    assert overflow.status_code == 422
    requests += 1

    # Work for Celery: a fold and a chain check.
    for action in ("fold", "verify"):
        queued = httpx.post(
            f"{url}/api/v1/threads/{thread.pk}/{action}/", headers=agent, timeout=30
        )
        assert queued.status_code == 202, queued.text
        assert _finished(url, queued.json()["task_id"], agent)["state"] == "SUCCESS"

    for _ in range(4):  # whichever worker answers
        samples = _scrape(url)
        assert samples[("ctxadmin_events_appended_total", (("kind", "message"),))] == appended
        assert samples[("ctxadmin_context_requests_total", ())] == requests
        assert samples[("ctxadmin_context_overflows_total", ())] == 1
        assert samples[("ctxadmin_context_request_seconds_count", ())] == requests
        assert samples[("ctxadmin_folds_total", (("outcome", "committed"),))] == 1
        assert samples[("ctxadmin_verify_runs_total", ())] == 1
