"""Reads of the LangGraph checkpointer's storage (docs/design.md §15, docs/api.md §14).

Every read is scoped by workspace; a LangGraph `thread_id` is a thread's `external_id` (never
its UUID). A checkpoint is answered with the bytes of its channel values as they were sent, the
JSON forms of its mirrored messages read back from the log, and its pending writes in LangGraph's
order (task_path, task_id, idx).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTransform

from threads.domain.langgraph import message_from_event
from threads.models import (
    Checkpoint,
    Event,
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphMessage,
    LanggraphWrite,
    Thread,
    Workspace,
)

# Metadata values compared in SQL before the exact check in Python: strings and integers read
# the same from a JSON key on SQLite and PostgreSQL.
_SQL_COMPARABLE = (str, int)


@dataclass
class LanggraphTuple:
    """A checkpoint as the saver rebuilds it."""

    row: LanggraphCheckpoint
    external_id: str
    values: list[tuple[str, str, bytes]] = field(default_factory=list)  # channel, type, bytes
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # channel -> JSON
    writes: list[LanggraphWrite] = field(default_factory=list)


def lg_thread_get(*, workspace: Workspace, external_id: str) -> Thread | None:
    """The workspace's thread with this external_id, or None."""
    return Thread.objects.filter(workspace=workspace, external_id=external_id).first()


def lg_threads_get(*, workspace: Workspace, external_ids: Iterable[str]) -> list[Thread]:
    return list(
        Thread.objects.filter(workspace=workspace, external_id__in=list(external_ids)).order_by(
            "external_id"
        )
    )


def lg_checkpoint_get(
    *, thread: Thread, checkpoint_ns: str, checkpoint_id: str | None
) -> LanggraphCheckpoint | None:
    """The checkpoint `checkpoint_id` of the namespace, or its latest (the highest id: LangGraph's
    ids sort by time) when None."""
    rows = LanggraphCheckpoint.objects.filter(thread=thread, checkpoint_ns=checkpoint_ns)
    if checkpoint_id is not None:
        return rows.filter(checkpoint_id=checkpoint_id).first()
    return rows.order_by("-checkpoint_id", "-pk").first()


def _matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(metadata.get(key) == value for key, value in wanted.items())


def lg_checkpoints_list(
    *,
    workspace: Workspace,
    external_id: str | None = None,
    checkpoint_ns: str | None = None,
    checkpoint_id: str | None = None,
    metadata_filter: Mapping[str, Any] | None = None,
    before: str | None = None,
    after_page: tuple[str, int] | None = None,
    limit: int,
) -> list[LanggraphCheckpoint]:
    """Checkpoints newest first (checkpoint_id descending), at most `limit`: of one thread or the
    whole workspace, one namespace or all, only `checkpoint_id` when given, whose metadata has
    every key of `metadata_filter` equal, with a checkpoint_id below `before`. `after_page`
    (checkpoint_id, pk) continues a page."""
    rows: QuerySet[LanggraphCheckpoint] = LanggraphCheckpoint.objects.filter(
        thread__workspace=workspace
    ).select_related("thread")
    if external_id is not None:
        rows = rows.filter(thread__external_id=external_id)
    if checkpoint_ns is not None:
        rows = rows.filter(checkpoint_ns=checkpoint_ns)
    if checkpoint_id is not None:
        rows = rows.filter(checkpoint_id=checkpoint_id)
    if before is not None:
        rows = rows.filter(checkpoint_id__lt=before)
    if after_page is not None:
        last_id, last_pk = after_page
        rows = rows.filter(Q(checkpoint_id__lt=last_id) | Q(checkpoint_id=last_id, pk__lt=last_pk))
    wanted = dict(metadata_filter or {})
    for index, (key, value) in enumerate(wanted.items()):
        if isinstance(value, _SQL_COMPARABLE) and not isinstance(value, bool):
            # A transform, not a `metadata__<key>` lookup: a key may be named like a lookup.
            name = f"metadata_key_{index}"
            rows = rows.alias(**{name: KeyTransform(key, "metadata")}).filter(**{name: value})
    found: list[LanggraphCheckpoint] = []
    for row in rows.order_by("-checkpoint_id", "-pk").iterator(chunk_size=200):
        if _matches(row.metadata, wanted):
            found.append(row)
            if len(found) >= limit:
                break
    return found


def _message_seqs(thread: Thread, version: LanggraphChannelVersion) -> list[int]:
    if version.message_seqs is not None:
        return [int(seq) for seq in version.message_seqs]
    return list(
        LanggraphMessage.objects.filter(thread=thread, last_seq__lte=version.messages_until_seq)
        .order_by("seq")
        .values_list("seq", flat=True)
    )


def lg_messages_at(thread: Thread, seqs: list[int]) -> list[dict[str, Any]]:
    """The JSON forms of the messages carried by the events at `seqs`, in that order."""
    by_seq = {
        seq: message_from_event(kind, data, metadata)
        for seq, kind, data, metadata in Event.objects.filter(
            thread=thread, seq__in=set(seqs)
        ).values_list("seq", "kind", "data", "metadata")
    }
    return [by_seq[seq] for seq in seqs]


def lg_tuple(row: LanggraphCheckpoint) -> LanggraphTuple:
    """The checkpoint with its channel values (bytes, or messages from the log) and writes."""
    thread = row.thread
    versions = {
        str(channel): str(version)
        for channel, version in (row.checkpoint.get("channel_versions") or {}).items()
    }
    answer = LanggraphTuple(row=row, external_id=thread.external_id)
    stored = LanggraphChannelVersion.objects.filter(
        thread=thread,
        checkpoint_ns=row.checkpoint_ns,
        channel__in=list(versions),
        version__in=set(versions.values()),
    ).select_related("content")
    for version in sorted(stored, key=lambda v: v.channel):
        if versions.get(version.channel) != version.version:
            continue
        if version.messages_until_seq is not None or version.message_seqs is not None:
            answer.messages[version.channel] = lg_messages_at(
                thread, _message_seqs(thread, version)
            )
        elif version.content is not None:
            answer.values.append((version.channel, version.type, bytes(version.content.data)))
        else:
            answer.values.append((version.channel, version.type, b""))
    answer.writes = list(
        LanggraphWrite.objects.filter(
            thread=thread, checkpoint_ns=row.checkpoint_ns, checkpoint_id=row.checkpoint_id
        ).order_by("task_path", "task_id", "idx")
    )
    return answer


def lg_message_index(thread: Thread, message_ids: Iterable[str]) -> list[LanggraphMessage]:
    """The mirrored messages of the thread with these LangChain ids (every version of each)."""
    return list(
        LanggraphMessage.objects.filter(thread=thread, message_id__in=set(message_ids)).order_by(
            "seq"
        )
    )


def lg_messages_count_until(thread: Thread, seq: int) -> int:
    """How many mirrored messages end at or before `seq`."""
    return LanggraphMessage.objects.filter(thread=thread, last_seq__lte=seq).count()


def lg_head_for_checkpoint(checkpoint: Checkpoint) -> LanggraphCheckpoint | None:
    """For a ctxadmin checkpoint that lists a LangGraph checkpoint, the newest LangGraph
    checkpoint of that namespace (after a rollback, the one the repair wrote); else None."""
    linked = LanggraphCheckpoint.objects.filter(ctxadmin_checkpoint=checkpoint).first()
    if linked is None:
        return None
    return lg_checkpoint_get(
        thread=checkpoint.thread, checkpoint_ns=linked.checkpoint_ns, checkpoint_id=None
    )
