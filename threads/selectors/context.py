"""The working context an agent receives."""

from __future__ import annotations

from typing import Any

from django.db.models import (
    F,
    FilteredRelation,
    Q,
)

from threads.domain.budget import CONTEXT_OVERRIDES, plan_context, thread_budget
from threads.domain.call_pairs import pair_calls
from threads.domain.redaction import REDACTED, readable
from threads.models import (
    Thread,
)
from threads.selectors.events import event_dicts

__all__ = ["CONTEXT_OVERRIDES", "working_context"]


def working_context(*, thread: Thread, overrides: dict[str, Any]) -> dict[str, Any]:
    """The working context (docs/api.md, "Working context — `GET /api/v1/threads/{id}/context/`"):
    the head summary ⊕ the events after it, trimmed to budget.

    One consistent snapshot without a transaction (on SQLite every transaction is IMMEDIATE,
    which would make a read take the write lock):
    - the head (head_version, covered_until), read_until = last_seq and the head version's
      summary come from ONE statement (the thread row joined to its head version), and a
      statement sees one snapshot: the head changes only by compare-and-swap of head_version
      and covered_until together, last_seq only with the events it numbers;
    - events are append-only and seq ≤ last_seq were committed with last_seq, so the events in
      (covered_until, read_until] are exactly the log as it stood at that read; later appends
      are beyond read_until and left to the next call.
    Each call in `events` has exactly one result after it (threads.domain.call_pairs:
    a resolution stands for a missing result, a second result is left out); a call with
    neither is listed in `unanswered_calls`.
    Reads only events after covered_until, with their stored token counts: two queries
    whatever the length of the thread. A reset after covered_until leaves the summary out
    (`summary` null, `reset_at` its seq; docs/api.md,
    "Working context — `GET /api/v1/threads/{id}/context/`").
    """
    head = (
        Thread.objects.filter(pk=thread.pk)
        .annotate(
            head=FilteredRelation("versions", condition=Q(versions__version=F("head_version")))
        )
        .values(
            "head_version",
            "covered_until",
            "last_seq",
            "context_window",
            "fixed_tokens",
            "tool_tokens",
            "reserved_output",
            "reasoning_reserve",
            "safety_margin",
            "high_watermark",
            "low_watermark",
            "head__covered_until",
            "head__content",
            "head__checksum",
            "head__rendered",
            "head__tokens",
        )
        .get()
    )
    budget = thread_budget(head, overrides)
    covered, read_until = head["covered_until"], head["last_seq"]
    summary: dict[str, Any] | None = None
    summary_tokens = 0
    if head["head_version"]:
        summary_tokens = head["head__tokens"]
        summary = {
            "version": head["head_version"],
            "covered_until": head["head__covered_until"],
            "content": head["head__content"],
            "checksum": head["head__checksum"],
            "rendered": head["head__rendered"],
            "tokens": summary_tokens,
        }
    events = event_dicts(thread, after=covered, until=read_until) if read_until > covered else []
    plan = plan_context(
        events=events,
        summary_tokens=summary_tokens,
        budget=budget,
        high=head["high_watermark"],
        low=head["low_watermark"],
    )
    sections = plan.sections
    if head["tool_tokens"]:
        # The tool definitions' tokens (docs/pipeline.md, "Tool definitions and repeated content"):
        # inside `fixed` unless the agent gave fixed_tokens itself. Only a thread with tools has the
        # section.
        sections = {**sections, "tools": head["tool_tokens"]}
    # What a model may read: each call with exactly one result (a resolution standing for a
    # missing one, a second result left out); calls with neither are named (docs/api.md,
    # "Working context — `GET /api/v1/threads/{id}/context/`").
    paired = pair_calls(plan.events)
    return {
        "summary": None if plan.reset_at is not None else summary,
        "reset_at": plan.reset_at,
        # A redacted event reads as its placeholder (docs/event-log.md, "Redaction").
        "events": [readable(e) if REDACTED in e else e for e in paired.events],
        "unanswered_calls": paired.unanswered,
        "read_until": read_until,
        "trimmed_units": plan.trimmed_units,
        "budget": {**budget.as_dict(), "used": plan.used, "sections": sections},
        "needs_fold": plan.needs_fold,
    }
