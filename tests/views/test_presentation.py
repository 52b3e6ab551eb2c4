"""How list and thread pages present what they show: the sorted column is announced, and a
long payload is collapsed by the same rule on every page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from threads.domain.summary_render import render_summary
from threads.views.present import COLLAPSE_CHARS, shown_value
from threads.views.summaries import _entry_meta, _entry_text

pytestmark = pytest.mark.django_db


def sorted_headers(page: str) -> list[str]:
    return [th for th in re.findall(r"<th\b.*?</th>", page, re.S) if "aria-sort" in th]


@pytest.mark.parametrize(
    ("sort", "column", "state"),
    [
        ("external_id", "Thread", "ascending"),
        ("-events", "Events", "descending"),
        ("tokens", "Log tokens", "ascending"),
        ("-updated", "Updated", "descending"),
        ("", "Problems", "descending"),  # the default sort is the most severe problems first
    ],
)
def test_thread_list_marks_the_sorted_column_and_only_it(
    operator: Client, workspace: Any, sort: str, column: str, state: str
) -> None:
    f.make_thread(workspace, external_id="a-thread")
    page = operator.get(f"/threads/?sort={sort}" if sort else "/threads/").content.decode()
    marked = sorted_headers(page)
    assert len(marked) == 1, marked
    assert f'aria-sort="{state}"' in marked[0] and f">{column}" in marked[0]


def _collapsed(page: str, article_id: str) -> bool:
    match = re.search(rf'<article [^>]*id="{article_id}".*?</article>', page, re.S)
    assert match, article_id
    return "<details>" in match.group(0)


def test_a_long_payload_is_collapsed_alike_on_the_timeline_and_the_context(
    operator: Client, workspace: Any
) -> None:
    thread = f.make_thread(workspace, external_id="wordy")
    text = ("lorem ipsum " * 50)[:500]
    f.append(thread, f.user(text), f.assistant("ok"))
    timeline = operator.get(f"/threads/{thread.pk}/?from=1").content.decode()
    context = operator.get(f"/threads/{thread.pk}/context/").content.decode()
    on_timeline = _collapsed(timeline, "seq-1")
    assert _collapsed(context, "ctx-1") == on_timeline
    assert on_timeline == (len(text) > COLLAPSE_CHARS)


def test_a_sort_header_reverses_the_current_sort_and_starts_each_column_its_own_way(
    operator: Client, workspace: Any
) -> None:
    f.make_thread(workspace, external_id="a-thread")
    page = operator.get("/threads/?sort=-events&q=a").content.decode()
    assert 'href="?q=a&amp;sort=events">Events ↓</a>' in page  # the sorted column reverses
    assert 'href="?q=a&amp;sort=external_id">Thread</a>' in page  # names: A to Z first
    assert 'href="?q=a&amp;sort=-tokens">Log tokens</a>' in page  # numbers: largest first
    plain = operator.get("/threads/").content.decode()
    assert 'href="?sort=external_id">Thread</a>' in plain and 'href="?&amp;' not in plain


def test_summary_values_read_as_json_never_as_python() -> None:
    assert shown_value(None) == "null" and shown_value(True) == "true"
    assert shown_value([8, 9]) == "[8, 9]" and shown_value("Rotterdam") == "Rotterdam"
    assert _entry_text("facts", {"key": "paid", "value": True}) == "paid = true"
    assert _entry_text("facts", {"key": "city", "value": "Köln"}) == 'city = "Köln"'
    assert _entry_meta("pending", {"kind": "approval", "blocking": True}) == ["blocking"]
    meta = _entry_meta("facts", {"authority": "tool", "previous_value": None, "confidence": 0.5})
    assert meta == ["authority: tool", "confidence: 0.5"]


def test_the_dashboard_shows_each_entry_as_the_agent_reads_it() -> None:
    content: dict[str, Any] = {
        "covered": {"from_seq": 1, "to_seq": 9},
        "facts": [
            {
                "key": "order",
                "value": {"items": [1, 2], "id": 7},
                "authority": "tool",
                "confidence": "confirmed",
                "status": "active",
                "source_event_ids": [3],
            }
        ],
        "tool_state": [
            {"tool": "refund", "tool_call_id": "c1", "status": "unknown", "side_effect": True}
        ],
        "pending": [{"kind": "approval", "ref": "refund\n  order 7", "blocking": True}],
        "completed_actions": [{"action": "looked up\norder 7", "tool_call_id": "c0"}],
        "decisions": [{"text": "refund it", "source_event_ids": [5]}],
    }
    agent = render_summary(content).splitlines()
    for section, entries in content.items():
        for entry in entries if isinstance(entries, list) else []:
            shown = _entry_text(section, entry)
            assert any(line.startswith(f"- {shown}") for line in agent), (section, shown)
