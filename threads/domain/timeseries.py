"""Time buckets for the Operations page (docs/operations.md): pure functions over rows already
read, so the page costs a fixed number of queries whatever the number of buckets."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Buckets:
    """`count` consecutive buckets of `width`, the last one holding `now`."""

    start: datetime
    width: timedelta
    count: int
    now: datetime

    @classmethod
    def hourly(cls, *, now: datetime, hours: int) -> Buckets:
        top = now.replace(minute=0, second=0, microsecond=0)
        return cls(
            start=top - timedelta(hours=hours - 1), width=timedelta(hours=1), count=hours, now=now
        )

    def starts(self) -> list[datetime]:
        return [self.start + i * self.width for i in range(self.count)]

    def ends(self) -> list[datetime]:
        """Where each bucket is read for a level (a gauge over time): its end, or now."""
        return [min(s + self.width, self.now) for s in self.starts()]

    def index(self, at: datetime | None) -> int | None:
        if at is None or at < self.start:
            return None
        i = int((at - self.start) // self.width)
        return i if i < self.count else None


def counts(buckets: Buckets, times: Iterable[datetime | None]) -> list[int]:
    """How many of `times` fall in each bucket."""
    out = [0] * buckets.count
    for at in times:
        i = buckets.index(at)
        if i is not None:
            out[i] += 1
    return out


def levels(buckets: Buckets, spans: Iterable[tuple[datetime, datetime | None]]) -> list[int]:
    """How many (began, ended or None) spans are open as each bucket closes. Buckets are
    half-open, [start, end): a span began in the bucket or before (began < end) and had not
    ended within it (ended is None or ended >= end)."""
    ends = buckets.ends()
    out = [0] * buckets.count
    for began, ended in spans:
        for i, end in enumerate(ends):
            if began < end and (ended is None or ended >= end):
                out[i] += 1
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in (0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None
