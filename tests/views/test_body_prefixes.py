"""Pages read a long body string as a prefix from the database (threads/selectors/
event_bodies.py) and show exactly what they showed reading it whole."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from threads.models import Event, Thread
from threads.selectors import event_bodies
from threads.views.present import (
    BODY_SHOWN_CHARS,
    PREVIEW_CHARS,
    body_cut,
    page_prefix_chars,
    present,
)

pytestmark = pytest.mark.django_db

LONG = 200_000
FACTS = [{"key": "order_total", "value": 180}, {"key": "note", "value": "ünïcode ✓"}]


def bodies() -> list[dict[str, Any]]:
    """Bodies at and around every bound the prefix must get right."""
    words = " ".join(f"w{i}" for i in range(LONG // 3))
    return [
        f.user(words),  # long, ASCII
        f.user("é€😀 " * (LONG // 4)),  # long, 2-, 3- and 4-byte characters
        f.user('quotes " and \\ back\\slashes\n\ttabs\n' * 5000),  # JSON escapes, many lines
        f.user("x" * BODY_SHOWN_CHARS),  # exactly at the cut
        f.user("y" * (BODY_SHOWN_CHARS + 1)),  # one past it
        f.user("z" * page_prefix_chars()),  # exactly the prefix: read whole
        f.user("short and sweet"),
        f.user(""),
        f.user(" " * 5000 + "hidden"),  # blank head: the prefix cannot tell the preview
        f.user("a" * 10 + " " * 6000 + "tail"),
        {"kind": "message", "role": "user", "content": [{"type": "text", "text": "p" * 9000}]},
        f.call("c1", "fetch", {"url": "/x", "blob": "b" * 9000}),
        f.result("c1", value="r" * LONG, verified_facts=FACTS),  # a string and its facts
        f.call("c2", "fetch", {"url": "/y"}),
        f.result("c2", value={"rows": ["s" * 9000]}),  # a structured result: read whole
        f.call("c3", "fetch", {}),
        f.result("c3", value="q" * 100, verified_facts=FACTS),
        f.call("c4", "fetch", {}),
        f.result("c4", status="failed"),  # no result at all
    ]


@pytest.fixture
def varied(workspace: Any) -> Thread:
    thread = f.make_thread(workspace, external_id="varied", context_window=100_000_000)
    for body in bodies():
        f.append(thread, body)
    return thread


def _page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    # The masked CSRF token differs on every request.
    return re.sub(r"\b[A-Za-z0-9]{64}\b", "TOKEN", response.content.decode())


def test_pages_show_the_same_whether_bodies_are_read_as_prefixes_or_whole(
    operator: Client, varied: Thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = [f"/threads/{varied.pk}/?from=1"] + [
        f"/threads/{varied.pk}/events/{seq}/" for seq in range(1, varied.last_seq + 1)
    ]
    prefixed = [_page(operator, url) for url in urls]
    monkeypatch.setattr(event_bodies, "READ_PREFIX", False)
    whole = [_page(operator, url) for url in urls]
    for url, a, b in zip(urls, prefixed, whole, strict=True):
        assert a == b, url
    assert prefixed[0].count("Show all") == 10  # seqs 1-3, 5, 9-13 and 15 are cut


def test_a_long_body_string_comes_from_the_database_as_a_prefix(varied: Thread) -> None:
    chars = page_prefix_chars()
    events = {
        e.seq: e
        for e in event_bodies.events_with_body_prefixes(
            Event.objects.filter(thread=varied).order_by("seq"), chars
        )
    }
    stored = {e.seq: e.data for e in Event.objects.filter(thread=varied)}
    # Read as prefixes: the long strings (messages 1-5 and 9-10, the string result 13), with
    # their UTF-8 size as the database counts it.
    prefixed = {seq for seq, e in events.items() if e.body_prefix is not None}  # type: ignore[attr-defined]
    assert prefixed == {1, 2, 3, 5, 9, 10, 13}
    for seq in prefixed:
        prefix = events[seq].body_prefix  # type: ignore[attr-defined]
        whole = stored[seq].get("content", stored[seq].get("result"))
        assert (prefix.text, prefix.size) == (whole[:chars], len(whole.encode()))
        assert "content" not in events[seq].data and "result" not in events[seq].data
        assert {k: v for k, v in stored[seq].items() if k not in ("content", "result")} == (
            events[seq].data
        )
    # The rest are read whole: short strings, parts, arguments and structured results.
    for seq in set(events) - prefixed:
        assert events[seq].data == stored[seq], seq
    assert chars >= PREVIEW_CHARS * 8


def test_each_event_presents_exactly_as_read_whole(varied: Thread) -> None:
    """Sizes to the byte (a page rounds them to 0.1 KB), previews, cuts, headlines."""
    read = event_bodies.events_with_body_prefixes(
        Event.objects.filter(thread=varied).order_by("seq"), page_prefix_chars()
    )
    for event in read:
        whole = Event.objects.get(pk=event.pk)
        a, b = present(event), present(whole)
        assert body_cut(a["body"], a["body_size"]) == body_cut(b["body"]), event.seq
        same = ("body", "body_size")
        assert {k: v for k, v in a.items() if k not in same} == {
            k: v for k, v in b.items() if k not in same
        }, event.seq
