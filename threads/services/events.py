"""Appending to a thread's event log (docs/event-log.md, "Event log").

Numbering and chaining happen under the thread's lock: `select_for_update()` on the thread row on
PostgreSQL; on SQLite every transaction is BEGIN IMMEDIATE, which serialises writers.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connections, router, transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from threads.domain import chain
from threads.domain.canonical import format_time, join_canonical
from threads.domain.errors import (
    IdempotencyConflict,
    InvalidEvent,
    InvalidRetraction,
    NoOpenToolCall,
    NotFound,
)
from threads.domain.events import NewEvent, stored_members
from threads.domain.ledger import DUPLICATE_OF
from threads.domain.markers import RETRACTABLE_KINDS, RETRACTION
from threads.keys.chain import thread_key
from threads.models import (
    TOOL_CALL_INDEXED,
    TOOL_CALL_INDEXED_SQL,
    Event,
    EventKind,
    Thread,
    Workspace,
)
from threads.selectors.events import retractions_by_target
from threads.selectors.statements import log_queries, rows_read, server_cursor
from threads.services.event_rows import (
    NewRow,
    insert_events_and_head,
    side_effect_and_approval_statements,
)
from threads.services.event_tokens import TokenCounts, encoding_guess, remember_encoding
from threads.services.metrics import events_appended_statements

# Called after commit with (thread or its id, appended events: Event rows, or dicts of seq, kind
# and the kind's fields); the pipeline registers its triggers.
after_append_hooks: list[Callable[[Any, list[Event | dict[str, Any]]], None]] = []


class Appended:
    """One event of an append: a new one, or the original an idempotent replay answered with."""

    __slots__ = ("_event", "created", "row", "chained")

    def __init__(
        self,
        event: Event | None,
        *,
        created: bool,
        row: NewRow | None = None,
        chained: str | None = None,
    ) -> None:
        self._event = event
        self.created = created  # False when an idempotent replay answered with the original
        self.row = row  # a new event's row; None for a replay
        # A new event's stored form as canonical JSON text (what the chain hashed: without
        # token_count and hash), so that the answer is assembled without encoding the event
        # again; None for a replay.
        self.chained = chained

    @property
    def event(self) -> Event:
        """The event as a model, built on first use for a new one."""
        if self._event is None:
            assert self.row is not None
            self._event = self.row.model()
        return self._event


@dataclass
class _Calls:
    """The calls a batch's results may bind to, read under the thread's lock: per tool_call_id
    the seqs of calls with no result yet (newest last), which calls have a side effect, and per
    id the latest call that has one with its first result's seq (what a second result for the
    call is bound to and flagged with, docs/event-log.md, "Idempotency and binding")."""

    open: dict[str, list[int]] = field(default_factory=dict)
    side_effects: set[int] = field(default_factory=set)
    answered: dict[str, tuple[int, int]] = field(default_factory=dict)


def _open_calls(thread: Thread, tool_call_ids: set[str]) -> _Calls:
    """The calls of `tool_call_ids` (_Calls)."""
    if not tool_call_ids:
        return _Calls()
    connection = connections[router.db_for_write(Event)]
    # Only the key columns and the result's call_seq: tool results can be large and are not
    # needed here.
    rows: Any
    if connection.vendor == "postgresql":
        rows = _open_call_rows_postgres(connection, thread, sorted(tool_call_ids))
    else:
        rows = (
            Event.objects.filter(
                thread=thread,
                tool_call_id__in=tool_call_ids,
                kind__in=(EventKind.TOOL_CALL, EventKind.TOOL_RESULT),
            )
            .filter(TOOL_CALL_INDEXED)
            .values_list("kind", "seq", "tool_call_id", "data__call_seq", "data__side_effect")
            .order_by()
        )
    # Sorted here, not by the statement: asked for its order, SQLite without table statistics
    # (and PostgreSQL on a small thread) walks the thread's (thread, seq) index instead of
    # probing the ids.
    rows = sorted(rows, key=lambda row: row[1])
    found = _Calls()
    answered: dict[int, int] = {}  # call seq -> its first result's seq
    by_seq: dict[int, str] = {}
    for kind, seq, tool_call_id, call_seq, side_effect in rows:
        if kind == EventKind.TOOL_CALL:
            by_seq[seq] = tool_call_id
            if side_effect is True:
                found.side_effects.add(seq)
        else:
            answered.setdefault(call_seq, seq)
    for seq, call_id in by_seq.items():
        if seq not in answered:
            found.open.setdefault(call_id, []).append(seq)
        else:
            found.answered[call_id] = (seq, answered[seq])
    return found


def _open_call_rows_postgres(
    connection: Any, thread: Thread, tool_call_ids: list[str]
) -> list[tuple[str, int, str, int | None, bool]]:
    """_open_calls' rows on PostgreSQL, as one prepared statement with the ids as one array:
    a tool result's append runs it, and compiling the ORM's query with its two JSON key
    transforms cost more CPU than the rest of a one-event append's reads."""
    table = connection.ops.quote_name(Event._meta.db_table)
    sql = (
        "SELECT kind, seq, tool_call_id, (data->>'call_seq')::bigint, "
        f"COALESCE(data->'side_effect' = 'true'::jsonb, false) FROM {table} "
        "WHERE thread_id = %s AND tool_call_id = ANY(%s::text[]) AND kind = ANY(%s::text[]) "
        f"AND {TOOL_CALL_INDEXED_SQL}"
    )
    kinds = [EventKind.TOOL_CALL.value, EventKind.TOOL_RESULT.value]
    # _open_calls sorts them
    return cast(Any, rows_read(connection, sql, (thread.pk, tool_call_ids, kinds)))


