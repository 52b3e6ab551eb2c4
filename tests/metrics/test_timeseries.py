"""Time buckets of the Operations page (threads/domain/timeseries.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from threads.domain.timeseries import Buckets, counts, levels, percentile, ratio

NOW = datetime(2026, 3, 10, 12, 30, tzinfo=UTC)
H = timedelta(hours=1)


def test_hourly_buckets_end_with_the_current_hour() -> None:
    buckets = Buckets.hourly(now=NOW, hours=3)
    assert buckets.starts() == [
        NOW.replace(minute=0) - 2 * H,
        NOW.replace(minute=0) - H,
        NOW.replace(minute=0),
    ]
    assert buckets.ends()[-1] == NOW  # the current hour is read as it stands
    assert buckets.index(NOW.replace(minute=0) - 2 * H - timedelta(seconds=1)) is None
    assert buckets.index(NOW.replace(minute=0) + H) is None
    assert buckets.index(None) is None


def test_counts_put_each_time_in_its_half_open_bucket() -> None:
    buckets = Buckets.hourly(now=NOW, hours=2)
    top = NOW.replace(minute=0)
    assert counts(buckets, [top - H, top - timedelta(microseconds=1), top, None]) == [2, 1]


def test_levels_count_what_is_open_as_each_bucket_closes() -> None:
    buckets = Buckets.hourly(now=NOW, hours=3)
    top = NOW.replace(minute=0)
    spans = [
        (top - 2 * H, None),  # open throughout
        (top - 2 * H + timedelta(minutes=5), top - H),  # ended exactly as bucket 0 closed
        (top - H + timedelta(minutes=1), top - H + timedelta(minutes=2)),  # within bucket 1
        (top - H, None),  # began exactly as bucket 1 opened
    ]
    assert levels(buckets, spans) == [2, 2, 2]


def test_nearest_rank_percentile() -> None:
    assert percentile([], 95) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([10.0, 20.0, 30.0, 400.0], 95) == 400.0
    assert percentile(list(map(float, range(1, 101))), 95) == 95.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0


def test_ratio_of_nothing_is_none() -> None:
    assert ratio(0, 0) is None and ratio(1, 4) == 0.25
