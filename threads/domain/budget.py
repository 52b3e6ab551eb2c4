"""Token budget and trimming of the working context (docs/pipeline.md, "Budget and triggers",
docs/api.md, "Working context — `GET /api/v1/threads/{id}/context/`").

Per request the history may use `B = W − I − O − R − M` tokens. History `H` = tokens of the
rendered summary + the stored `token_count` of every event after it that is kept. When `H`
exceeds `B`, whole closed interaction units are trimmed, oldest first, never splitting a tool
call from its result (units linked by a late result form one group and go together). Pinned,
never trimmed: open units, the last unit (the current turn) and units holding a side effect
whose outcome is unknown. If pinned content alone exceeds `B`, BudgetTooSmall names the numbers.
Before any of this, retracted items (with the other side of their call), the markers and
everything up to the last reset leave the window (threads.domain.markers); a reset in the window
leaves the summary out too.

Everything here is linear in the number of events passed in (the window after the summary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threads.domain.errors import BudgetTooSmall
from threads.domain.markers import visible_events
from threads.domain.units import Unit, split_units, unit_groups

# The largest token setting: a thread's settings are PositiveIntegerFields (32-bit on every
# backend), so a larger window or reserve would fail in the database, not at the check.
MAX_TOKENS = 2**31 - 1
DEFAULT_HIGH = 0.8
DEFAULT_LOW = 0.5

# What a context request may override, by the names the API and the dashboard use, and the
# thread field each one stands for.
CONTEXT_OVERRIDES = (
    "window",
    "fixed_tokens",
    "reserved_output",
    "reasoning_reserve",
    "safety_margin",
)
THREAD_BUDGET_FIELDS = {
    "window": "context_window",
    "fixed_tokens": "fixed_tokens",
    "reserved_output": "reserved_output",
    "reasoning_reserve": "reasoning_reserve",
    "safety_margin": "safety_margin",
}


@dataclass(frozen=True)
class Budget:
    window: int
    fixed: int = 0
    reserved_output: int = 0
    reasoning_reserve: int = 0
    safety_margin: int = 0

    @property
    def available(self) -> int:
        """B = W − I − O − R − M (may be negative: plan_context then raises)."""
        return (
            self.window
            - self.fixed
            - self.reserved_output
            - self.reasoning_reserve
            - self.safety_margin
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Budget:
        """The budget of settings named as in CONTEXT_OVERRIDES."""
        return cls(
            window=settings["window"],
            fixed=settings["fixed_tokens"],
            reserved_output=settings["reserved_output"],
            reasoning_reserve=settings["reasoning_reserve"],
            safety_margin=settings["safety_margin"],
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "window": self.window,
            "fixed": self.fixed,
            "reserved_output": self.reserved_output,
            "reasoning_reserve": self.reasoning_reserve,
            "safety_margin": self.safety_margin,
            "available": self.available,
        }


def thread_budget(thread: Any, overrides: Mapping[str, Any] | None = None) -> Budget:
    """A thread's budget from its fields (a Thread, or a mapping of its field values), with a
    request's overrides (CONTEXT_OVERRIDES; None means "the thread's own").

    The fixed input I is the agent's own count when it gives one (the request's `fixed_tokens`,
    else the thread's when not 0); otherwise the tokens of the thread's tool definitions
    (`tool_tokens`, docs/pipeline.md, "Tool definitions and repeated content")."""
    if isinstance(thread, Mapping):
        settings = {name: thread[field] for name, field in THREAD_BUDGET_FIELDS.items()}
        tool_tokens = thread.get("tool_tokens", 0)
    else:
        settings = {name: getattr(thread, field) for name, field in THREAD_BUDGET_FIELDS.items()}
        tool_tokens = getattr(thread, "tool_tokens", 0)
    if not settings["fixed_tokens"]:
        settings["fixed_tokens"] = int(tool_tokens or 0)
    settings.update(
        {
            k: int(v)
            for k, v in (overrides or {}).items()
            if k in CONTEXT_OVERRIDES and v is not None
        }
    )
    return Budget.from_settings(settings)


@dataclass
class ContextPlan:
    events: list[dict[str, Any]]  # kept, in seq order
    trimmed_units: list[dict[str, Any]]  # {"from_seq", "to_seq", "tokens", "reason"}
    used: int  # summary + kept events
    sections: dict[str, int]  # {"summary": n, "events": n}
    needs_fold: bool  # capacity trigger: full history H > high × B
    history: int = 0  # H before trimming
    available: int = 0
    pinned_units: list[dict[str, Any]] = field(default_factory=list)  # {"from_seq","to_seq","why"}
    # The last reset in the window: the summary and every event up to it are left out.
    reset_at: int | None = None


def _unknown_side_effect_calls(events: list[dict[str, Any]]) -> set[int]:
    """Seqs of side-effecting calls whose last word in the window is a timeout result."""
    side_effect_calls = {
        e["seq"] for e in events if e["kind"] == "tool_call" and e.get("side_effect")
    }
    unknown: set[int] = set()
    for event in events:
        call_seq = event.get("call_seq")
        if not isinstance(call_seq, int) or call_seq not in side_effect_calls:
            continue
        if event["kind"] == "tool_result":
            if event.get("status") == "timeout":
                unknown.add(call_seq)
            else:
                unknown.discard(call_seq)
        elif event["kind"] == "side_effect_resolution":
            unknown.discard(call_seq)
    return unknown


def _pin_reason(group: list[Unit], is_last: bool, unknown: set[int]) -> str:
    if is_last:
        return "current turn (last unit)"
    if any(not unit.closed for unit in group):
        return "open unit (a tool call has no result yet)"
    if any(e["kind"] == "tool_call" and e["seq"] in unknown for u in group for e in u.events):
        return "side effect with unknown outcome"
    return ""


def _span(group: list[Unit]) -> str:
    first, last = group[0].from_seq, group[-1].to_seq
    return f"#{first}" if first == last else f"#{first}–#{last}"


def plan_context(
    *,
    events: list[dict[str, Any]],
    summary_tokens: int,
    budget: Budget,
    high: float = DEFAULT_HIGH,
    low: float = DEFAULT_LOW,
    closed_calls: set[int] | frozenset[int] = frozenset(),
) -> ContextPlan:
    """Choose which events after the summary the agent sees.

    `events` are every event after the summary's `covered_until`, in seq order, each with its
    stored `token_count`. `closed_calls` names calls inside `events` closed by something outside
    it. Retracted items, markers and what a reset clears are left out first (see
    `markers.withdrawn`; a reset also drops the summary: `reset_at`). Trims whole closed groups
    of units (see `units.unit_groups`), oldest first, until the history fits
    `budget.available`; each trimmed unit gets its own entry with the reason.
    Raises BudgetTooSmall when the summary plus pinned units alone exceed `available`.
    `low` is unused for trimming (a fold aims there, see `fold_target`) but kept so callers
    pass one watermark pair everywhere.
    """
    available = budget.available
    events, gone = visible_events(events)
    if gone.reset_at is not None:
        summary_tokens = 0
    units = split_units(events, closed_calls=set(closed_calls))
    groups = unit_groups(units)
    event_tokens = sum(unit.tokens for unit in units)
    history = summary_tokens + event_tokens
    unknown = _unknown_side_effect_calls(events)

    pinned: list[bool] = []
    pinned_units: list[dict[str, Any]] = []
    pinned_tokens = 0
    for index, group in enumerate(groups):
        why = _pin_reason(group, index == len(groups) - 1, unknown)
        pinned.append(bool(why))
        if why:
            pinned_tokens += sum(unit.tokens for unit in group)
            pinned_units.extend(
                {"from_seq": u.from_seq, "to_seq": u.to_seq, "why": why} for u in group
            )

    if summary_tokens + pinned_tokens > available:
        raise BudgetTooSmall(
            f"the summary ({summary_tokens} tokens) and pinned events ({pinned_tokens} tokens) "
            f"need {summary_tokens + pinned_tokens} tokens but only {available} are available",
            fields={
                **budget.as_dict(),
                "summary": summary_tokens,
                "pinned_events": pinned_tokens,
                "pinned": summary_tokens + pinned_tokens,
                "history": history,
            },
        )

    trimmed_units: list[dict[str, Any]] = []
    dropped: set[int] = set()  # group indexes
    used = history
    for index, group in enumerate(groups):
        if used <= available:
            break
        if pinned[index]:
            continue
        tokens = sum(unit.tokens for unit in group)
        over = used - available
        joined = (
            f"; trimmed with {_span(group)} because a tool result answers a call across them"
            if len(group) > 1
            else ""
        )
        for unit in group:
            trimmed_units.append(
                {
                    "from_seq": unit.from_seq,
                    "to_seq": unit.to_seq,
                    "tokens": unit.tokens,
                    "reason": f"oldest closed unit; budget over by {over} tokens{joined}",
                }
            )
        dropped.add(index)
        used -= tokens

    kept: list[dict[str, Any]] = []
    for index, group in enumerate(groups):
        if index not in dropped:
            for unit in group:
                kept.extend(dict(e) for e in unit.events)
    return ContextPlan(
        events=kept,
        trimmed_units=trimmed_units,
        used=used,
        sections={"summary": summary_tokens, "events": used - summary_tokens},
        needs_fold=history > high * available,
        history=history,
        available=available,
        pinned_units=pinned_units,
        reset_at=gone.reset_at,
    )


def needs_fold(*, history: int, budget: Budget, high: float = DEFAULT_HIGH) -> bool:
    """Capacity trigger: H > high × B."""
    return history > high * budget.available


def fold_target(
    *,
    events: Sequence[Mapping[str, Any]],
    summary_tokens: int,
    budget: Budget,
    low: float = DEFAULT_LOW,
    closed_calls: set[int] | frozenset[int] = frozenset(),
) -> int | None:
    """The smallest fold boundary that brings H down to `low × B`.

    Candidate boundaries are the ends of closed groups in a closed prefix (what a fold may
    cover). The estimate keeps the summary at `summary_tokens` (pass an estimate of the folded
    summary's size). Returns the first boundary whose remaining history fits, else the last
    possible boundary (fold as much as may be folded), or None when nothing may be folded.
    """
    units = split_units(events, closed_calls=set(closed_calls))
    remaining = sum(unit.tokens for unit in units)
    target = low * budget.available
    boundary: int | None = None
    for group in unit_groups(units):
        if not all(unit.closed for unit in group):
            break
        remaining -= sum(unit.tokens for unit in group)
        boundary = group[-1].to_seq
        if summary_tokens + remaining <= target:
            break
    return boundary


def settings_problems(settings: Mapping[str, Any]) -> dict[str, str]:
    """What is wrong with a thread's settings as a whole (field name → why), empty when they
    hold: 0 < low_watermark < high_watermark ≤ 1, and a budget that leaves the context at
    least one token (docs/api.md, "Create — `POST /api/v1/threads/` (agents)"). `settings` maps
    every field of THREAD_BUDGET_FIELDS and both watermarks (and `tool_tokens`, the fixed input when
    fixed_tokens is 0); a thread being created and a thread whose settings change are held to the
    same rules."""
    problems: dict[str, str] = {}
    high, low = settings["high_watermark"], settings["low_watermark"]
    if not 0 < low < high <= 1:
        problems["low_watermark"] = (
            f"need 0 < low_watermark < high_watermark <= 1 (got low {low}, high {high})"
        )
    budget = thread_budget(settings)
    if budget.available < 1:
        # No context could ever be served: every request would be budget_too_small.
        problems["context_window"] = (
            f"leaves no tokens for the context: context_window {budget.window} - fixed_tokens "
            f"{budget.fixed} - reserved_output {budget.reserved_output} - reasoning_reserve "
            f"{budget.reasoning_reserve} - safety_margin {budget.safety_margin} "
            f"= {budget.available}"
        )
    return problems
