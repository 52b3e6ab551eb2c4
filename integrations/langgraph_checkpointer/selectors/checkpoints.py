"""Reads of the LangGraph checkpointer's storage (docs/langgraph.md, "Agent frameworks",
docs/api.md, "LangGraph checkpointer").

Every read is scoped by workspace; a LangGraph `thread_id` is a thread's `external_id` (never
its UUID). A checkpoint is answered with the bytes of its channel values as they were sent, the
JSON forms of its mirrored messages read back from the log, and its pending writes in LangGraph's
order (task_path, task_id, idx).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Max, Q, QuerySet
from django.db.models.fields.json import KeyTransform

from integrations.langgraph_checkpointer.domain.packing import TaskWrites
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphMessage,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.selectors import statements
from integrations.langgraph_checkpointer.selectors.redacted import (
    langgraph_forms_of_events,
    langgraph_redacted_forms,
)
from threads.domain.external_ids import text_storable
from threads.models import Checkpoint, Event, SideEffect, Thread, Workspace
from threads.selectors.statements import postgres_for

# Metadata values compared in SQL before the exact check in Python: strings and integers read
# the same from a JSON key on SQLite and PostgreSQL.
_SQL_COMPARABLE = (str, int)


@dataclass(frozen=True)
class PendingWrite:
    """One pending write of a task, unpacked from the task's row; `pk` tells it apart within
    one read (the key of `LanggraphTuple.write_messages`)."""

    pk: int
    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    data: bytes
    message_seqs: list[int] | None


@dataclass
class LanggraphTuple:
    """A checkpoint as the saver rebuilds it."""

    row: LanggraphCheckpoint
    external_id: str
    values: list[tuple[str, str, bytes]] = field(default_factory=list)  # channel, type, bytes
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # channel -> JSON
    writes: list[PendingWrite] = field(default_factory=list)
    # write pk -> the JSON forms of the messages a write to the mirrored channel refers to
    write_messages: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


def langgraph_thread_get(*, workspace: Workspace, external_id: str) -> Thread | None:
    """The workspace's thread with this external_id, or None."""
    if not text_storable(external_id):
        return None
    return Thread.objects.filter(workspace=workspace, external_id=external_id).first()


def langgraph_threads_get(*, workspace: Workspace, external_ids: Iterable[str]) -> list[Thread]:
    wanted = [external_id for external_id in external_ids if text_storable(external_id)]
    return list(
        Thread.objects.filter(workspace=workspace, external_id__in=wanted).order_by("external_id")
    )


def langgraph_checkpoint_get(
    *, thread: Thread, checkpoint_ns: str, checkpoint_id: str | None
) -> LanggraphCheckpoint | None:
    """The checkpoint `checkpoint_id` of the namespace, or its latest (the highest id: LangGraph's
    ids sort by time) when None."""
    if not _storable(checkpoint_ns, checkpoint_id):
        return None
    rows = LanggraphCheckpoint.objects.filter(thread=thread, checkpoint_ns=checkpoint_ns)
    if checkpoint_id is not None:
        return rows.filter(checkpoint_id=checkpoint_id).first()
    # checkpoint_id is unique in the namespace (lg_checkpoint_unique): read from that index's
    # end, no tiebreak to sort by.
    return rows.order_by("-checkpoint_id").first()


def langgraph_checkpoint_cursor(
    *, thread: Thread, checkpoint_ns: str, checkpoint_id: str
) -> int | None:
    """The cursor of the checkpoint (the last seq of its mirrored messages), None when it is
    not stored."""
    if not _storable(checkpoint_ns, checkpoint_id):
        return None
    return (
        LanggraphCheckpoint.objects.filter(
            thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
        )
        .values_list("cursor", flat=True)
        .first()
    )