@dataclass
class _Retractions:
    """What a batch's retractions are checked against, read under the thread's lock: the kind
    of each event they name, each such tool call's result and each such result's call (a
    pair is one item, docs/api.md, "Append — `POST` (agents)"), and the retraction already naming an
    event (target -> its seq). The batch's own events join them as they are numbered."""

    kinds: dict[int, str] = field(default_factory=dict)
    partners: dict[int, int] = field(default_factory=dict)
    by_target: dict[int, int] = field(default_factory=dict)

    def retracted_by(self, target: int) -> tuple[int, int | None] | None:
        """The retraction that took `target` out, and the partner it named if not `target`."""
        if target in self.by_target:
            return self.by_target[target], None
        partner = self.partners.get(target)
        if partner is not None and partner in self.by_target:
            return self.by_target[partner], partner
        return None

    def pair(self, call_seq: int, result_seq: int) -> None:
        self.partners[call_seq], self.partners[result_seq] = result_seq, call_seq


def _retraction_lookups(thread: Thread, new_events: Sequence[NewEvent]) -> _Retractions:
    """The retractions' lookups (_Retractions). Retractions come after their target, so only
    events after the lowest target are read: a short range of the (thread, seq) index when
    agents pop recent items."""
    targets = {new.data["retracts"] for new in new_events if new.kind == RETRACTION}
    if not targets:
        return _Retractions()
    looked = _Retractions()
    calls: dict[str, int] = {}
    for seq, kind, tool_call_id, call_seq in Event.objects.filter(
        thread=thread, seq__in=targets
    ).values_list("seq", "kind", "tool_call_id", "data__call_seq"):
        looked.kinds[seq] = kind
        if kind == "tool_result" and isinstance(call_seq, int):
            looked.pair(call_seq, seq)
        elif kind == "tool_call":
            calls[tool_call_id] = seq
    if calls:
        for seq, call_seq in Event.objects.filter(
            thread=thread, kind="tool_result", tool_call_id__in=calls, seq__gt=min(calls.values())
        ).values_list("seq", "data__call_seq"):
            if call_seq in targets:
                looked.pair(call_seq, seq)
    looked.by_target = retractions_by_target(thread=thread, targets=targets | set(looked.partners))
    return looked


def _check_retraction(target: int, seq: int, retractions: _Retractions, where: str) -> None:
    """A retraction at `seq` may name only an earlier agent-visible item not yet retracted,
    either side of a tool call's pair counting as the pair (docs/api.md,
    "Append — `POST` (agents)")."""
    kind = retractions.kinds.get(target)
    retracted = retractions.retracted_by(target)
    if target >= seq:
        why = f"must name an earlier event (below {seq})"
    elif kind is None:
        why = f"no event #{target} in this thread"
    elif kind not in RETRACTABLE_KINDS:
        why = f"#{target} is a {kind} event; only {', '.join(RETRACTABLE_KINDS)} may be retracted"
    elif retracted is not None:
        by, partner = retracted
        side = "tool_result" if kind == "tool_call" else "tool_call"
        other = "" if partner is None else f" with its {side} #{partner}"
        why = f"#{target} is already retracted{other} by #{by}"
    else:
        return
    prefix = "" if where == "event" else f"{where}: "
    raise InvalidRetraction(f"{prefix}retracts {why}", fields={"retracts": why})


