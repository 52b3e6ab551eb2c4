"""The smoke version of bench/faults.py (docs/reliability.md, "Load with faults").

gunicorn with two workers, two Celery workers and a Redis of its own, over the PostgreSQL test
database; four clients append through a proxy that drops 5% of the answers after commit, folds
run throughout, a worker is SIGKILLed twice and Redis restarted once. Then: nothing lost or
duplicated, seq gapless, every chain verifies, every summary head caught up, every fold's task
run ended, no fork, no 5xx.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.reliability import faultload
from tests.stack import Gunicorn, Redis, Worker, process_env

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

PLAN = faultload.Plan(
    clients=4,
    events_per_client=48,
    threads=2,
    worker_kills=2,
    redis_restarts=1,
    fold_every=3,
    context_window=3000,
    settle_timeout=120,
)


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}?conn_max_age=0"


@pytest.fixture
def deployment(tmp_path: Path, workspace_and_key: tuple[Any, str]) -> Iterator[Any]:
    if connection.vendor != "postgresql":
        pytest.skip("gunicorn and Celery workers share the PostgreSQL test database")
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server: ./scripts/test installs it for the PostgreSQL run")
    redis = Redis(tmp_path / "redis").start()
    env = process_env(
        _database_url(),
        redis.url,
        tmp_path / "var",
        CTXADMIN_API_RATE="",
        CTXADMIN_PREPARED_TIMEOUT="10",
        CTXADMIN_BROKER_VISIBILITY_TIMEOUT="10",
    )
    (tmp_path / "var").mkdir()
    web = Gunicorn(env=env, log=tmp_path / "gunicorn.log")
    workers = [Worker(env=env, log=tmp_path / f"worker{n}.log", name=f"w{n}") for n in (1, 2)]
    try:
        web.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
        yield faultload.Deployment(
            gunicorn=web, workers=workers, redis=redis, env=env, api_key=workspace_and_key[1]
        )
    finally:
        for worker in workers:
            worker.stop()
        web.stop()
        redis.stop()
        connection.close()


def test_nothing_is_lost_under_dropped_answers_killed_workers_and_a_redis_restart(
    deployment: faultload.Deployment,
) -> None:
    outcome = faultload.run(PLAN, deployment, log=lambda _: None)
    figures = "\n".join(f"{k}: {v}" for k, v in faultload.table(outcome))
    assert outcome.client_errors == [], figures
    assert outcome.worker_kills == PLAN.worker_kills and outcome.redis_restarts == 1, figures
    assert outcome.stored == outcome.sent == 4 * 48, figures
    assert (outcome.lost, outcome.duplicated, outcome.seq_gaps) == (0, 0, 0), figures
    assert outcome.chains_ok == outcome.chains_total == 2, figures
    assert outcome.heads_caught_up == 2, figures
    assert outcome.forks == 0 and outcome.versions_committed >= 2, figures
    assert (outcome.fold_runs_open, outcome.fold_runs_failed) == (0, 0), figures
    assert outcome.answers_5xx == 0 and outcome.answers_dropped > 0, figures
    assert outcome.ok, figures
