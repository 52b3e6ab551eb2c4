"""Where a LangGraph thread stands, read from its latest checkpoint of the root namespace
(integrations.langgraph_checkpointer.domain.graph_position), with the pending approvals its
interrupts opened.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from integrations.langgraph_checkpointer.domain.graph_position import (
    INTERRUPT_CHANNEL,
    TASKS_CHANNEL,
    GraphPosition,
    graph_position,
    triggered_node,
)
from integrations.langgraph_checkpointer.domain.messages import INTERRUPT_ACTION
from integrations.langgraph_checkpointer.models import LanggraphChannelVersion, LanggraphCheckpoint
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    LanggraphTuple,
    _pending_writes,
    _versions,
    langgraph_checkpoint_get,
)
from threads.models import ApprovalRequest, ApprovalStatus, Thread


@dataclass(frozen=True)
class LanggraphPosition:
    """Where a LangGraph thread stands, with the pending approvals its interrupts opened."""

    position: GraphPosition
    approvals: list[ApprovalRequest]


def langgraph_graph_position(*, thread: Thread) -> LanggraphPosition | None:
    """The position of the thread's latest checkpoint of the root namespace
    (integrations.langgraph_checkpointer.domain.graph_position), None when it has none (not a
    LangGraph thread). One query for a thread without checkpoints; at most five otherwise, none
    growing with the thread."""
    row = langgraph_checkpoint_get(thread=thread, checkpoint_ns="", checkpoint_id=None)
    if row is None:
        return None
    checkpoint = row.checkpoint
    parent = None
    if row.parent_checkpoint_id:
        parent_row = (
            LanggraphCheckpoint.objects.filter(
                thread=thread, checkpoint_ns="", checkpoint_id=row.parent_checkpoint_id
            )
            .only("checkpoint_z")
            .first()
        )
        parent = None if parent_row is None else parent_row.checkpoint
    versions = _versions(row)
    carried = row.small_values
    available = {c for c, value in carried.items() if value is not None and value[0] != "empty"}
    # The trigger channels whose value a version row holds (rare: they are small).
    in_rows = {
        channel: version
        for channel, version in versions.items()
        if channel in carried
        and carried[channel] is None
        and (triggered_node(channel) is not None or channel == TASKS_CHANNEL)
    }
    if in_rows:
        condition = Q(pk__in=[])
        for channel, version in in_rows.items():
            condition |= Q(channel=channel, version=version)
        available.update(
            channel
            for channel, type_ in LanggraphChannelVersion.objects.filter(
                condition, thread=thread, checkpoint_ns=""
            ).values_list("channel", "type")
            if type_ != "empty"
        )
    writes = _pending_writes(thread, [LanggraphTuple(row=row, external_id=thread.external_id)])
    interrupts = [
        w.task_path
        for w in writes.get(("", row.checkpoint_id), [])
        if w.channel == INTERRUPT_CHANNEL
    ]
    position = graph_position(
        checkpoint_id=row.checkpoint_id,
        checkpoint=checkpoint,
        metadata=row.metadata,
        parent=parent,
        available=available,
        interrupt_task_paths=interrupts,
    )
    approvals = []
    if interrupts:
        approvals = list(
            ApprovalRequest.objects.filter(
                thread=thread,
                action=INTERRUPT_ACTION,
                status=ApprovalStatus.PENDING,
                arguments__checkpoint_id=row.checkpoint_id,
            )
            .defer("arguments")
            .order_by("pk")
        )
    return LanggraphPosition(position, approvals)