def event_append_batch(
    *, thread: Thread, new_events: Sequence[NewEvent], lock: bool = True, by_agent: bool = True
) -> list[Appended]:
    """Append events to a thread, all or nothing. `by_agent`: False for events that do not
    come from the thread's agent at work (an import): they leave its run status as it was.

    Locks the thread row (select_for_update) before numbering anything. Idempotent by
    client_event_id: the same id and body answers with the original event, the same id with
    another body raises IdempotencyConflict. A tool_result binds to the latest call with its
    tool_call_id that has no result yet, or raises NoOpenToolCall.
    """
    with transaction.atomic(durable=lock):
        locked = _with_replay_count(
            Thread.objects.select_for_update().filter(pk=thread.pk), new_events
        ).get()
        appended = _append_locked(locked, new_events, by_agent=by_agent)
    _schedule_hooks(locked, appended)
    thread.last_seq, thread.chain_head = locked.last_seq, locked.chain_head
    thread.token_total = locked.token_total
    return appended


def event_append_locked(thread: Thread, new_events: Sequence[NewEvent]) -> list[Appended]:
    """event_append_batch for a caller whose transaction already holds the lock of `thread`,
    the row it locked (an integration's write mirroring its messages): no second lock, and on
    PostgreSQL the replays of the batch's client_event_ids are looked for with one prepared
    statement, the events themselves read only when there are some. Updates `thread`'s head
    fields in place."""
    client_ids = sorted({e.client_event_id for e in new_events if e.client_event_id is not None})
    connection = connections[router.db_for_write(Event)]
    if client_ids and connection.vendor == "postgresql":
        table = connection.ops.quote_name(Event._meta.db_table)
        sql = (
            f"SELECT COUNT(*) FROM {table} WHERE thread_id = %s "
            "AND client_event_id = ANY(%s::text[])"
        )
        ((count,),) = rows_read(connection, sql, (thread.pk, client_ids))
        # Under the lock the count is current: _may_have_replays trusts it.
        thread.replays = count  # type: ignore[attr-defined]
        thread.log_seq = thread.last_seq  # type: ignore[attr-defined]
    appended = _append_locked(thread, new_events)
    _schedule_hooks(thread, appended)
    return appended


def thread_events_append(
    *,
    workspace: Workspace,
    thread_id: str,
    new_events: Sequence[NewEvent],
    batch: bool | None = None,
) -> tuple[Thread, list[Appended]]:
    """The API's append: find the workspace's thread by UUID or external_id and lock it in the
    same query (select_for_update), then append as event_append_batch does. Raises NotFound
    for a thread outside the workspace. `batch`: the request was a batch, so a refusal names
    its event `events[i]` even in a batch of one (by default: when there are several)."""
    guess_key = (workspace.pk, thread_id)
    counts = TokenCounts(new_events, encoding_guess(guess_key))
    try:
        with transaction.atomic(durable=True):
            locked = _thread_lock_for_workspace(workspace, thread_id, new_events)
            appended = _append_locked(locked, new_events, counts=counts, batch=batch)
    finally:
        counts.cancel()
    remember_encoding(guess_key, locked.encoding)
    _schedule_hooks(locked, appended)
    return locked, appended


def _with_replay_count(
    threads: QuerySet[Thread], new_events: Sequence[NewEvent]
) -> QuerySet[Thread]:
    """Count, in the lock's own query, the events that already carry one of the batch's
    client_event_ids: new events (the common case) then cost no query of their own.

    On PostgreSQL the subqueries read the snapshot taken when the statement began, before it
    waited for the lock, so the count may miss events another writer committed meanwhile.
    `log_seq` (the last seq in that same snapshot) tells: the count is trusted only when it
    equals the locked row's last_seq, i.e. nothing was appended in between.
    """
    client_ids = {e.client_event_id for e in new_events if e.client_event_id is not None}
    if not client_ids:
        return threads
    matches = (
        Event.objects.filter(thread=OuterRef("pk"), client_event_id__in=client_ids)
        .order_by()
        .values("thread")
        .annotate(n=Count("pk"))
        .values("n")
    )
    log_seq = Event.objects.filter(thread=OuterRef("pk")).order_by("-seq").values("seq")[:1]
    return threads.annotate(
        replays=Coalesce(Subquery(matches), 0), log_seq=Coalesce(Subquery(log_seq), 0)
    )


