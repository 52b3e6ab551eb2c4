"""Reads of the messages the LangGraph checkpointer mirrors into a thread's log: which events a
mirrored channel version refers to, their JSON forms, the message index, and the tool calls a
task was about to run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from integrations.langgraph_checkpointer.domain.messages import pending_tool_calls
from integrations.langgraph_checkpointer.models import LanggraphChannelVersion, LanggraphMessage
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    _versions,
    langgraph_checkpoint_get,
)
from integrations.langgraph_checkpointer.selectors.redacted import langgraph_forms_of_events
from threads.models import Event, EventKind, Thread


def langgraph_version_message_seqs(thread: Thread, version: LanggraphChannelVersion) -> list[int]:
    """The seqs of the events carrying a mirrored version's messages, in order."""
    if version.message_seqs is not None:
        return [int(seq) for seq in version.message_seqs]
    return list(
        LanggraphMessage.objects.filter(thread=thread, last_seq__lte=version.messages_until_seq)
        .order_by("seq")
        .values_list("seq", flat=True)
    )


def langgraph_version_message_count(thread: Thread, version: LanggraphChannelVersion) -> int | None:
    """How many messages a mirrored version holds (None for a version of bytes)."""
    if version.message_count is not None:
        return version.message_count
    if version.messages_until_seq is None and version.message_seqs is None:
        return None
    return len(langgraph_version_message_seqs(thread, version))


def langgraph_version_get(
    *, thread: Thread, checkpoint_ns: str, channel: str, version: str
) -> LanggraphChannelVersion | None:
    return LanggraphChannelVersion.objects.filter(
        thread=thread, checkpoint_ns=checkpoint_ns, channel=channel, version=version
    ).first()


def langgraph_messages_at(thread: Thread, seqs: list[int]) -> list[dict[str, Any]]:
    """The JSON forms of the messages carried by the events at `seqs`, in that order."""
    by_seq = langgraph_forms_of_events(
        thread,
        list(
            Event.objects.filter(thread=thread, seq__in=set(seqs)).values_list(
                "seq", "kind", "data", "metadata"
            )
        ),
    )
    return [by_seq[seq] for seq in seqs]


# How many of a checkpoint's last messages are read to find the call an interrupt asks about:
# the last AI message and the tool messages after it, without reading a long thread whole.
PENDING_CALL_TAIL = 64


def langgraph_pending_tool_calls(
    *, thread: Thread, checkpoint_ns: str, checkpoint_id: str, channel: str
) -> list[dict[str, Any]]:
    """The tool calls a task that ran from this checkpoint was about to run: the unanswered
    calls of the last AI message among the last messages of its mirrored `channel`
    (`pending_tool_calls`); empty when the checkpoint is not stored or mirrors no messages."""
    row = langgraph_checkpoint_get(
        thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
    )
    version_id = None if row is None else _versions(row).get(channel)
    if version_id is None:
        return []
    version = langgraph_version_get(
        thread=thread, checkpoint_ns=checkpoint_ns, channel=channel, version=version_id
    )
    if version is None or (version.message_seqs is None and version.messages_until_seq is None):
        return []  # not stored, or stored as bytes: nothing the server can read
    seqs = langgraph_version_message_seqs(thread, version)[-PENDING_CALL_TAIL:]
    return pending_tool_calls(langgraph_messages_at(thread, seqs))


def langgraph_side_effect_tools(thread: Thread) -> frozenset[str]:
    """The tools whose calls the thread's log marks as side effects."""
    return frozenset(
        str(name)
        for name in Event.objects.filter(
            thread=thread, kind=EventKind.TOOL_CALL, data__side_effect=True
        )
        .values_list("data__tool_name", flat=True)
        .distinct()
        if name
    )


def langgraph_message_index(thread: Thread, message_ids: Iterable[str]) -> list[LanggraphMessage]:
    """The mirrored messages of the thread with these LangChain ids (every version of each)."""
    return list(
        LanggraphMessage.objects.filter(thread=thread, message_id__in=set(message_ids)).order_by(
            "seq"
        )
    )


def langgraph_messages_count_until(thread: Thread, seq: int) -> int:
    """How many mirrored messages end at or before `seq`."""
    return LanggraphMessage.objects.filter(thread=thread, last_seq__lte=seq).count()


def langgraph_messages_after(thread: Thread, seq: int, limit: int = 100) -> list[LanggraphMessage]:
    """The mirrored messages that end after `seq`, in order (at most `limit`)."""
    return list(
        LanggraphMessage.objects.filter(thread=thread, last_seq__gt=seq).order_by("seq")[:limit]
    )


def langgraph_messages_count_between(thread: Thread, after: int, until: int) -> int:
    """How many mirrored messages end after `after` and at or before `until`."""
    return LanggraphMessage.objects.filter(
        thread=thread, last_seq__gt=after, last_seq__lte=until
    ).count()
