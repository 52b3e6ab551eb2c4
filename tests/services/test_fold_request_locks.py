"""A fold request locks its thread's row and nothing else (threads.services.fold_requests): the
other agents of the workspace never wait for it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import close_old_connections, connection, transaction

from tests import factories as f
from threads.models import TaskRun
from threads.services import fold_requests

MANUAL = {"kind": "manual", "reason": "test"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_fold_request_waits_for_no_other_agent_of_its_workspace(workspace: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("two transactions at once need PostgreSQL")
    thread = f.make_thread(workspace, "folding")
    neighbour = f.make_thread(workspace, "also-folding")
    for each in (thread, neighbour):
        f.append(each, f.user("hello"))
    started, finish = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def another_thread_asks_for_a_fold() -> None:
        # Another thread of the same workspace asks for its fold, in a transaction that has
        # not committed yet (a rollback asks inside its own).
        try:
            with transaction.atomic():
                fold_requests.fold_request(thread=neighbour, trigger=MANUAL)
                started.set()
                finish.wait(10)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
            started.set()
        finally:
            close_old_connections()
            connection.close()

    other = threading.Thread(target=another_thread_asks_for_a_fold)
    other.start()
    try:
        assert started.wait(10)
        with connection.cursor() as cursor:
            # Waiting at all is the failure: a second is far more than the request needs.
            cursor.execute("SET lock_timeout = '1s'")
        try:
            run = fold_requests.fold_request(thread=thread, trigger=MANUAL)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
    finally:
        finish.set()
        other.join(10)
    assert not errors
    assert TaskRun.objects.filter(pk=run.pk, thread=thread).exists()
