"""A summary that fits its thread's budget (docs/pipeline.md, "Fold with a summariser backend").

The fold's caps bound a summary by entries, not tokens: fifty requests of two thousand
characters each are some 25,000 tokens, more than a default thread's whole budget. A summary
that alone passes the budget makes every context request `budget_too_small`, and one above the
high watermark starts a capacity fold on every append. So after the summariser, the fold drops
the oldest droppable entries until the rendered summary is at most `limit` tokens (the service
passes low watermark × available: after a fold, the events that follow have the room between
the two watermarks before the next capacity fold).

Droppable: requests, last replies, completed actions, decisions, open questions and
superseded facts — oldest first across them (by the first event each cites), never one that
cites a side-effecting call, a constraint or a correction among the folded events (verification
requires those cited). Never dropped: the task, constraints, active facts, tool state, pending
items, and the newest request and reply. What is dropped is counted in `counts` as the caps'
drops are (`requests_dropped`, …), so the summary still says that older material is in the
log. When even dropping everything droppable leaves it over the limit, the smallest summary is
returned; verification's `fits_budget` check then refuses it if it passes the budget itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from threads.domain.summary_render import render_summary

# section -> the `counts` key its drops add to, in the order ties of age drop.
DROPPABLE = {
    "last_replies": "last_replies_dropped",
    "requests": "requests_dropped",
    "completed_actions": "completed_actions_dropped",
    "decisions": "decisions_dropped",
    "open_questions": "open_questions_dropped",
    "facts": "facts_dropped",
}


# The newest request and reply are what the agent is working on: never dropped. A summary they
# alone make too big fails `fits_budget`, and the context answers budget_too_small: an error,
# not the request silently gone.
NEWEST_KEPT = ("requests", "last_replies")


def protected_seqs(events: Sequence[Mapping[str, Any]]) -> set[int]:
    """The folded events an entry citing must stay: side-effecting calls, constraints and
    corrections (docs/pipeline.md, "Verify")."""
    return {
        int(e["seq"])
        for e in events
        if (e.get("kind") == "tool_call" and e.get("side_effect"))
        or (e.get("kind") == "annotation" and e.get("type") in ("constraint", "correction"))
    }


def _droppable(content: Mapping[str, Any], protected: set[int]) -> list[tuple[str, int]]:
    """(section, index) of every droppable entry, in the order they drop."""
    found: list[tuple[int, int, str, int]] = []
    for rank, section in enumerate(DROPPABLE):
        entries = content.get(section) or []
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                continue
            if section in NEWEST_KEPT and index == len(entries) - 1:
                continue
            if section == "facts" and entry.get("status") != "superseded":
                continue
            sources = [s for s in entry.get("source_event_ids") or [] if isinstance(s, int)]
            if protected.intersection(sources):
                continue
            found.append((min(sources, default=0), rank, section, index))
    return [(section, index) for _, _, section, index in sorted(found)]


def _without(content: Mapping[str, Any], dropped: Sequence[tuple[str, int]]) -> dict[str, Any]:
    gone: dict[str, set[int]] = {}
    for section, index in dropped:
        gone.setdefault(section, set()).add(index)
    out = dict(content)
    counts = dict(content.get("counts") or {})
    for section, indexes in gone.items():
        out[section] = [e for i, e in enumerate(content.get(section) or []) if i not in indexes]
        name = DROPPABLE[section]
        counts[name] = int(counts.get(name, 0)) + len(indexes)
    out["counts"] = dict(sorted(counts.items()))
    return out


def fit_summary(
    content: dict[str, Any],
    *,
    events: Sequence[Mapping[str, Any]],
    limit: int,
    count: Callable[[str], int],
) -> dict[str, Any]:
    """`content` with the fewest oldest droppable entries removed for its rendered text to
    count at most `limit` tokens (`count` counts a text); `content` itself when it fits."""
    if count(render_summary(content)) <= limit:
        return content
    order = _droppable(content, protected_seqs(events))
    # The fewest drops that fit: dropping more never makes the text longer, so the smallest
    # fitting number is found by bisection, a few renderings whatever the summary's size.
    low, high = 1, len(order)
    smallest = _without(content, order)
    if count(render_summary(smallest)) > limit:
        return smallest
    while low < high:
        middle = (low + high) // 2
        if count(render_summary(_without(content, order[:middle]))) <= limit:
            high = middle
        else:
            low = middle + 1
    return _without(content, order[:low])
