"""The timeline's time axis (docs/dashboard.md, "The time axis"): how long a tool call took, how
long it has been running, and the gaps between events worth a mark.

A duration is the time from a call to its first result. A result whose status is `timeout`
has no outcome: the call may have happened or not, so the time it took is not a duration but
the time the agent waited before giving up. A call with no result has no duration either:
it has been running since it was made (or a person resolved it without a result).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

# Events further apart than this are marked on the timeline with the time between them.
GAP_SECONDS = 60
# The result statuses whose outcome is unknown: the wait is no duration.
UNKNOWN_OUTCOME = frozenset({"timeout"})

CallState = Literal["took", "unknown", "running", "resolved"]


@dataclass(frozen=True)
class CallTiming:
    """A tool call on the time axis. `seconds`: the duration ("took"), the wait before the
    unknown outcome ("unknown"), the time since the call ("running"); None when resolved by
    a person without a result."""

    state: CallState
    seconds: float | None
    result_seq: int | None = None

    @property
    def text(self) -> str:
        if self.state == "took":
            return f"took {duration_text(self.seconds or 0)}"
        if self.state == "unknown":
            return f"outcome unknown: timed out after {duration_text(self.seconds or 0)}"
        if self.state == "running":
            return f"no result yet: running for {duration_text(self.seconds or 0)}"
        return "no result: resolved by a person"


def call_timing(
    *,
    called_at: datetime,
    result_at: datetime | None,
    result_status: str | None,
    result_seq: int | None,
    resolved: bool,
    now: datetime,
) -> CallTiming:
    """The call's timing from its first result (None: none), whether a resolution closed it
    and the time now."""
    if result_at is not None:
        seconds = max(0.0, (result_at - called_at).total_seconds())
        state: CallState = "unknown" if result_status in UNKNOWN_OUTCOME else "took"
        return CallTiming(state, seconds, result_seq)
    if resolved:
        return CallTiming("resolved", None)
    return CallTiming("running", max(0.0, (now - called_at).total_seconds()))


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: "under 0.1 s", "0.4 s", "12 s", "3 min 5 s",
    "2 h 10 min", "3 d 4 h"."""
    if seconds < 0.1:
        return "under 0.1 s"
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def gap_seconds(previous: datetime | None, current: datetime) -> float | None:
    """The time since the event before, when it is long enough to mark (GAP_SECONDS)."""
    if previous is None:
        return None
    seconds = (current - previous).total_seconds()
    return seconds if seconds > GAP_SECONDS else None
