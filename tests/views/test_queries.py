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
from threads.models import Event
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db

LIST_PAGES = [
    "/threads/",
    "/threads/?unknown=1&pending=1&over_budget=1&sort=-history",
    "/threads/?q=order&content=1",
    "/threads/?sort=-severity",
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
    # session, user, the person's workspaces (read first, so the list's queries hold them as
    # values: docs/scale.md, "What one database holds"), count, the page with every flag as a
    # subquery, the top bar's workspaces
    with django_assert_num_queries(6):
        operator.get("/threads/")


def add_broken_stories(workspace: Any, count: int, start: int) -> None:
    """Stories whose chain breaks after v1's checkpoint: each has a last safe checkpoint."""
    for n in range(start, start + count):
        story = build_story(f.make_thread(workspace, external_id=f"broken-{n}"))
        f.tamper(Event.objects.get(thread=story, seq=6), content="I never asked for a refund")
        integrity_check(thread=story, full=True)


def test_integrity_page_does_not_grow_with_broken_chains(
    operator: Client, workspace: Any, django_assert_max_num_queries: Callable[..., Any]
) -> None:
    """The last safe checkpoint of every broken chain on the page comes from one query."""
    add_broken_stories(workspace, 2, 0)
    few = queries(operator, "/integrity/")
    add_broken_stories(workspace, 6, 100)
    with django_assert_max_num_queries(few):
        page = operator.get("/integrity/").content.decode()
    assert page.count("last safe: ") == 8


def test_thread_pages_do_not_grow_with_the_log(operator: Client, workspace: Any) -> None:
    """The timeline reads one window of events; the context reads only events after the
    head summary; neither issues a query per event."""
    thread = f.make_thread(workspace, external_id="long")
    f.append(thread, *[f.user(f"message {n}") for n in range(60)])
    urls = [f"/threads/{thread.pk}/", f"/threads/{thread.pk}/context/"]
    before = [queries(operator, url) for url in urls]
    f.append(thread, *[f.user(f"message {n}") for n in range(60, 600)])
    assert [queries(operator, url) for url in urls] == before
