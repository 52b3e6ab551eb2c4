"""Long bodies on the dashboard: a page carries a bounded preview of each body with its size,
and the event's body route (`/threads/{id}/events/{seq}/body/`) answers the whole text, with
the timeline's access rules and with agent text inert."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.views.conftest import login
from tests.views.test_inert_text import inspect
from threads.models import Thread
from threads.views.present import BODY_SHOWN_CHARS

pytestmark = pytest.mark.django_db

MIB = 1 << 20
EVENTS = 30
# The event's JSON must fit in CTXADMIN_MAX_EVENT_BYTES (1 MiB): the body is 1 MiB less the
# envelope of the event around it.
BODY_CHARS = MIB - 512
PAGE_BOUND = 1_000_000  # bytes of HTML for the whole page of 30 such events


def big_text(n: int) -> str:
    """About 1 MiB of words, different per event, that names its event at start and end."""
    words = " ".join(f"e{n}w{i}" for i in range(BODY_CHARS // 4))
    tail = f" END-OF-EVENT-{n}"
    return f"START-OF-EVENT-{n} " + words[: BODY_CHARS - len(tail) - 20] + tail


def pre_text(fragment: str) -> str:
    match = re.search(r"<pre>(.*)</pre>", fragment, re.S)
    assert match, fragment[:200]
    return html.unescape(match.group(1))


@pytest.fixture
def huge(workspace: Any) -> Thread:
    """30 events of about 1 MiB each: user messages, tool results, a side-effecting call and
    an approval request whose arguments are 1 MiB too."""
    # A window that holds them all, so the context page shows every body too.
    thread = f.make_thread(workspace, external_id="huge", context_window=100_000_000)
    bodies: list[dict[str, Any]] = []
    for n in range(1, EVENTS - 1, 2):  # 14 user messages and 14 tool results
        bodies.append(f.user(big_text(n)))
        bodies.append(f.call(f"c{n}", "fetch", {"url": f"/{n}"}))
        bodies.append(f.result(f"c{n}", value=big_text(n + 1)))
    bodies.append(
        f.call("pay", "refund", {"blob": big_text(EVENTS - 1)}, side_effect_key="refund-1")
    )
    bodies.append(f.result("pay", status="timeout"))
    bodies.append(
        {"kind": "approval_request", "action": "refund", "arguments": {"blob": big_text(EVENTS)}}
    )
    for body in bodies:
        f.append(thread, body)
    thread.refresh_from_db()
    return thread


def test_pages_with_30_bodies_of_1_mib_stay_small_and_show_sizes(
    operator: Client, huge: Thread
) -> None:
    base = f"/threads/{huge.pk}/"
    shown = re.compile(r"Showing the first 4\.0\xa0KB of 10[0-9]{2}\.[0-9]\xa0KB")
    for url in (f"{base}?from=1", f"{base}context/", "/side-effects/", "/approvals/"):
        response = operator.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        assert len(response.content) < PAGE_BOUND, (url, len(response.content))
        assert shown.search(page), url
        assert "Show all" in page, url
        assert "START-OF-EVENT-" in page and "END-OF-EVENT-" not in page, url
        assert not inspect(page), url
    # The timeline: each of the 30 bodies is cut, each with its own "show all".
    timeline = operator.get(f"{base}?from=1").content.decode()
    assert len(shown.findall(timeline)) == EVENTS
    cut = sorted(int(s) for s in re.findall(rf'hx-get="{base}events/(\d+)/body/"', timeline))
    assert len(cut) == EVENTS and len(set(cut)) == EVENTS
    assert all(f"START-OF-EVENT-{n} " in timeline for n in range(1, EVENTS + 1))
    # One event expanded from a summary's sources is cut the same way.
    one = operator.get(f"{base}events/1/")
    assert len(one.content) < 3 * BODY_SHOWN_CHARS + 4000
    assert "Show all" in one.content.decode()


def test_the_body_route_answers_the_exact_whole_text(operator: Client, huge: Thread) -> None:
    base = f"/threads/{huge.pk}/events"
    plain = operator.get(f"{base}/1/body/")
    assert plain.status_code == 200
    assert plain["Content-Type"] == "text/plain; charset=utf-8"
    assert plain["X-Content-Type-Options"] == "nosniff"
    assert plain.content.decode() == big_text(1)
    fragment = operator.get(f"{base}/3/body/", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    text = fragment.content.decode()
    assert text.startswith('<div class="body-full" hx-disable>')
    assert pre_text(text) == big_text(2)  # seq 3 is the result carrying event text 2


def test_a_short_body_is_shown_whole_with_no_show_all(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="short")
    text = "x " * (BODY_SHOWN_CHARS // 2)  # exactly at the bound: nothing is cut
    f.append(thread, f.user(text), f.assistant("ok"))
    page = operator.get(f"/threads/{thread.pk}/?from=1").content.decode()
    assert "Show all" not in page and "body-cut" not in page
    assert html.escape(text.strip()) in page
    f.append(thread, f.user(text + "y"))
    page = operator.get(f"/threads/{thread.pk}/?from=1").content.decode()
    assert page.count("Show all") == 1


HOSTILE = '<script>alert(1)</script><div hx-get="/evil" hx-trigger="load">'


def test_the_whole_body_stays_inert(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="hostile-long")
    text = HOSTILE + "a " * BODY_SHOWN_CHARS + HOSTILE
    f.append(thread, f.user(text))
    page = operator.get(f"/threads/{thread.pk}/?from=1").content.decode()
    assert "Show all" in page and not inspect(page)
    fragment = operator.get(
        f"/threads/{thread.pk}/events/1/body/", headers={"HX-Request": "true"}
    ).content.decode()
    assert not inspect(fragment)
    assert pre_text(fragment) == text
    assert fragment.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2


def test_the_body_route_follows_the_timeline_access_rules(client: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="private")
    f.append(thread, f.user("secret " * 1000))
    url = f"/threads/{thread.pk}/events/1/body/"
    assert client.get(url).status_code == 302  # strangers log in first
    other, _ = f.make_workspace("globex")
    outsider = login(other, "admin", username="outsider")
    assert outsider.get(url).status_code == 404  # another workspace: not found, never 403
    assert outsider.get(f"/threads/{thread.pk}/").status_code == 404
    member = login(workspace, "operator", username="member")
    assert member.get(url).status_code == 200
    assert member.get(f"/threads/{thread.pk}/events/2/body/").status_code == 404
    assert member.post(url).status_code == 405
