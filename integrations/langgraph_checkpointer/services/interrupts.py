"""A task's `interrupt()` as an approval request of the thread: opened once per interrupt, after
the messages of the checkpoint its task ran from, and closed when nothing can resume it any
more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from integrations.langgraph_checkpointer.domain.messages import (
    INTERRUPT_ACTION,
    MESSAGES_CHANNEL,
    interrupt_call,
)
from integrations.langgraph_checkpointer.models import LanggraphCheckpoint, LanggraphWrite
from integrations.langgraph_checkpointer.selectors.messages import langgraph_pending_tool_calls
from threads.domain.errors import IdempotencyConflict
from threads.domain.events import normalize_event
from threads.models import ApprovalRequest, ApprovalStatus, Thread
from threads.services.approvals import approvals_close_locked
from threads.services.events import event_append_batch


@dataclass(frozen=True)
class InterruptIn:
    """An `interrupt()` of a task as the saver describes it beside its serialised write: the
    interrupt's id and its value as plain JSON (the server never decodes the bytes)."""

    id: str
    value: Any


def _interrupts_request(
    thread: Thread, interrupts: Sequence[InterruptIn], checkpoint_ns: str, checkpoint_id: str
) -> None:
    """Open an approval request per interrupt (docs/repairs.md, "Approvals"), once each: its
    client_event_id names the interrupt, so a repeated put_writes appends nothing. Its
    arguments name the checkpoint the interrupt's task ran from, whose deletion closes it, and
    the call that task was about to run when there is one (`interrupt_call`).
    Runs in the caller's transaction, which holds the thread's lock."""
    pending = langgraph_pending_tool_calls(
        thread=thread,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        channel=MESSAGES_CHANNEL,
    )
    for interrupt in interrupts:
        _interrupt_request_append(
            thread,
            {
                "interrupt_id": interrupt.id,
                "value": interrupt.value,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
                **interrupt_call(pending, interrupt.value),
            },
        )


def _interrupt_request_append(thread: Thread, arguments: dict[str, Any]) -> None:
    body = {
        "kind": "approval_request",
        "client_event_id": f"langgraph-interrupt:{arguments['interrupt_id']}"[:200],
        "action": INTERRUPT_ACTION,
        "arguments": arguments,
    }
    if isinstance(arguments.get("tool_name"), str) and arguments["tool_name"]:
        # The approval reads as the action asked about; the action stays the interrupt's,
        # which the saver's resume_command looks for.
        body["tool_name"] = arguments["tool_name"][:200]
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    try:
        event_append_batch(
            thread=thread, new_events=[normalize_event(body, max_bytes=max_bytes)], lock=False
        )
    except IdempotencyConflict:
        pass  # the interrupt asked already, with another value: the first one stands


def _interrupt_approvals_close(
    thread: Thread, gone: Sequence[LanggraphCheckpoint] | None, why: str, actor_label: str
) -> int:
    """Close the thread's pending interrupt approvals whose checkpoint is in `gone` (None:
    every one, all its checkpoints gone): nothing can resume them any more, so no reviewer
    should wait on them (docs/langgraph.md, "Agent frameworks"). Returns how many were closed. Runs
    under the thread's lock."""
    pending = ApprovalRequest.objects.filter(
        thread=thread, action=INTERRUPT_ACTION, status=ApprovalStatus.PENDING
    ).order_by("request_event__seq")
    if gone is not None:
        names = {(row.checkpoint_ns, row.checkpoint_id) for row in gone}
        chosen = [
            a
            for a in pending
            if isinstance(a.arguments, dict)
            and (a.arguments.get("checkpoint_ns"), a.arguments.get("checkpoint_id")) in names
        ]
    else:
        chosen = list(pending)
    closed = approvals_close_locked(
        thread=thread,
        approvals=chosen,
        reason=f"its LangGraph checkpoint was deleted ({why}): nothing can resume it",
        actor_label=actor_label or "system",
    )
    return len(closed)


def _waiting_interrupts_open(
    thread: Thread,
    checkpoint_ns: str,
    checkpoint_id: str,
    waiting: Sequence[tuple[int, list[dict[str, Any]]]],
) -> None:
    """Open the approval requests of interrupts whose writes came before their checkpoint's
    put, now that the put has mirrored its messages: in the log they follow the messages of
    the checkpoint their task ran from, whatever order LangGraph's background threads sent
    the requests in. Runs under the thread's lock."""
    if not waiting:
        return
    _interrupts_request(
        thread,
        [
            InterruptIn(id=str(item["id"]), value=item.get("value"))
            for _, interrupts in waiting
            for item in interrupts
        ],
        checkpoint_ns,
        checkpoint_id,
    )
    LanggraphWrite.objects.filter(pk__in=[pk for pk, _ in waiting]).update(interrupts=None)