def _may_have_replays(thread: Thread) -> bool:
    """False only when the lock's query counted no replay in an up-to-date snapshot."""
    return not (
        getattr(thread, "replays", None) == 0
        and getattr(thread, "log_seq", None) == thread.last_seq
    )


def _thread_lock_for_workspace(
    workspace: Workspace, thread_id: str, new_events: Sequence[NewEvent]
) -> Thread:
    """The workspace's thread by UUID or external_id, locked (FOR UPDATE on PostgreSQL; on
    SQLite the IMMEDIATE transaction already holds the write lock), with the replay counts of
    _with_replay_count. Written as SQL: this runs on every append, and compiling the same
    ORM query with its two subqueries costs more CPU than the rest of a one-event append.
    """
    connection = connections[router.db_for_write(Thread)]
    thread_table, event_table, columns, names = _lock_sql_parts(connection.alias)
    client_ids = sorted({e.client_event_id for e in new_events if e.client_event_id is not None})
    postgres = connection.vendor == "postgresql"
    fields = Thread._meta.concrete_fields
    params: list[Any] = []
    if client_ids:
        if postgres:
            # The ids as one array parameter (a 500-id IN list costs milliseconds to parse and
            # plan on every batch), each probed in the (thread, client_event_id) index by a
            # correlated subquery: a join may be planned as a scan of all the thread's ids,
            # whose cost grows with the log.
            replays = (
                f"SELECT COUNT(*) FROM unnest(%s::text[]) AS c(id) WHERE (SELECT 1 FROM "
                f"{event_table} e WHERE e.thread_id = t.id AND e.client_event_id = c.id) "
                "IS NOT NULL"
            )
            params.append(client_ids)
        else:
            replays = (
                f"SELECT COUNT(*) FROM {event_table} e WHERE e.thread_id = t.id AND "
                f"e.client_event_id IN ({', '.join(['%s'] * len(client_ids))})"
            )
            params += client_ids
        columns += (
            f", ({replays}) AS replays, COALESCE((SELECT MAX(e.seq) FROM {event_table} e "
            "WHERE e.thread_id = t.id), 0) AS log_seq"
        )
    try:
        uid: uuid.UUID | None = uuid.UUID(thread_id)
    except ValueError:
        uid = None
    where = "t.workspace_id = %s AND "
    params.append(workspace.pk)
    if uid is None:
        where += "t.external_id = %s"
        params.append(thread_id)
    else:
        where += "(t.id = %s OR t.external_id = %s)"
        pk_field: Any = Thread._meta.pk
        params += [uid if postgres else pk_field.get_db_prep_value(uid, connection), thread_id]
    lock = " FOR UPDATE OF t" if connection.features.has_select_for_update_of else ""
    sql = f"SELECT {columns} FROM {thread_table} t WHERE {where}{lock}"
    if postgres:
        # psycopg gives every column of the thread its Python type (uuid, timestamptz, ...),
        # so rows become models with no converter, as Django's own reads would make them.
        # In a pipeline: the transaction's BEGIN goes in the same round trip as the query.
        with server_cursor(connection) as pg, pg.connection.pipeline():
            pg.execute(sql, params)
            rows = pg.fetchall()
        log_queries(connection, time.monotonic(), sql)
        found = []
        for row in rows:
            thread = Thread.from_db(connection.alias, names, row[: len(fields)])
            if client_ids:
                thread.replays, thread.log_seq = row[len(fields) :]  # type: ignore[attr-defined]
            found.append(thread)
    else:
        found = list(Thread.objects.raw(sql, params))
    if not found:
        raise NotFound("thread not found")
    # The UUID wins over an external_id that happens to spell another thread's UUID.
    found.sort(key=lambda t: t.pk != uid)
    return found[0]


@functools.cache
def _lock_sql_parts(alias: str) -> tuple[str, str, str, list[str]]:
    """The thread and event tables, the thread's column list and its fields' attnames, quoted
    for the connection `alias`: built once per process, not on every append (quoting 30
    columns cost a tenth of a one-event append's CPU)."""
    quote = connections[alias].ops.quote_name
    fields = Thread._meta.concrete_fields
    columns = ", ".join(f"t.{quote(cast(str, f.column))}" for f in fields)
    return (
        quote(Thread._meta.db_table),
        quote(Event._meta.db_table),
        columns,
        [f.attname for f in fields],
    )


