"""A database that refuses writes for a while (docs/api.md, "Codes" `database_unavailable`).

SQLite: another connection holds the write lock (BEGIN IMMEDIATE) for 10 s; each write waits
the busy timeout (shortened here from CTXADMIN_SQLITE_BUSY_TIMEOUT to 1 s) and answers 503.
PostgreSQL: `ALTER DATABASE … SET default_transaction_read_only = on`, with the database's
sessions terminated so that it takes effect, for 10 s. Either way: API writes answer the
contract's 503 with Retry-After, a dashboard POST answers the 503 page, nothing is half
written (events, the thread's head and the audit log agree), and once the database takes
writes again the same process serves them, with no restart. On PostgreSQL the real Celery
worker's fold retries until it can commit rather than failing.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from celery import Celery
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from threads.models import AuditEntry, Event, SummaryVersion, TaskRun, Thread
from threads.services.tasks import task_run_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_fold_triggers")]

REFUSED_FOR = 10.0  # seconds the database refuses writes


def _state(thread: Thread) -> tuple[Any, ...]:
    thread.refresh_from_db()
    return (
        thread.last_seq,
        thread.chain_head,
        Event.objects.filter(thread=thread).count(),
        AuditEntry.objects.filter(workspace=thread.workspace).count(),
        thread.checkpoints.count(),
    )


@pytest.fixture
def sqlite_locked() -> Iterator[Any]:
    """A function that holds the SQLite write lock from another connection until released."""
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite write lock")
    options = connection.settings_dict["OPTIONS"]
    saved = options.get("timeout")
    options["timeout"] = 1.0
    connection.close()  # reconnect with the short busy timeout
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=30, isolation_level=None)

    class Lock:
        def take(self) -> None:
            holder.execute("BEGIN IMMEDIATE")

        def release(self) -> None:
            holder.execute("ROLLBACK")

    try:
        yield Lock()
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
        options["timeout"] = saved
        connection.close()


def _pg_admin() -> psycopg.Connection[Any]:
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )


@pytest.fixture
def pg_read_only() -> Iterator[Any]:
    """A function that makes the PostgreSQL test database read-only until released."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's default_transaction_read_only")
    name = connection.settings_dict["NAME"]
    admin = _pg_admin()

    class ReadOnly:
        def take(self) -> None:
            admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
            # A session keeps the default it started with: end them all, so this takes effect.
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )

        def reconnect(self) -> None:
            # The test's own session was ended too: its next query opens a new one.
            connection.close()

        def release(self) -> None:
            admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')

    try:
        yield ReadOnly()
    finally:
        admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        admin.close()
        connection.close()


@pytest.fixture
def refusing(request: pytest.FixtureRequest) -> Any:
    """The database of this run, refusing writes when told: SQLite locked, PostgreSQL
    read-only."""
    name = "sqlite_locked" if connection.vendor == "sqlite" else "pg_read_only"
    return request.getfixturevalue(name)


def _refused(response: Any) -> None:
    assert response.status_code == 503, response.content[:500]
    assert response["Retry-After"].isdigit() and int(response["Retry-After"]) > 0


def test_writes_answer_503_and_resume_by_themselves(refusing: Any, workspace: Any) -> None:
    api_key = f.make_workspace("refusing")[1]
    thread = Thread.objects.get(pk=_create_thread(api_key))
    ws = thread.workspace
    operator = f.make_person(ws, "operator-refusing", "operator")
    page = Client()
    page.force_login(operator)
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    events_url = f"/api/v1/threads/{thread.pk}/events/"
    assert agent.post(events_url, {"events": [f.user("before")]}, format="json").status_code == 201
    before = _state(thread)

    refusing.take()
    refused_api = refused_pages = 0
    try:
        until = time.monotonic() + REFUSED_FOR
        n = 0
        while time.monotonic() < until:
            body = {"events": [{**f.user(f"during {n}"), "client_event_id": f"during-{n}"}]}
            answer = agent.post(events_url, body, format="json")
            _refused(answer)
            assert answer.json()["error"]["code"] == "database_unavailable"
            assert set(answer.json()["error"]) == {"code", "message", "fields"}
            refused_api += 1
            shown = page.post(f"/threads/{thread.pk}/checkpoints/new/", {"label": f"cp {n}"})
            _refused(shown)
            assert b"Nothing was saved" in shown.content
            refused_pages += 1
            n += 1
    finally:
        refusing.release()
    assert refused_api >= 2 and refused_pages >= 2
    assert _state(thread) == before  # nothing half-written

    # The same process serves writes again. A PostgreSQL session opened while the database
    # was read-only keeps that default until its first refusal closes it: one 503 at most.
    after = {"events": [{**f.user("after"), "client_event_id": "after-1"}, f.assistant("ok")]}
    answers = [agent.post(events_url, after, format="json")]
    if answers[0].status_code == 503:
        answers.append(agent.post(events_url, after, format="json"))
    assert answers[-1].status_code == 201, answers[-1].content
    shown = page.post(f"/threads/{thread.pk}/checkpoints/new/", {"label": "after"})
    assert shown.status_code in (200, 302), shown.content[:300]
    thread.refresh_from_db()
    assert thread.last_seq == before[0] + 2
    assert list(Event.objects.filter(thread=thread).values_list("seq", flat=True)) == [1, 2, 3]


def _create_thread(api_key: str) -> str:
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    created = agent.post("/api/v1/threads/", {"external_id": "refusing"}, format="json")
    assert created.status_code in (200, 201), created.content
    return str(created.json()["id"])


def test_a_worker_fold_retries_until_the_database_takes_writes(
    pg_read_only: Any, workspace: Any
) -> None:
    """The real worker of ./scripts/test gets the fold while the database is read-only: its
    task retries (Retry-After, doubling) instead of failing, and commits once it is writable."""
    redis_url = os.environ.get("CTXADMIN_TEST_REDIS_URL")
    if os.environ.get("CTXADMIN_TEST_WORKER") != "1" or not redis_url:
        pytest.skip("needs the Celery worker that ./scripts/test starts on PostgreSQL")
    thread = f.make_thread(workspace, "refusing-fold")
    for n in range(3):
        f.append(thread, f.user(f"question {n}"), f.assistant(f"answer {n}"))
    sender = Celery(broker=redis_url, set_as_current=False)
    trigger = {"kind": "manual", "reason": "refusing database"}
    # The run row is written while the database still takes writes; the task is sent once it
    # refuses them.
    run = task_run_start(workspace=workspace, thread=thread, kind="fold", send=lambda _: None)
    pg_read_only.take()
    pg_read_only.reconnect()
    try:
        sender.send_task(
            "ctxadmin.fold_thread", args=(str(thread.pk), trigger), task_id=run.pk, queue="celery"
        )
        until = time.monotonic() + REFUSED_FOR
        while time.monotonic() < until:
            assert TaskRun.objects.get(pk=run.pk).state != "FAILURE"
            time.sleep(0.5)
        assert not SummaryVersion.objects.filter(thread=thread).exists()
    finally:
        pg_read_only.release()
    deadline = time.monotonic() + 120
    while (state := TaskRun.objects.get(pk=run.pk).state) not in ("SUCCESS", "FAILURE"):
        assert time.monotonic() < deadline, state
        time.sleep(0.5)
    assert state == "SUCCESS", TaskRun.objects.get(pk=run.pk).result
    thread.refresh_from_db()
    assert thread.head_version == 1 and thread.covered_until == 6
    assert SummaryVersion.objects.filter(thread=thread, phase="committed").count() == 1
