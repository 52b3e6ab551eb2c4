"""What an append checks a batch against, read under the thread's lock
(threads.services.events): the open calls a tool_result binds to, and what a retraction may
name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connections, router

from threads.domain.errors import InvalidRetraction
from threads.domain.events import NewEvent
from threads.domain.markers import RETRACTABLE_KINDS, RETRACTION
from threads.models import TOOL_CALL_INDEXED, TOOL_CALL_INDEXED_SQL, Event, EventKind, Thread
from threads.selectors.events import retractions_by_target
from threads.selectors.statements import equal_or_any, rows_read


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
    """_open_calls' rows on PostgreSQL, as one prepared statement: a tool result's append runs
    it, and compiling the ORM's query with its two JSON key transforms cost more CPU than the
    rest of a one-event append's reads.

    The kinds are written into the statement and the ids spelled out (equal_or_any): as array
    parameters, the server planned the statement again on every append (100 µs of its CPU, six
    times the read itself)."""
    table = connection.ops.quote_name(Event._meta.db_table)
    ids, id_params = equal_or_any(tool_call_ids, "text")
    sql = (
        "SELECT kind, seq, tool_call_id, (data->>'call_seq')::bigint, "
        f"COALESCE(data->'side_effect' = 'true'::jsonb, false) FROM {table} "
        f"WHERE thread_id = %s AND tool_call_id {ids} "
        f"AND kind IN ('{EventKind.TOOL_CALL.value}', '{EventKind.TOOL_RESULT.value}') "
        f"AND {TOOL_CALL_INDEXED_SQL}"
    )
    # _open_calls sorts them
    return cast(Any, rows_read(connection, sql, (thread.pk, *id_params)))


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