def announce_after_commit(thread: Any, events: list[Event | dict[str, Any]]) -> None:
    """Run the append hooks (the fold triggers) for `events` once the caller's transaction
    commits: the agents' appends, and the events ctxadmin writes itself (a resolution or a
    decision is a structural trigger). `thread` is the thread as the append left it (head
    fields current as of the commit), so a hook need not read it again, or its id."""
    for hook in after_append_hooks:
        # robust: the events are committed by then; a failing hook (a fold trigger) is
        # logged, and never turns the successful append into an error.
        transaction.on_commit(
            lambda hook=hook: hook(thread, events),  # type: ignore[misc]
            robust=True,
        )


def _schedule_hooks(thread: Thread, appended: list[Appended]) -> None:
    new = [a.row.hook_view() if a.row is not None else a.event for a in appended if a.created]
    if new:
        announce_after_commit(thread, new)


def _batch_lookups(new_events: Sequence[NewEvent], existing: Mapping[Any, Event]) -> set[str]:
    """tool_call_ids whose open calls must be read from the log: those of results that no
    earlier new call in the same batch answers. Replays are skipped, as the append skips them."""
    open_here: dict[str, int] = {}
    seen: set[str] = set()
    lookups: set[str] = set()
    for new in new_events:
        client_id = new.client_event_id
        if client_id is not None:
            if client_id in existing or client_id in seen:
                continue
            seen.add(client_id)
        call_id: str = new.data.get("tool_call_id", "")
        if new.kind == "tool_call":
            open_here[call_id] = open_here.get(call_id, 0) + 1
        elif new.kind == "tool_result":
            if open_here.get(call_id):
                open_here[call_id] -= 1
            else:
                lookups.add(call_id)
    return lookups


