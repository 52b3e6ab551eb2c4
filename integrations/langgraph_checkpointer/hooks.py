"""How the LangGraph checkpointer takes part in the core's repairs and pages: what
`AppConfig.ready()` registers with the core's hooks.

- A rollback to a checkpoint listing a LangGraph checkpoint (label `langgraph:<id>`) makes that
  state the LangGraph head again (threads.selectors.checkpoints.StateCheckpoints);
- an `interrupt()` opens an approval request of its own kind, read by the call it pauses
  (threads.selectors.approval_context.ApprovalKind);
- a thread's page shows where its graph stands (threads.views.threads.thread_panels);
- a redaction removes the event's content from the thread's LangGraph state too
  (threads.services.content_scrub.content_scrubbers).
- retention deletes a thread's LangGraph rows with the thread, and prunes a checkpoint's
  LangGraph state with the checkpoint, never one the graph still needs
  (threads.services.retention.thread_deleters,
  threads.services.checkpoint_retention.checkpoint_pruners).
"""

from __future__ import annotations

from typing import Any

from integrations.langgraph_checkpointer.domain.messages import INTERRUPT_ACTION, REPAIR_KEY
from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from integrations.langgraph_checkpointer.selectors.checkpoints import langgraph_head_for_checkpoint
from integrations.langgraph_checkpointer.services.content_scrub import langgraph_content_scrub
from integrations.langgraph_checkpointer.services.repair import langgraph_repair_put
from integrations.langgraph_checkpointer.services.retention import (
    langgraph_retention_checkpoint_rows,
    langgraph_retention_checkpoints_delete,
    langgraph_retention_needs,
    langgraph_retention_thread_delete,
    langgraph_retention_thread_rows,
)
from integrations.langgraph_checkpointer.views import graph_panel
from threads.models import Checkpoint, Thread
from threads.selectors.approval_context import ApprovalKind, approval_kinds
from threads.selectors.checkpoints import StateCheckpoints, state_checkpoints
from threads.services.checkpoint_retention import CheckpointPruner, checkpoint_pruners
from threads.services.content_scrub import content_scrubbers
from threads.services.retention import ThreadDeleter, thread_deleters
from threads.views.threads import thread_panels

# The ids an interrupt's arguments carry beside the call it asks about: folded away under it
# on the approval's card (docs/repairs.md, "Approvals").
INTERRUPT_IDS = ("interrupt_id", "checkpoint_ns", "checkpoint_id", "tool_call_id", "value")


def _owns(checkpoint: Checkpoint) -> bool:
    return LanggraphCheckpoint.objects.filter(ctxadmin_checkpoint=checkpoint).exists()


def _restore(*, thread: Thread, checkpoint: Checkpoint, reason: str, actor: Any) -> dict[str, Any]:
    """The rollback's repair: a new LangGraph head with the chosen checkpoint's state, under
    the rollback's lock; answers what its audit entry records."""
    chosen = LanggraphCheckpoint.objects.get(ctxadmin_checkpoint=checkpoint)
    repaired = langgraph_repair_put(thread=thread, chosen=chosen, reason=reason, actor=actor)
    return {
        "restored": chosen.checkpoint_id,
        "checkpoint_id": repaired.checkpoint_id,
        "parent_checkpoint_id": repaired.parent_checkpoint_id,
        "side_effects": len(repaired.metadata[REPAIR_KEY]["side_effects"]),
    }


def _describe(checkpoint: Checkpoint) -> dict[str, Any] | None:
    """After a rollback: the head it wrote, and the side effects it lists for the agent."""
    head = langgraph_head_for_checkpoint(checkpoint)
    if head is None:
        return None
    return {
        "checkpoint_id": head.checkpoint_id,
        "parent_checkpoint_id": head.parent_checkpoint_id,
        "side_effects": head.metadata.get(REPAIR_KEY, {}).get("side_effects", []),
    }


def register() -> None:
    """Register with the core's hooks, once however often it is called."""
    owner = StateCheckpoints(
        name="langgraph",
        owns=_owns,
        restore=_restore,
        describe=_describe,
        note="A LangGraph checkpoint: the rollback also writes a new LangGraph head with this "
        "checkpoint's state, and lists the side effects below for the agent, so that its next "
        "run resumes from here without repeating them.",
    )
    if owner not in state_checkpoints:
        state_checkpoints.append(owner)
    approval_kinds[INTERRUPT_ACTION] = ApprovalKind(
        label="LangGraph interrupt", shown_otherwise="value", details=INTERRUPT_IDS
    )
    if graph_panel not in thread_panels:
        thread_panels.append(graph_panel)
    if langgraph_content_scrub not in content_scrubbers:
        content_scrubbers.append(langgraph_content_scrub)
    deleter = ThreadDeleter(
        name="langgraph",
        rows=langgraph_retention_thread_rows,
        delete=langgraph_retention_thread_delete,
    )
    if deleter not in thread_deleters:
        thread_deleters.append(deleter)
    pruner = CheckpointPruner(
        name="langgraph",
        needs=langgraph_retention_needs,
        rows=langgraph_retention_checkpoint_rows,
        delete=langgraph_retention_checkpoints_delete,
    )
    if pruner not in checkpoint_pruners:
        checkpoint_pruners.append(pruner)
