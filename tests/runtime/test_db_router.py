"""The read-replica router (ctxadmin/db_router.py): which requests may read from the replica.
Transactional tests: inside a test's own transaction every read stays on the primary."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from ctxadmin.db_router import PIN_COOKIE, REPLICA, ReplicaReadsMiddleware, ReplicaRouter
from threads.models import Thread

router = ReplicaRouter()


@pytest.fixture
def with_replica(settings: Any) -> None:
    settings.DATABASES = {**settings.DATABASES, REPLICA: {**settings.DATABASES["default"]}}
    settings.CTXADMIN_REPLICA_PIN_SECONDS = 5


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
