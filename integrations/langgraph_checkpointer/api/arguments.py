"""A put's and a write's validated bodies as the services' arguments (the put and writes
endpoints, and a batch of them)."""

from __future__ import annotations

from typing import Any

from integrations.langgraph_checkpointer.services.checkpoint_put import ValueIn
from integrations.langgraph_checkpointer.services.interrupts import InterruptIn
from integrations.langgraph_checkpointer.services.message_mirror import MessageIn, MessagesIn
from integrations.langgraph_checkpointer.services.writes import WriteIn


def put_arguments(data: dict[str, Any]) -> dict[str, Any]:
    """`langgraph_checkpoint_put`'s arguments but the workspace, thread and actor."""
    messages = data.get("messages")
    return {
        "checkpoint_ns": data["checkpoint_ns"],
        "checkpoint_id": data["checkpoint_id"],
        "parent_checkpoint_id": data.get("parent_checkpoint_id") or "",
        "checkpoint": data["checkpoint"],
        "metadata": data["metadata"],
        "values": [ValueIn(**value) for value in data["values"]],
        "messages": None
        if messages is None
        else MessagesIn(
            channel=messages["channel"],
            version=messages["version"],
            entries=[
                MessageIn(id=e["id"], digest=e["digest"], message=e.get("message"))
                for e in messages["entries"]
            ],
            side_effect_tools=frozenset(messages.get("side_effect_tools") or ()),
            base_version=messages.get("base_version"),
            base_count=messages.get("base_count") or 0,
        ),
    }


def _write_in(write: dict[str, Any]) -> WriteIn:
    if "messages" in write:
        return WriteIn(
            idx=write["idx"],
            channel=write["channel"],
            messages=[
                MessageIn(id=e["id"], digest=e["digest"], message=e.get("message"))
                for e in write["messages"]
            ],
        )
    return WriteIn(
        idx=write["idx"], channel=write["channel"], type=write["type"], data=write["data"]
    )


def writes_arguments(data: dict[str, Any]) -> dict[str, Any]:
    """`langgraph_writes_put`'s arguments but the workspace, thread and actor."""
    return {
        "checkpoint_ns": data["checkpoint_ns"],
        "checkpoint_id": data["checkpoint_id"],
        "task_id": data["task_id"],
        "task_path": data["task_path"],
        "writes": [_write_in(w) for w in data["writes"]],
        "interrupts": [InterruptIn(id=i["id"], value=i["value"]) for i in data["interrupts"]],
        "side_effect_tools": frozenset(data.get("side_effect_tools") or ()),
    }
