"""Imports cannot starve the workers (docs/operations.md, Redis and Celery): imports run on a
queue of their own, so a fold requested while large imports run is done while they still run.

On the PostgreSQL run of ./scripts/test, with its two real workers on Redis: one on the
default queue `celery` (folds, verification, recovery), one on `imports`. Two large imports
are uploaded first (were they on the default queue, they would hold both of its processes and
the fold would wait behind them, as issue #27 found); the fold must finish while one is still
importing and the other still waits. Both are then cancelled by an admin: the pending one at
once, the running one before its next conversation.

However fast the machine, the running import cannot finish under the fold: once it has
started, the test holds its row locked from a connection of its own, so the import waits at
its next progress write (every half second) until the fold is done.
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

# Enough one-message conversations that importing them takes far longer than a fold.
CONVERSATIONS = 9000  # under the default limit of 10,000 per import


def _large_file(tag: str) -> bytes:
    return json.dumps(
        [
            {"id": f"{tag}-{n}", "messages": [{"role": "user", "content": f"hello {n}"}]}
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
def _row_held(import_id: Any) -> Iterator[None]:
    """Lock an import's row from another connection until the block ends: its worker's next
    progress write waits for it."""
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
            other.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE", [str(import_id)])
            yield


def _fold_while_importing(
    thread: Thread, first: Any, second: Any, admin_client_ws: APIClient
) -> None:
    # One import is under way on the imports worker (the worker takes them one at a time, in
    # whichever order the broker hands them over).
    running_id = _until(
        "an import to start",
        lambda: (
            TraceImport.objects.filter(
                pk__in=(first, second), state=ImportState.RUNNING, conversations_done__gt=0
            )
            .values_list("pk", flat=True)
            .first()
        ),
    )
    waiting_id = second if str(running_id) == str(first) else first

    with _row_held(running_id):
        run = fold_requests.fold_request(
            thread=Thread.objects.get(pk=thread.pk), trigger={"kind": "manual"}
        )
        done = wait_for_task(run.pk, timeout=120)
        assert done.state == TaskState.SUCCESS, done.result
        assert done.result is not None and done.result["folded"] is True, done.result
        # The fold finished while the imports had not: one still importing, the other still
        # waiting for the imports worker.
        running = TraceImport.objects.get(pk=running_id)
        waiting = TraceImport.objects.get(pk=waiting_id)
        assert running.state == ImportState.RUNNING, running.state
        assert running.conversations_done < CONVERSATIONS
        assert waiting.state == ImportState.PENDING, waiting.state

    # An admin cancels both: the waiting one ends at once, the running one between two
    # conversations, keeping (and reporting) those it imported.
    token = _get_new_csrf_string()
    admin_client_ws.cookies["csrftoken"] = token
    for import_id in (waiting_id, running_id):
        answer = admin_client_ws.post(
            f"/api/v1/imports/{import_id}/cancel/", HTTP_X_CSRFTOKEN=token
        )
        assert answer.status_code == 200, answer.content
    assert TraceImport.objects.get(pk=waiting_id).state == ImportState.CANCELLED
    ended = _until(
        "the running import to stop",
        lambda: TraceImport.objects.filter(pk=running_id, state=ImportState.CANCELLED).first(),
    )
    assert 0 < ended.conversations_done < CONVERSATIONS
    assert len(ended.report) == ended.conversations_done
    running_tag = ended.file_name.removesuffix(".json")
    waiting_tag = waiting.file_name.removesuffix(".json")
    imported = Thread.objects.filter(external_id__startswith=f"{running_tag}-").count()
    assert imported == ended.conversations_done
    assert not Thread.objects.filter(external_id__startswith=f"{waiting_tag}-").exists()
    assert "cancelled by admin-user" in ended.error
