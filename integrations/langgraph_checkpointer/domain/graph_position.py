"""Where a LangGraph thread stands (docs/dashboard.md, "Where a LangGraph thread stands"): the node
its last step ran, what runs next and which node an interrupt stopped, read from its latest
checkpoint alone — the server never has the graph.

LangGraph decides what runs next from a checkpoint: a node runs when one of its trigger
channels holds a value (is available) at a version newer than the one the node last saw
(`versions_seen[node][channel]`; none seen is older than any), and every Send queued in the
tasks channel runs too. A StateGraph names the trigger channels of node X `branch:to:X` (an
edge or a route to X) and `join:A+B:X` (X waits for A and B); the graph's entry is the
`__start__` channel of the `__start__` node. What ran in the step that made the checkpoint is
told by `versions_seen` as well: the nodes whose entries differ from those of the parent
checkpoint. A task stopped by `interrupt()` leaves an `__interrupt__` write whose task path
names its node; it runs again when resumed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

START = "__start__"
TASKS_CHANNEL = "__pregel_tasks"
INTERRUPT_CHANNEL = "__interrupt__"
_PULL = "__pregel_pull"


@dataclass(frozen=True)
class GraphPosition:
    """A LangGraph thread's latest checkpoint of the root namespace, as a person reads it."""

    checkpoint_id: str
    step: int | None
    source: str  # "input", "loop", "update", "fork" (LangGraph's metadata), or ""
    ran: tuple[str, ...]  # the nodes of the step that made the checkpoint
    next: tuple[str, ...]  # the nodes that run next, as LangGraph's `StateSnapshot.next`
    sends: bool  # Send tasks are queued besides
    interrupted: tuple[str, ...]  # the nodes whose task an interrupt() stopped

    @property
    def finished(self) -> bool:
        return not self.next and not self.sends and not self.interrupted


def triggered_node(channel: str) -> str | None:
    """The node a StateGraph trigger channel starts, None for another channel."""
    if channel == START:
        return START
    if channel.startswith("branch:to:"):
        return channel[len("branch:to:") :] or None
    if channel.startswith("join:"):
        node = channel.rsplit(":", 1)[-1]
        return node or None
    return None


def version_newer(version: Any, seen: Any) -> bool:
    """LangGraph's `version > seen` for versions as a checkpoint's JSON carries them: numbers
    (as numbers or digits) compare as numbers, strings (zero-padded by the savers) as strings;
    nothing seen is older than anything."""
    if seen is None:
        return version is not None
    if isinstance(version, int | float) and isinstance(seen, int | float):
        return version > seen
    a, b = str(version), str(seen)
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return a > b


def task_node(task_path: str) -> str:
    """The node of a task from its path as the saver stores it ("~__pregel_pull, approve");
    a task of a Send reads as the whole path."""
    parts = [part.strip() for part in task_path.lstrip("~").split(",")]
    if len(parts) >= 2 and parts[0] == _PULL:
        return parts[1]
    return task_path


def _seen(checkpoint: Mapping[str, Any]) -> Mapping[str, Any]:
    seen = checkpoint.get("versions_seen")
    return seen if isinstance(seen, Mapping) else {}


def graph_position(
    *,
    checkpoint_id: str,
    checkpoint: Mapping[str, Any],
    metadata: Mapping[str, Any],
    parent: Mapping[str, Any] | None,
    available: Collection[str],
    interrupt_task_paths: Iterable[str],
) -> GraphPosition:
    """The position of a checkpoint: its JSON (`channel_versions`, `versions_seen`), its
    metadata, its parent's JSON (None: it has none), the channels that hold a value in it and
    the task paths of its pending `__interrupt__` writes."""
    versions = checkpoint.get("channel_versions")
    versions = versions if isinstance(versions, Mapping) else {}
    seen = _seen(checkpoint)
    upcoming: list[str] = []
    for channel, version in versions.items():
        node = triggered_node(str(channel))
        if node is None or channel not in available or node in upcoming:
            continue
        node_seen = seen.get(node)
        last = node_seen.get(channel) if isinstance(node_seen, Mapping) else None
        if version_newer(version, last):
            upcoming.append(node)
    parent_seen = _seen(parent) if parent is not None else {}
    ran = sorted(
        str(node)
        for node, entry in seen.items()
        # `__interrupt__` holds interrupt_before/after's bookkeeping, `__input__` nothing.
        if node != INTERRUPT_CHANNEL and entry and entry != parent_seen.get(node)
    )
    interrupted: list[str] = []
    for path in interrupt_task_paths:
        node = task_node(path)
        if node not in interrupted:
            interrupted.append(node)
    step = metadata.get("step")
    return GraphPosition(
        checkpoint_id=checkpoint_id,
        step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        source=str(metadata.get("source") or ""),
        ran=tuple(ran),
        next=tuple(sorted(upcoming)),
        sends=TASKS_CHANNEL in available and TASKS_CHANNEL in versions,
        interrupted=tuple(interrupted),
    )
