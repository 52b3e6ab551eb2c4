"""Imports cannot starve the workers (docs/operations.md, "Redis and Celery"): imports run on a
queue of their own, so a fold requested while large imports run is done while they still run.

On the PostgreSQL run of ./scripts/test, with its two real workers on Redis: one on the
default queue `celery` (folds, verification, recovery), one on `imports`. Two large imports
are uploaded; the test then holds both import rows locked from a connection of its own, so
whichever import a worker runs waits on the lock (at its start or at its next progress write)
and holds that worker's process. The fold must finish while one import waits so: were imports
on the default queue, as issue #27 found, they would hold both of its processes and the fold
would wait behind them. Both are then cancelled by an admin.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.middleware.csrf import _get_new_csrf_string
from rest_framework.test import APIClient

from integrations.trace_imports.models import ImportState, TraceImport
from integrations.trace_imports.services.uploads import import_cancel
from tests import factories as f
from tests.runtime.conftest import real_worker, wait_for_task  # noqa: F401 (a fixture)
from threads.models import TaskState, Thread
from threads.services import fold_requests

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    # The test's own appends start no fold: the one fold is the one it requests.
    pytest.mark.usefixtures("real_worker", "no_fold_triggers"),
]

# Enough conversations that importing one file takes far longer than uploading the next.
CONVERSATIONS = 9000  # under the default limit of 10,000 per import
MESSAGES = 6


def _large_file(tag: str) -> bytes:
    return json.dumps(
        [
            {
                "id": f"{tag}-{n}",
                "messages": [
                    {"role": "user" if m % 2 == 0 else "assistant", "content": f"hello {n}.{m}"}
                    for m in range(MESSAGES)
                ],
            }
            for n in range(CONVERSATIONS)
        ]
    ).encode()


def _until(what: str, check: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.1)
    return value


def test_a_fold_is_done_while_large_imports_run(
    agent: APIClient, admin_client_ws: APIClient, workspace: Any
) -> None:
    workspace.agents_may_import = True
    workspace.save(update_fields=["agents_may_import"])
    thread = f.make_thread(workspace, "fold-me")
    for n in range(3):
        f.append(thread, f.user(f"question {n}"), f.assistant(f"answer {n}"))
    import_ids = []
    for tag in ("big-a", "big-b"):
        answer = agent.post(
            "/api/v1/imports/",
            {"file": SimpleUploadedFile(f"{tag}.json", _large_file(tag)), "format": "openai-chat"},
            format="multipart",
        )
        assert answer.status_code == 202, answer.content
        import_ids.append(answer.json()["import_id"])
    first, second = import_ids
    try:
        _fold_while_importing(thread, first, second, admin_client_ws)
    finally:
        # Whatever happened above, no import goes on writing after the test: the next test's
        # database would get its rows.
        for import_id in import_ids:
            found = TraceImport.objects.get(pk=import_id)
            live = found.state in (ImportState.PENDING, ImportState.RUNNING)
            if live and found.cancel_requested_at is None:
                admin = get_user_model().objects.get(username="admin-user")
                import_cancel(trace_import=found, actor=admin)
        _until(
            "the imports to stop",
            lambda: (
                not TraceImport.objects.filter(
                    pk__in=import_ids, state__in=(ImportState.PENDING, ImportState.RUNNING)
                ).exists()
            ),
        )


@contextmanager
def _rows_held(*import_ids: Any) -> Iterator[psycopg.Connection]:
    """Lock the imports' rows from another connection until the block ends: a worker's next
    write to one of them (its start, its progress) waits for it."""
    params = connection.settings_dict
    with psycopg.connect(
        dbname=params["NAME"],
        user=params["USER"],
        password=params["PASSWORD"] or None,
        host=params["HOST"] or None,
        port=params["PORT"] or None,
    ) as other:
        with other.transaction():
            table = TraceImport._meta.db_table
            other.execute(
                f"SELECT 1 FROM {table} WHERE id = ANY(%s) FOR UPDATE",
                [[str(i) for i in import_ids]],
            )
            yield other


def _waiting_on_locks(other: psycopg.Connection) -> int:
    """How many other sessions of the database wait for a lock (a worker on an import row)."""
    row = other.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    ).fetchone()
    return int(row[0]) if row else 0


def _sessions(other: psycopg.Connection) -> list[Any]:
    """What every other session of the test database is doing (for a failure's message)."""
    return other.execute(
        "SELECT pid, state, wait_event_type, wait_event, left(query, 120) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchall()


def _fold_while_importing(
    thread: Thread, first: Any, second: Any, admin_client_ws: APIClient
) -> None:
    with _rows_held(first, second) as other:
        # The imports worker has taken one of them and waits on its row.
        _until("an import's worker to wait on its row", lambda: _waiting_on_locks(other) >= 1)
        run = fold_requests.fold_request(
            thread=Thread.objects.get(pk=thread.pk), trigger={"kind": "manual"}
        )
        try:
            done = wait_for_task(run.pk, timeout=120)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the database's sessions: {_sessions(other)}") from None
        assert done.state == TaskState.SUCCESS, done.result
        assert done.result is not None and done.result["folded"] is True, done.result
        # The fold was done while one worker process, and one only, was held by an import.
        assert _waiting_on_locks(other) == 1
        states = set(
            TraceImport.objects.filter(pk__in=(first, second)).values_list("state", flat=True)
        )
        assert states <= {ImportState.PENDING, ImportState.RUNNING}, states

    # An admin cancels both: the one not started ends at once, the one running between two
    # conversations, keeping (and reporting) those it imported.
    token = _get_new_csrf_string()
    admin_client_ws.cookies["csrftoken"] = token
    for import_id in (second, first):
        answer = admin_client_ws.post(
            f"/api/v1/imports/{import_id}/cancel/", HTTP_X_CSRFTOKEN=token
        )
        assert answer.status_code == 200, answer.content
    for import_id in (first, second):
        ended = _until(
            "the imports to stop",
            lambda import_id=import_id: TraceImport.objects.filter(
                pk=import_id, state=ImportState.CANCELLED
            ).first(),
        )
        assert ended.conversations_done < CONVERSATIONS
        assert len(ended.report) == ended.conversations_done
        tag = ended.file_name.removesuffix(".json")
        imported = Thread.objects.filter(external_id__startswith=f"{tag}-").count()
        assert imported == ended.conversations_done
        assert "cancelled by admin-user" in ended.error
