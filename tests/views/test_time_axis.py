"""The timeline's time axis: when each event happened, how long a call took (call to its first
result), what is still running, an unknown outcome that is no duration, long gaps marked, and
no query per event."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests import factories as f
from threads.models import Thread

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def at(body: dict[str, Any], seconds: float) -> dict[str, Any]:
    moment = T0 + timedelta(seconds=seconds)
    return {**body, "created_at": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


def card(page: str, seq: int) -> str:
    """The HTML of event `seq`'s card on a timeline page."""
    start = page.index(f'id="seq-{seq}"')
    end = page.find("</article>", start)
    return page[start:end]


@pytest.fixture
def timed(workspace: Any) -> Thread:
    thread = f.make_thread(workspace, external_id="timed")
    f.append(
        thread,
        at(f.user("Look up order 7 and refund it."), 0),  # 1
        at(f.call("c1", "lookup_order", {"order": 7}), 3),  # 2
        at(f.result("c1", value={"total": 20}), 45),  # 3: took 42 s
        at(f.call("c2", "refund", {"order": 7}, side_effect_key="refund-7"), 50),  # 4
        at(f.result("c2", status="timeout"), 80),  # 5: no outcome after 30 s
        at(f.user("Any news?"), 80 + 600),  # 6: ten minutes later
        at(f.call("c3", "check_refund", {"order": 7}), 690),  # 7: no result at all
        at(f.call("c4", "notify", {"order": 7}), 691),  # 8
        at(f.result("c4", status="failed", value="smtp down"), 691.4),  # 9: 0.4 s
    )
    return thread


def test_each_event_says_when_it_happened_for_people_and_machines(
    operator: Client, timed: Thread
) -> None:
    page = operator.get(f"/threads/{timed.pk}/").content.decode()
    first = card(page, 1)
    assert '<time class="at" datetime="2026-11-27T09:00:00+00:00"' in first
    assert ">Nov 27, 09:00:00</time>" in first
    assert 'datetime="2026-11-27T09:11:20+00:00"' in card(page, 6)


def test_a_call_shows_how_long_it_took_from_call_to_result(operator: Client, timed: Thread) -> None:
    page = operator.get(f"/threads/{timed.pk}/").content.decode()
    assert "took 42 s" in card(page, 2)
    # A failure took its time too: it has an outcome.
    assert "took 0.4 s" in card(page, 8)


def test_an_unknown_outcome_is_no_duration(operator: Client, timed: Thread) -> None:
    refund = card(operator.get(f"/threads/{timed.pk}/").content.decode(), 4)
    assert "outcome unknown: timed out after 30 s" in refund
    assert "took" not in refund


def test_a_call_without_result_is_running_since_it_was_made(
    operator: Client, timed: Thread
) -> None:
    check = card(operator.get(f"/threads/{timed.pk}/").content.decode(), 7)
    assert "no result yet: running for" in check
    assert "took" not in check
    seconds = float(re.search(r'data-seconds="([0-9.]+)"', check).group(1))  # type: ignore[union-attr]
    called = T0 + timedelta(seconds=690)
    assert seconds == pytest.approx((datetime.now(UTC) - called).total_seconds(), abs=120)


def test_long_gaps_between_events_are_marked(operator: Client, timed: Thread) -> None:
    page = operator.get(f"/threads/{timed.pk}/").content.decode()
    gaps = re.findall(r'<p class="time-gap"[^>]*>([^<]*)</p>', page)
    # 3 → 45 s and 5 → 6 s apart are no gaps; 80 s → 680 s is.
    assert gaps == ["10 min later"]
    assert page.index("10 min later") < page.index('id="seq-6"')
    assert page.index("10 min later") > page.index('id="seq-5"')


def test_a_gap_at_the_top_of_a_page_counts_from_the_page_before(
    operator: Client, workspace: Any
) -> None:
    thread = f.make_thread(workspace, external_id="paged")
    f.append(thread, *[at(f.user(f"m{n}"), n) for n in range(200)])
    f.append(thread, at(f.user("an hour later"), 199 + 3600))
    page = operator.get(f"/threads/{thread.pk}/?from=201").content.decode()
    assert "1 h later" in page


def test_the_single_event_page_shows_the_duration_too(operator: Client, timed: Thread) -> None:
    page = operator.get(f"/threads/{timed.pk}/events/2/").content.decode()
    assert "took 42 s" in page


def test_durations_cost_no_query_per_call(operator: Client, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="many-calls")

    def calls(start: int, count: int) -> list[dict[str, Any]]:
        bodies = []
        for n in range(start, start + count):
            bodies += [
                at(f.call(f"c{n}", "lookup", {"n": n}), n * 10),
                at(f.result(f"c{n}"), n * 10 + 2),
            ]
        return bodies

    f.append(thread, *calls(0, 5))
    url = f"/threads/{thread.pk}/?from=1"
    with CaptureQueriesContext(connection) as few:
        operator.get(url)
    f.append(thread, *calls(5, 90))
    with CaptureQueriesContext(connection) as many:
        page = operator.get(url).content.decode()
    assert len(many) == len(few)
    assert page.count("took 2 s") == 95