def langgraph_checkpoint_find(
    *, workspace: Workspace, external_id: str, checkpoint_ns: str, checkpoint_id: str | None
) -> LanggraphCheckpoint | None:
    """`langgraph_checkpoint_get` by the thread's external_id, with its thread, in one query."""
    if not _storable(external_id, checkpoint_ns, checkpoint_id):
        return None
    connection = postgres_for(LanggraphCheckpoint)
    if connection is not None:
        return statements.checkpoint_find(
            connection, workspace, external_id, checkpoint_ns, checkpoint_id
        )
    rows = LanggraphCheckpoint.objects.filter(
        thread__workspace=workspace, thread__external_id=external_id, checkpoint_ns=checkpoint_ns
    ).select_related("thread")
    if checkpoint_id is not None:
        return rows.filter(checkpoint_id=checkpoint_id).first()
    return rows.order_by("-checkpoint_id").first()


def _storable(*ids: str | None) -> bool:
    """Whether every id given can be stored: one with NUL names nothing (a query with it
    would fail on PostgreSQL)."""
    return all(text_storable(id) for id in ids if id is not None)


def _matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(metadata.get(key) == value for key, value in wanted.items())


def langgraph_checkpoints_list(
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
    if not _storable(external_id, checkpoint_ns, checkpoint_id, before):
        return []
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


def langgraph_tuples(rows: Sequence[LanggraphCheckpoint]) -> list[LanggraphTuple]:
    """The checkpoints with their channel values (bytes, or messages from the log) and writes,
    read with a fixed number of queries per thread whatever the number of checkpoints (a page
    of `list` is one thread's, or a few)."""
    answers = [LanggraphTuple(row=row, external_id=row.thread.external_id) for row in rows]
    by_thread: dict[Any, list[LanggraphTuple]] = {}
    for answer in answers:
        by_thread.setdefault(answer.row.thread_id, []).append(answer)
    for group in by_thread.values():
        _thread_tuples_fill(group[0].row.thread, group)
    return answers


def _thread_tuples_fill(thread: Thread, answers: list[LanggraphTuple]) -> None:
    # What each row carries itself (small values) needs no version row.
    carried = {id(answer): answer.row.small_values for answer in answers}
    wanted: dict[tuple[str, str], set[str]] = {}
    for answer in answers:
        inline = carried[id(answer)]
        for channel, version_id in _versions(answer.row).items():
            if inline.get(channel) is None:
                wanted.setdefault((answer.row.checkpoint_ns, channel), set()).add(version_id)
    stored: dict[tuple[str, str, str], LanggraphChannelVersion] = {}
    connection = postgres_for(LanggraphChannelVersion)
    if wanted and connection is not None:
        stored = statements.versions_with_content(connection, thread, wanted)
    elif wanted:
        condition = Q(pk__in=[])
        for (ns, channel), versions in wanted.items():
            condition |= Q(checkpoint_ns=ns, channel=channel, version__in=versions)
        stored = {
            (v.checkpoint_ns, v.channel, v.version): v
            for v in LanggraphChannelVersion.objects.filter(
                condition, thread=thread
            ).select_related("content")
        }
    writes = _pending_writes(thread, answers)
    # Every message any of them needs, read from the log in one query.
    seqs_of = _versions_message_seqs(thread, list(stored.values()))
    needed: set[int] = {seq for seqs in seqs_of.values() for seq in seqs}
    for group in writes.values():
        for write in group:
            needed.update(int(seq) for seq in write.message_seqs or ())
    forms = _forms_at(thread, needed)
    for answer in answers:
        row = answer.row
        inline = carried[id(answer)]
        for channel, version_id in sorted(_versions(row).items()):
            value = inline.get(channel)
            if value is not None:
                answer.values.append((channel, value[0], value[1]))
                continue
            version = stored.get((row.checkpoint_ns, channel, version_id))
            if version is None:
                continue
            if version.pk in seqs_of:
                answer.messages[channel] = [forms[seq] for seq in seqs_of[version.pk]]
            elif version.content is not None:
                answer.values.append((channel, version.type, bytes(version.content.data)))
            else:
                answer.values.append((channel, version.type, bytes(version.data or b"")))
        answer.writes = writes.get((row.checkpoint_ns, row.checkpoint_id), [])
        answer.write_messages = {
            write.pk: [forms[int(seq)] for seq in write.message_seqs]
            for write in answer.writes
            if write.message_seqs is not None
        }


def _pending_writes(
    thread: Thread, answers: Sequence[LanggraphTuple]
) -> dict[tuple[str, str], list[PendingWrite]]:
    """(namespace, checkpoint_id) -> its pending writes in LangGraph's order (task_path,
    task_id, idx): those its row carries, and those of tasks that wrote before it was stored
    (a row per task; one query)."""
    tasks: dict[tuple[str, str], dict[str, TaskWrites]] = {}
    namespaces = {a.row.checkpoint_ns for a in answers}
    checkpoint_ids = {a.row.checkpoint_id for a in answers}
    connection = postgres_for(LanggraphWrite)
    rows: Iterable[LanggraphWrite] = (
        LanggraphWrite.objects.filter(
            thread=thread, checkpoint_ns__in=namespaces, checkpoint_id__in=checkpoint_ids
        )
        if connection is None
        else statements.task_writes_rows(connection, thread, namespaces, checkpoint_ids)
    )
    for row in rows:
        key = (row.checkpoint_ns, row.checkpoint_id)
        tasks.setdefault(key, {})[row.task_id] = TaskWrites(row.task_id, row.task_path, row.writes)
    for answer in answers:
        key = (answer.row.checkpoint_ns, answer.row.checkpoint_id)
        for task in answer.row.task_writes:
            earlier = tasks.setdefault(key, {}).get(task.task_id)
            if earlier is not None:  # a task that wrote on both sides of the put: first stands
                known = {w.idx for w in earlier.writes}
                task = TaskWrites(
                    task.task_id,
                    earlier.task_path,
                    [*earlier.writes, *(w for w in task.writes if w.idx not in known)],
                )
            tasks[key][task.task_id] = task
    found: dict[tuple[str, str], list[PendingWrite]] = {}
    number = 0
    for key, by_task in tasks.items():
        group = found.setdefault(key, [])
        for task in sorted(by_task.values(), key=lambda t: (t.task_path, t.task_id)):
            for write in sorted(task.writes, key=lambda w: w.idx):
                number += 1
                group.append(
                    PendingWrite(
                        pk=number,
                        task_id=task.task_id,
                        task_path=task.task_path,
                        idx=write.idx,
                        channel=write.channel,
                        type=write.type,
                        data=write.data,
                        message_seqs=write.message_seqs,
                    )
                )
    return found


def _versions_message_seqs(
    thread: Thread, versions: Sequence[LanggraphChannelVersion]
) -> dict[int, list[int]]:
    """Version pk -> the seqs of its messages, for the mirrored ones among `versions`: one
    query for all those that refer to "every message up to a seq"."""
    found = {v.pk: [int(seq) for seq in v.message_seqs] for v in versions if v.message_seqs}
    found.update({v.pk: [] for v in versions if v.message_seqs == []})
    until = [v for v in versions if v.message_seqs is None and v.messages_until_seq is not None]
    if until:
        end_seq = max(v.messages_until_seq or 0 for v in until)
        connection = postgres_for(LanggraphMessage)
        index = (
            list(
                LanggraphMessage.objects.filter(thread=thread, last_seq__lte=end_seq)
                .order_by("seq")
                .values_list("seq", "last_seq")
            )
            if connection is None
            else statements.message_index_until(connection, thread, end_seq)
        )
        for version in until:
            end = version.messages_until_seq or 0
            found[version.pk] = [seq for seq, last in index if last <= end]
    return found


def _versions(row: LanggraphCheckpoint) -> dict[str, str]:
    return {
        str(channel): str(version)
        for channel, version in (row.checkpoint.get("channel_versions") or {}).items()
    }


def _forms_at(thread: Thread, seqs: set[int]) -> dict[int, dict[str, Any]]:
    if not seqs:
        return {}
    connection = postgres_for(Event)
    if connection is not None:
        forms = statements.forms_at(connection, thread, seqs)
        # A redacted event holds no form: rebuilt from what the log still knows of it.
        forms.update(langgraph_redacted_forms(thread, seqs - forms.keys()))
        return forms
    return langgraph_forms_of_events(
        thread,
        list(
            Event.objects.filter(thread=thread, seq__in=seqs).values_list(
                "seq", "kind", "data", "metadata"
            )
        ),
    )


def langgraph_tuple(row: LanggraphCheckpoint) -> LanggraphTuple:
    """The checkpoint with its channel values (bytes, or messages from the log) and writes."""
    return langgraph_tuples([row])[0]


def langgraph_head_for_checkpoint(checkpoint: Checkpoint) -> LanggraphCheckpoint | None:
    """For a ctxadmin checkpoint that lists a LangGraph checkpoint, the newest LangGraph
    checkpoint of that namespace (after a rollback, the one the repair wrote); else None."""
    linked = LanggraphCheckpoint.objects.filter(ctxadmin_checkpoint=checkpoint).first()
    if linked is None:
        return None
    return langgraph_checkpoint_get(
        thread=checkpoint.thread, checkpoint_ns=linked.checkpoint_ns, checkpoint_id=None
    )


def langgraph_tuple_validator(row: LanggraphCheckpoint) -> str:
    """A validator (an HTTP entity tag) of what `langgraph_checkpoint_get` answers for this
    row, without building the answer: the row (a rollback or a put makes another head), its
    writes (those packed in it and the task rows after it, by content), the thread's log
    (`last_seq`, `updated_at`: an append, a side effect's result), its side effects (count,
    last change) and its integrity verdict.
    Equal validators, equal answers (docs/langgraph.md, "Conditional restore")."""
    thread = row.thread
    digest = hashlib.sha256()
    for part in (
        row.pk,
        row.checkpoint_id,
        thread.last_seq,
        thread.updated_at.isoformat() if thread.updated_at else "",
        thread.chain_ok,
        thread.first_bad_seq,
        thread.verified_until,
        thread.verified_at.isoformat() if thread.verified_at else "",
    ):
        digest.update(f"{part}\x1f".encode())
    digest.update(bytes(row.writes_z or b""))
    # PostgreSQL's find statement reads the stamps with the row; the ORM the same way here.
    stamps = getattr(row, "validator_stamps", None) or _validator_stamps(row)
    digest.update("\x1e".join(stamps).encode())
    return f'"{digest.hexdigest()[:32]}"'


def side_effects_stamped(row: LanggraphCheckpoint) -> int | None:
    """How many side effects the thread had when its row was read with its validator's stamps
    (statements.checkpoint_find reads them in the find statement); None when it was not."""
    stamps = getattr(row, "validator_stamps", None)
    return None if stamps is None else int(str(stamps[1]).partition(":")[0])


def _validator_stamps(row: LanggraphCheckpoint) -> tuple[str, str]:
    """The task rows of writes after the checkpoint (id and MD5 of their packed writes) and the
    thread's side effects (how many, the last change in microseconds: a side effect's status
    may change without an event, a fork's), as statements.checkpoint_find reads them."""
    task_rows = LanggraphWrite.objects.filter(
        thread_id=row.thread_id, checkpoint_ns=row.checkpoint_ns, checkpoint_id=row.checkpoint_id
    ).order_by("pk")
    writes = ",".join(
        f"{pk}:{hashlib.md5(bytes(packed or b''), usedforsecurity=False).hexdigest()}"
        for pk, packed in task_rows.values_list("pk", "writes_z")
    )
    effects = SideEffect.objects.filter(thread_id=row.thread_id).aggregate(
        count=Count("pk"), changed=Max("updated_at")
    )
    changed = effects["changed"]
    micros = "" if changed is None else str(round(changed.timestamp() * 1_000_000))
    return writes, f"{effects['count']}:{micros}"
