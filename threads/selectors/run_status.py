"""What a thread's agent has to pick up (docs/dashboard.md, "Run status"): the decisions,
resolutions and rollbacks made since it last picked one up, for the thread header's run-status
chip and the stalled problem."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from threads.domain.external_ids import text_storable
from threads.models import ApprovalRequest, AuditEntry, Thread, Workspace

# The audit actions that owe the agent a pickup (threads.services.run_status.agent_owed_locked
# runs in each of their transactions, before the entry is written).
OWING_ACTIONS = {
    "approval.decide": "approval decided",
    "side_effect.resolve": "side effect resolved",
    "thread.rollback": "rolled back",
}
SHOWN = 5


@dataclass(frozen=True)
class Pickup:
    what: str  # "approval decided", ...
    detail: str  # "approve: Refund 89.90 (reason)", ...
    by: str
    at: datetime


def agent_pickups(*, thread: Thread) -> list[Pickup]:
    """The changes the agent has not picked up yet, oldest first (at most SHOWN): none unless
    the thread waits for its agent. One query on the thread's audit entries, or none."""
    since = thread.agent_owed_since
    if since is None:
        return []
    entries = AuditEntry.objects.filter(
        thread=thread, action__in=list(OWING_ACTIONS), created_at__gte=since
    ).order_by("created_at", "pk")[:SHOWN]
    return [
        Pickup(
            what=OWING_ACTIONS[entry.action],
            detail=_detail(entry.action, entry.after or {}),
            by=entry.actor_label,
            at=entry.created_at,
        )
        for entry in entries
    ]


def _detail(action: str, after: dict[str, Any]) -> str:
    if action == "approval.decide":
        return f"{after.get('decision', '')}: {after.get('reason', '')}"
    if action == "side_effect.resolve":
        return f"{after.get('status', '')} (event #{after.get('seq', '?')})"
    return f"to checkpoint {after.get('checkpoint', '?')}: {after.get('reason', '')}"


def approval_picked_up(approval: ApprovalRequest, thread: Thread) -> bool | None:
    """Whether the agent has picked up this request's decision: False while the thread still
    owes a pickup from the decision's time or before (approval_decide stores that time as
    decided_at), True once the agent has read since; None when nothing is to be said — an
    undecided request, one closed by ctxadmin (no person decided it, nothing waits for the
    agent), or one decided before reads were recorded."""
    decided_at = approval.decided_at
    if decided_at is None or approval.decided_by_id is None:
        return None
    since = thread.agent_owed_since
    if since is not None and since <= decided_at:
        return False
    # A read that picks something up is always recorded, at its own time, after the decision.
    if thread.agent_read_at is not None and thread.agent_read_at >= decided_at:
        return True
    return None


def thread_owed_mark(*, workspace: Workspace, external_id: str) -> Thread | None:
    """The thread's key and run-status marks only, by external_id within the agent's
    workspace: what a checkpointer's list read picks up (threads.api.auth.agent_read_mark), read
    before it."""
    if not text_storable(external_id):
        return None
    return (
        Thread.objects.filter(workspace=workspace, external_id=external_id)
        .only("pk", "agent_owed_at", "agent_owed_since", "agent_read_at")
        .first()
    )
