"""The time axis's arithmetic: durations as people read them, and which waits are none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from threads.domain.timing import call_timing, duration_text, gap_seconds

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "under 0.1 s"),
        (0.4, "0.4 s"),
        (2, "2 s"),
        (42, "42 s"),
        (60, "1 min"),
        (185, "3 min 5 s"),
        (3600, "1 h"),
        (7800, "2 h 10 min"),
        (86400 * 3 + 3600 * 4, "3 d 4 h"),
    ],
)
def test_durations_read_as_people_say_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_a_timed_out_result_is_an_unknown_outcome_not_a_duration() -> None:
    timing = call_timing(
        called_at=T0,
        result_at=T0 + timedelta(seconds=30),
        result_status="timeout",
        result_seq=5,
        resolved=False,
        now=T0 + timedelta(hours=1),
    )
    assert timing.state == "unknown"
    assert not timing.text.startswith("took")


def test_a_call_resolved_by_a_person_without_result_is_not_running() -> None:
    timing = call_timing(
        called_at=T0, result_at=None, result_status=None, result_seq=None, resolved=True, now=T0
    )
    assert timing.seconds is None and "running" not in timing.text


def test_only_gaps_over_a_minute_are_marked() -> None:
    assert gap_seconds(T0, T0 + timedelta(seconds=60)) is None
    assert gap_seconds(T0, T0 + timedelta(seconds=61)) == 61
    assert gap_seconds(None, T0) is None
