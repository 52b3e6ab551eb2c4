"""Removing a redacted event's content from the stores beside the event (docs/event-log.md,
"Redaction"): summary versions' texts, approvals' arguments, checkpoints' pending lists, audit
before/after, task results, LangGraph blobs and mirrored messages.

The scrubbing part fills this in; the redaction service (threads.services.redaction) calls it
inside its transaction, under the thread's lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from threads.models import Thread


def content_scrub(
    *, thread: Thread, seq: int, needles: Sequence[str], placeholder: str
) -> dict[str, int]:
    """In the caller's transaction: remove every needle (and whatever cites `seq`) from every
    stored copy beside the event; answer counts by store, e.g. {"summary_versions": 2,
    "langgraph_values": 1}.

    The scrubbing part fills this in: here it touches nothing and answers {}."""
    return {}
