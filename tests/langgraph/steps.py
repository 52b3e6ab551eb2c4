"""Checkpoints put through a saver one step at a time, as a graph's loop puts them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, CheckpointMetadata, empty_checkpoint


def put_steps(
    saver: Any,
    thread_id: str,
    messages: list[Any],
    steps: Sequence[list[Any]],
    *,
    metadata_for: Callable[[int], dict[str, Any]] = lambda step: {},
    after_put: Callable[[RunnableConfig, int], None] = lambda stored, step: None,
) -> list[RunnableConfig]:
    """One checkpoint per step, each the child of the one before: the messages so far plus the
    step's, and a `count` channel; then the task's write of `count` and `after_put`. Returns the
    stored configs in order."""
    configs: list[RunnableConfig] = []
    parent: dict[str, Any] = {}
    for step, added in enumerate(steps):
        messages = messages + added
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages, "count": step}
        versions: ChannelVersions = {"messages": f"{step + 1}", "count": f"{step + 1}"}
        checkpoint["channel_versions"] = versions
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": "", **parent}
        }
        metadata: CheckpointMetadata = {"source": "loop", "step": step, "parents": {}}
        metadata.update(metadata_for(step))  # type: ignore[typeddict-item]
        stored = saver.put(config, checkpoint, metadata, versions)
        saver.put_writes(stored, [("count", step)], f"task-{step}")
        after_put(stored, step)
        parent = {"checkpoint_id": stored["configurable"]["checkpoint_id"]}
        configs.append(stored)
    return configs
