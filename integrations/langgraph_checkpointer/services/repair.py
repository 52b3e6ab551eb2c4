"""The LangGraph checkpoint a rollback writes: the chosen checkpoint's state as the namespace's
new head, with the side effects after it for the agent to see.
"""

from __future__ import annotations

import random
import time
from typing import Any

from django.utils import timezone

from integrations.langgraph_checkpointer.domain.messages import (
    INTERRUPT_ACTION,
    checkpoint_id_after,
    repair_metadata,
)
from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from integrations.langgraph_checkpointer.selectors.checkpoints import langgraph_checkpoint_get
from integrations.langgraph_checkpointer.services.checkpoint_put import (
    langgraph_checkpoint_put_locked,
)
from threads.models import ApprovalRequest, ApprovalStatus, Thread
from threads.selectors.checkpoints import side_effects_after
from threads.services.approvals import approvals_close_locked


def langgraph_repair_put(
    *, thread: Thread, chosen: LanggraphCheckpoint, reason: str, actor: Any
) -> LanggraphCheckpoint:
    """Make the state of `chosen` the namespace's head again, as a new LangGraph checkpoint (a
    rollback's repair, docs/langgraph.md, "Agent frameworks"): the same channel versions (their rows
    and bytes are shared, never copied; the small values `chosen` carries, the new row carries), a
    new id sorting after every existing one, the previous head as its parent, metadata as
    LangGraph's `update_state` writes it, and under `ctxadmin_repair` the side effects after the
    chosen checkpoint's cursor (tool, arguments, status, idempotency key), which the saver shows the
    agent so that it does not repeat them.

    Runs inside the caller's transaction, which holds the thread's lock (select_for_update).
    """
    head = langgraph_checkpoint_get(
        thread=thread, checkpoint_ns=chosen.checkpoint_ns, checkpoint_id=None
    )
    assert head is not None  # chosen is one of the namespace's checkpoints
    checkpoint_id = checkpoint_id_after(
        head.checkpoint_id,
        now_ns=time.time_ns(),
        clock_seq=random.getrandbits(14),
        node=random.getrandbits(48),
    )
    side_effects = [
        {
            "tool_name": effect.tool_name,
            "arguments": effect.call_event.data.get("arguments"),
            "status": effect.status,
            "idempotency_key": effect.idempotency_key,
            "tool_call_id": effect.tool_call_id,
            "call_seq": effect.call_seq,
        }
        for effect in side_effects_after(thread=thread, cursor=chosen.cursor)
    ]
    head_step = head.metadata.get("step")
    metadata = repair_metadata(
        chosen.metadata,
        head_step=head_step if isinstance(head_step, int) else -1,
        repair={
            "restored": chosen.checkpoint_id,
            "ctxadmin_checkpoint": chosen.ctxadmin_checkpoint_id,
            "reason": reason,
            "side_effects": side_effects,
        },
    )
    repaired = langgraph_checkpoint_put_locked(
        thread=thread,
        checkpoint_ns=chosen.checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=head.checkpoint_id,
        checkpoint={
            **chosen.checkpoint,
            "id": checkpoint_id,
            "ts": timezone.now().isoformat(),
        },
        metadata=metadata,
        created_by=actor,
        values_from=chosen,
    )
    # The namespace resumes from the new head, whose id no pending interrupt names: an agent
    # that still needs an answer asks again from there. A reviewer should not wait on the old
    # requests, nor the agent on their decisions.
    pending = ApprovalRequest.objects.filter(
        thread=thread, action=INTERRUPT_ACTION, status=ApprovalStatus.PENDING
    ).order_by("request_event__seq")
    approvals_close_locked(
        thread=thread,
        approvals=[
            a
            for a in pending
            if not isinstance(a.arguments, dict)
            or a.arguments.get("checkpoint_ns", chosen.checkpoint_ns) == chosen.checkpoint_ns
        ],
        reason=f"the thread was rolled back to langgraph:{chosen.checkpoint_id}: the agent "
        "resumes from there and asks again if it still needs an answer",
        actor_label=str(actor) if actor is not None else "system",
    )
    return repaired
