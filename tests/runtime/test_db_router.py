"""The read-replica router (ctxadmin/db_router.py): which requests may read from the replica,
and what a page does when the replica cannot serve it (the verdict is stubbed here; a real
streaming replica is in tests/runtime/test_replica_failsafe.py). Transactional tests: inside a
test's own transaction every read stays on the primary."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from ctxadmin import db_router
from ctxadmin.db_router import PIN_COOKIE, REPLICA, ReplicaReadsMiddleware, ReplicaRouter
from threads.database.replica import REPLICA_FALLBACKS
from threads.models import Thread

router = ReplicaRouter()


@pytest.fixture
def verdict(monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """What the replica's check answers (and whether it was asked afresh)."""
    answer: dict[str, Any] = {"reason": None, "fresh": 0}

    def unusable(*, fresh: bool = False) -> str | None:
        answer["fresh"] += int(fresh)
        return answer["reason"]

    monkeypatch.setattr(db_router, "replica_unusable", unusable)
    return answer


@pytest.fixture
def with_replica(settings: Any, verdict: dict[str, Any]) -> None:
    settings.DATABASES = {**settings.DATABASES, REPLICA: {**settings.DATABASES["default"]}}
    settings.CTXADMIN_REPLICA_PIN_SECONDS = 5


def fallbacks(reason: str) -> float:
    return REPLICA_FALLBACKS.labels(reason=reason)._value.get()


def serve(request: HttpRequest) -> tuple[dict[str, Any], HttpResponse]:
    """Run a request through the middleware; what the router answered inside the view."""
    seen: dict[str, Any] = {}

    def view(request: HttpRequest) -> HttpResponse:
        seen["read"] = router.db_for_read(Thread)
        seen["write"] = router.db_for_write(Thread)
        with transaction.atomic():
            seen["read_in_transaction"] = router.db_for_read(Thread)
        return HttpResponse("ok")

    return seen, ReplicaReadsMiddleware(view)(request)


@pytest.mark.django_db(transaction=True)
def test_dashboard_pages_read_the_replica_outside_transactions(with_replica: None) -> None:
    seen, _ = serve(RequestFactory().get("/threads/"))
    assert seen == {"read": REPLICA, "write": "default", "read_in_transaction": None}
    # Outside a request nothing is routed there.
    assert router.db_for_read(Thread) is None


@pytest.mark.django_db(transaction=True)
def test_api_and_posts_stay_on_the_primary(with_replica: None) -> None:
    seen, _ = serve(RequestFactory().get("/api/v1/threads/"))
    assert seen["read"] is None
    seen, response = serve(RequestFactory().post("/threads/t-1/fold/"))
    assert seen["read"] is None
    # The pages after a person's own write are pinned to the primary for a few seconds.
    pinned = int(response.cookies[PIN_COOKIE].value)
    assert time.time() < pinned <= time.time() + 5
    request = RequestFactory().get("/threads/t-1/")
    request.COOKIES[PIN_COOKIE] = str(pinned)
    assert serve(request)[0]["read"] is None
    request.COOKIES[PIN_COOKIE] = str(int(time.time()) - 1)
    assert serve(request)[0]["read"] == REPLICA


@pytest.mark.django_db(transaction=True)
def test_without_a_replica_everything_reads_the_primary() -> None:
    seen, _ = serve(RequestFactory().get("/threads/"))
    assert seen["read"] is None


def test_migrations_run_on_the_primary_only() -> None:
    assert router.allow_migrate("default", "threads")
    assert not router.allow_migrate(REPLICA, "threads")


@pytest.mark.django_db(transaction=True)
def test_sessions_and_authentication_read_the_primary(with_replica: None) -> None:
    seen: dict[str, Any] = {}

    def view(request: HttpRequest) -> HttpResponse:
        seen["session"] = router.db_for_read(Session)
        seen["user"] = router.db_for_read(User)
        seen["thread"] = router.db_for_read(Thread)
        return HttpResponse("ok")

    ReplicaReadsMiddleware(view)(RequestFactory().get("/threads/"))
    assert seen == {"session": None, "user": None, "thread": REPLICA}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("reason", ["unavailable", "lagging"])
def test_an_unusable_replica_sends_pages_to_the_primary_and_counts_them(
    with_replica: None, verdict: dict[str, Any], reason: str
) -> None:
    verdict["reason"] = reason
    before = fallbacks(reason)
    seen, response = serve(RequestFactory().get("/threads/"))
    assert seen["read"] is None and response.status_code == 200
    assert fallbacks(reason) == before + 1
    # Pages that never read the replica are not counted.
    serve(RequestFactory().get("/api/v1/threads/"))
    assert fallbacks(reason) == before + 1


@pytest.mark.django_db(transaction=True)
def test_a_404_on_the_replica_is_asked_again_of_the_primary(with_replica: None) -> None:
    reads: list[str | None] = []

    def view(request: HttpRequest) -> HttpResponse:
        reads.append(router.db_for_read(Thread))
        return HttpResponse(
            "found" if reads[-1] is None else "", status=200 if reads[-1] is None else 404
        )

    response = ReplicaReadsMiddleware(view)(RequestFactory().get("/threads/t-new/"))
    assert reads == [REPLICA, None]
    assert response.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_page_the_replica_failed_is_served_from_the_primary(
    with_replica: None, verdict: dict[str, Any]
) -> None:
    reads: list[str | None] = []

    def view(request: HttpRequest) -> HttpResponse:
        reads.append(router.db_for_read(Thread))
        if reads[-1] == REPLICA:
            verdict["reason"] = "unavailable"  # it went away mid-page
            return HttpResponse("", status=503)
        return HttpResponse("ok")

    before = fallbacks("unavailable")
    response = ReplicaReadsMiddleware(view)(RequestFactory().get("/threads/"))
    assert reads == [REPLICA, None] and response.status_code == 200
    assert verdict["fresh"] == 1
    assert fallbacks("unavailable") == before + 1
    # A server error the replica did not cause is the page's own.
    reads.clear()
    verdict["reason"] = None

    def broken(request: HttpRequest) -> HttpResponse:
        reads.append(router.db_for_read(Thread))
        return HttpResponse("", status=500)

    assert ReplicaReadsMiddleware(broken)(RequestFactory().get("/threads/")).status_code == 500
    assert reads == [REPLICA]