def _append_locked(
    thread: Thread,
    new_events: Sequence[NewEvent],
    *,
    with_pks: bool = False,
    counts: TokenCounts | None = None,
    batch: bool | None = None,
    by_agent: bool = True,
) -> list[Appended]:
    """`counts`: the events' token counts, already being counted (in the right encoding or
    not: a wrong one is cancelled and counted again). `by_agent`: the agent's events, which
    mark the thread's agent_appended_at (run status); False for those ctxadmin writes."""
    key = thread_key(thread)
    if counts is None or counts.encoding != thread.encoding:
        if counts is not None:
            counts.cancel()
        counts = TokenCounts(new_events, thread.encoding)
    client_ids = {e.client_event_id for e in new_events if e.client_event_id is not None}
    existing = (
        {
            e.client_event_id: e
            for e in Event.objects.filter(thread=thread, client_event_id__in=client_ids)
        }
        if client_ids and _may_have_replays(thread)
        else {}
    )
    calls = _open_calls(thread, _batch_lookups(new_events, existing))
    open_calls, side_effect_calls, answered = calls.open, calls.side_effects, calls.answered
    # Calls of this batch that got a result in it: call seq -> that result's seq.
    # Kinds of the events retractions may name (the log's, then this batch's as they are
    # numbered) and who retracted what already.
    retractions = _retraction_lookups(thread, new_events)
    retracts = any(new.kind == RETRACTION for new in new_events)
    seq, head = thread.last_seq, thread.chain_head
    out: list[Appended] = []
    rows: list[NewRow] = []
    created: list[int] = []  # the indexes of new_events that are new
    seen_in_batch: dict[str, NewRow] = {}
    now = timezone.now()
    now_text = format_time(now)
    for index, new in enumerate(new_events):
        where = f"events[{index}]" if batch or (batch is None and len(new_events) > 1) else "event"
        if new.client_event_id is not None:
            original: Event | NewRow | None = existing.get(
                new.client_event_id
            ) or seen_in_batch.get(new.client_event_id)
            if original is not None:
                if original.request_digest != new.digest:
                    # An earlier event of this batch is numbered but not stored: no seq to name.
                    used = (
                        "earlier in this batch"
                        if isinstance(original, NewRow)
                        else f"by seq {original.seq}"
                    )
                    raise IdempotencyConflict(
                        f"client_event_id {new.client_event_id!r} was already used {used} "
                        "with another body",
                        fields={where: "client_event_id reused with a different body"},
                    )
                if isinstance(original, NewRow):  # earlier in this same batch
                    out.append(Appended(None, created=False, row=original))
                else:
                    out.append(Appended(original, created=False))
                continue
        seq += 1
        data, (data_texts, metadata_text) = new.data, new.texts()
        data_text = new.data_text if new.data_text is not None else join_canonical(data_texts)
        if new.kind == "tool_result":
            waiting = open_calls.get(data["tool_call_id"], [])
            if waiting:
                data = {**data, "call_seq": waiting.pop()}
                answered[data["tool_call_id"]] = (data["call_seq"], seq)
            elif data["tool_call_id"] in answered:
                # A second result for a call that has one: stored and flagged, never dropped;
                # the call's outcome stays its first result's (or a resolution's).
                call_seq, first = answered[data["tool_call_id"]]
                data = {**data, "call_seq": call_seq, DUPLICATE_OF: first}
                data_texts[DUPLICATE_OF] = str(first)
            else:
                raise NoOpenToolCall(
                    f"no tool call with tool_call_id {data['tool_call_id']!r} in this thread",
                    fields={where: "tool_call_id has no call"},
                )
            data_texts["call_seq"] = str(data["call_seq"])
            data_text = join_canonical(data_texts)
        elif new.kind == "tool_call":
            open_calls.setdefault(data["tool_call_id"], []).append(seq)
            if data.get("side_effect"):
                side_effect_calls.add(seq)
        elif new.kind == "annotation" and any(s >= seq for s in data.get("refers_to", [])):
            raise InvalidEvent(
                "refers_to names an event that does not exist yet",
                fields={where: f"refers_to must be below {seq}"},
            )
        elif new.kind == RETRACTION:
            target = data["retracts"]
            _check_retraction(target, seq, retractions, where)
            retractions.by_target[target] = seq
        if retracts:
            retractions.kinds[seq] = new.kind  # a later retraction in the batch may name it
            if new.kind == "tool_result":
                retractions.pair(data["call_seq"], seq)
        created_at = new.created_at or now
        chained = join_canonical(
            stored_members(
                seq=seq,
                kind=new.kind,
                created_at=now_text if new.created_at is None else format_time(created_at),
                client_event_id=new.client_event_id,
                metadata_text=metadata_text,
                data_texts=data_texts,
            )
        )
        head = chain.link_hash(head, chained.encode("utf-8"), key)
        row = NewRow(
            thread,
            seq,
            new.kind,
            created_at,
            new.client_event_id,
            new.metadata,
            data,
            # Only an event with a client_event_id is ever compared with a repeat of its
            # request (docs/event-log.md, "Idempotency and binding"); the others keep no digest, 65
            # bytes a row.
            new.digest if new.client_event_id is not None else "",
            head,
            metadata_text,
            data_text,
        )
        if new.kind == "tool_result":
            row.call_side_effect = data["call_seq"] in side_effect_calls
        rows.append(row)
        created.append(index)
        out.append(Appended(None, created=True, row=row, chained=chained))
        if new.client_event_id is not None:
            seen_in_batch[new.client_event_id] = row
    if not rows:
        return out
    token_counts = counts.result()
    for row, index in zip(rows, created, strict=True):
        row.token_count = token_counts[index]
    thread.last_seq, thread.chain_head = seq, head
    thread.token_total += sum(row.token_count for row in rows)
    if by_agent:
        # Under the lock `thread` is the row: the events ctxadmin writes keep its value.
        thread.agent_appended_at = now
    insert_events_and_head(
        thread,
        rows,
        now,
        texts=[(row.metadata_text, row.data_text) for row in rows],
        then=side_effect_and_approval_statements(thread, rows, side_effect_calls)
        + events_appended_statements(
            thread,
            (row.kind for row in rows),
            second_results=sum(DUPLICATE_OF in row.data for row in rows),
        ),
    )
    if with_pks:
        _assign_event_pks(thread, [a.event for a in out if a.created])
    return out


def _assign_event_pks(thread: Thread, events: list[Event]) -> None:
    """Read back the keys of just-inserted events, in one query, for rows that refer to them."""
    ids = dict(
        Event.objects.filter(
            thread=thread, seq__gte=events[0].seq, seq__lte=events[-1].seq
        ).values_list("seq", "id")
    )
    for event in events:
        event.pk = ids[event.seq]


def server_event_append(
    *, thread: Thread, kind: str, data: dict[str, Any], metadata: dict[str, Any] | None = None
) -> Event:
    """Append an event that ctxadmin writes itself (approval_decision, side_effect_resolution).

    Must run inside the caller's transaction, which holds the thread's lock.
    """
    new = NewEvent(kind=kind, data=data, metadata=metadata or {})
    return _append_locked(thread, [new], with_pks=True, by_agent=False)[0].event
