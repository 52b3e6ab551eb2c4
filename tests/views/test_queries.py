"""List pages cost a fixed number of queries whatever the number of rows (no N+1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests import factories as f
from tests.views.conftest import build_story

pytestmark = pytest.mark.django_db

LIST_PAGES = [
    "/threads/",
    "/threads/?unknown=1&pending=1&over_budget=1&sort=-history",
    "/threads/?q=order&content=1",
    "/side-effects/",
    "/approvals/",
    "/integrity/",
    "/audit/",
]


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def add_stories(workspace: Any, count: int, start: int) -> None:
    for n in range(start, start + count):
        build_story(f.make_thread(workspace, external_id=f"order-{n}"))


@pytest.mark.parametrize("url", LIST_PAGES)
def test_list_pages_do_not_grow_with_rows(operator: Client, workspace: Any, url: str) -> None:
    add_stories(workspace, 2, 0)
    few = queries(operator, url)
    add_stories(workspace, 6, 100)
    assert queries(operator, url) == few


def test_thread_list_query_budget(
    operator: Client, workspace: Any, django_assert_num_queries: Callable[..., Any]
) -> None:
    add_stories(workspace, 4, 0)
    operator.get("/threads/")  # warm the session
    # session, user, count, the page with every flag as a subquery, the top bar's workspaces
    with django_assert_num_queries(5):
        operator.get("/threads/")


def test_thread_pages_do_not_grow_with_the_log(operator: Client, workspace: Any) -> None:
    """The timeline reads one window of events; the context reads only events after the
    head summary; neither issues a query per event."""
    thread = f.make_thread(workspace, external_id="long")
    f.append(thread, *[f.user(f"message {n}") for n in range(60)])
    urls = [f"/threads/{thread.pk}/", f"/threads/{thread.pk}/context/"]
    before = [queries(operator, url) for url in urls]
    f.append(thread, *[f.user(f"message {n}") for n in range(60, 600)])
    assert [queries(operator, url) for url in urls] == before
