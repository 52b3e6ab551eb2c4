"""A thread's open problems: what is wrong and what a person does about it (docs/dashboard.md,
"Problems and what to do").

One ordering for the thread page's banner and the thread list's severity sort: PROBLEM_KINDS,
most severe first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CHAIN_BROKEN = "chain_broken"
SIDE_EFFECT_UNKNOWN = "side_effect_unknown"
SECOND_RESULT = "second_result"
APPROVAL_PENDING = "approval_pending"
# The agent has not picked up a decision, resolution or rollback for longer than its
# workspace's stall_after_seconds (run status `stalled`, threads.domain.run_status).
AGENT_STALLED = "agent_stalled"
SIDE_EFFECT_RUNNING = "side_effect_running"
FOLD_FAILED = "fold_failed"
FOLD_REJECTED = "fold_rejected"
OVER_BUDGET = "over_budget"
PINNED = "pinned"

# Most severe first: a log that cannot be trusted, then a real-world effect nobody knows
# happened (the double refund), then an agent that stopped picking up what a person decided
# (nothing moves until someone looks at it), then what waits for a person, then what only
# costs tokens.
PROBLEM_KINDS: tuple[str, ...] = (
    CHAIN_BROKEN,
    SIDE_EFFECT_UNKNOWN,
    SECOND_RESULT,
    AGENT_STALLED,
    APPROVAL_PENDING,
    SIDE_EFFECT_RUNNING,
    FOLD_FAILED,
    FOLD_REJECTED,
    OVER_BUDGET,
    PINNED,
)


def severity(kind: str) -> int:
    """Higher is more severe."""
    return len(PROBLEM_KINDS) - PROBLEM_KINDS.index(kind)


def severity_weight(kind: str) -> int:
    """A thread's weight in the list's severity sort is the sum of its kinds' weights: a power
    of two each, so one problem of a kind outweighs any number of less severe ones together."""
    return 1 << severity(kind)


@dataclass(frozen=True)
class Problem:
    kind: str
    text: str
    action: str  # what the link does: "Resolve", "Review", ...
    target: str  # where a person does it
    severity: int = 0
    ref: str = ""  # what it is about: "side_effect:12", "approval:3", "event:7", "thread:<id>"

    @property
    def level(self) -> str:
        """The badge colour, as the thread list's Problems column has it: bad for a log or a
        fold that cannot be trusted, warn for an effect nobody has settled, info for what
        waits on a person."""
        if self.kind in (CHAIN_BROKEN, SECOND_RESULT, FOLD_FAILED, FOLD_REJECTED):
            return "bad"
        if self.kind in (SIDE_EFFECT_UNKNOWN, SIDE_EFFECT_RUNNING, OVER_BUDGET, AGENT_STALLED):
            return "warn"
        return "info"


def problem(*, kind: str, text: str, action: str, target: str, ref: str = "") -> Problem:
    return Problem(
        kind=kind, text=text, action=action, target=target, severity=severity(kind), ref=ref
    )


def in_severity_order(problems: Iterable[Problem]) -> list[Problem]:
    """Most severe first; within a kind, the order given (the log's)."""
    return sorted(problems, key=lambda p: -p.severity)
