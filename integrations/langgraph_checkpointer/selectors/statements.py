"""The reads every LangGraph restore (`get_tuple`, `list`) runs, as prepared SQL on PostgreSQL.

A restore reads its checkpoint with its thread, the channel versions it names, its pending writes,
the message index and the events carrying its messages. The ORM compiled those querysets again on
every request and adapted every seq as a parameter of its own, then decoded each event's JSON
columns with `json.loads`; here each is one statement built once per process (sent as
threads.selectors.statements does), its lists as array parameters, and the message parts decoded by
orjson with the standard library's values (threads.domain.json_text). The selectors in
integrations.langgraph_checkpointer.selectors.checkpoints call these on PostgreSQL and keep the
ORM's querysets on SQLite; the answers are the same (tests/langgraph/test_restore.py)."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from typing import Any

from integrations.langgraph_checkpointer.domain.messages import METADATA_KEY, message_from_parts
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphMessage,
    LanggraphWrite,
)
from threads.domain.json_text import json_loads
from threads.models import Event, EventKind, SideEffect, Thread, Workspace
from threads.selectors.statements import model_from_row, rows_read, select_list, table_name


@functools.cache
def _find_sql(alias: str, by_id: bool) -> tuple[str, int]:
    checkpoint_columns = select_list(alias, LanggraphCheckpoint, "c")
    thread_columns = select_list(alias, Thread, "t")
    writes = table_name(alias, LanggraphWrite)
    effects = table_name(alias, SideEffect)
    # What a conditional read's validator needs beyond the two rows, in the same statement
    # (checkpoints.langgraph_tuple_validator): the task rows of writes after the checkpoint, by
    # content, and the thread's side effects (how many, the last change).
    stamps = (
        "(SELECT coalesce(string_agg(w.id || ':' || md5(w.writes_z), ',' ORDER BY w.id), '') "
        f"FROM {writes} w WHERE w.thread_id = c.thread_id "
        "AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id), "
        "(SELECT count(*) || ':' || coalesce("
        "(extract(epoch FROM max(s.updated_at)) * 1000000)::bigint::text, '') "
        f"FROM {effects} s WHERE s.thread_id = c.thread_id)"
    )
    checkpoints, threads = table_name(alias, LanggraphCheckpoint), table_name(alias, Thread)
    # The thread's id first, as a value (a scalar subquery), so the checkpoint is read from
    # the end of lg_checkpoint_unique (thread, namespace, checkpoint_id: unique, no tiebreak
    # needed) instead of sorting every checkpoint of the thread, as a join to the thread would
    # (a nested loop's rows keep only its outer side's order).
    sql = (
        f"SELECT {checkpoint_columns}, {thread_columns}, {stamps} "
        f"FROM (SELECT * FROM {checkpoints} WHERE thread_id = (SELECT id FROM {threads} "
        "WHERE workspace_id = %s AND external_id = %s) AND checkpoint_ns = %s "
        + ("AND checkpoint_id = %s " if by_id else "")
        + f"ORDER BY checkpoint_id DESC LIMIT 1) c JOIN {threads} t ON t.id = c.thread_id"
    )
    return sql, len(LanggraphCheckpoint._meta.concrete_fields)


def checkpoint_find(
    connection: Any,
    workspace: Workspace,
    external_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
) -> LanggraphCheckpoint | None:
    """integrations.langgraph_checkpointer.selectors.checkpoints.langgraph_checkpoint_find as one
    prepared statement: the
    checkpoint with its thread (and the thread's workspace, the one given), and the stamps of
    its validator (`validator_stamps`)."""
    sql, split = _find_sql(connection.alias, checkpoint_id is not None)
    params: list[Any] = [workspace.pk, external_id, checkpoint_ns]
    if checkpoint_id is not None:
        params.append(checkpoint_id)
    rows = rows_read(connection, sql, params)
    if not rows:
        return None
    row = model_from_row(connection, LanggraphCheckpoint, rows[0][:split])
    thread = model_from_row(connection, Thread, rows[0][split:-2])
    row.validator_stamps = (str(rows[0][-2]), str(rows[0][-1]))  # type: ignore[attr-defined]
    Thread.workspace.field.set_cached_value(thread, workspace)
    LanggraphCheckpoint.thread.field.set_cached_value(row, thread)
    return row


@functools.cache
def _versions_sql(alias: str) -> tuple[str, int]:
    version_columns = select_list(alias, LanggraphChannelVersion, "v")
    content_columns = select_list(alias, LanggraphContent, "c")
    sql = (
        f"SELECT {version_columns}, {content_columns} "
        f"FROM {table_name(alias, LanggraphChannelVersion)} v "
        f"LEFT JOIN {table_name(alias, LanggraphContent)} c ON c.sha256 = v.content_id "
        "WHERE v.thread_id = %s AND (v.checkpoint_ns, v.channel, v.version) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))"
    )
    return sql, len(LanggraphChannelVersion._meta.concrete_fields)


def versions_with_content(
    connection: Any, thread: Thread, wanted: Mapping[tuple[str, str], Collection[str]]
) -> dict[tuple[str, str, str], LanggraphChannelVersion]:
    """(namespace, channel, version) -> the thread's stored version, with its content row:
    the versions query of integrations.langgraph_checkpointer.selectors.checkpoints as one prepared
    statement."""
    keys = [(ns, channel, v) for (ns, channel), versions in wanted.items() for v in versions]
    sql, split = _versions_sql(connection.alias)
    params = (thread.pk, [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys])
    found: dict[tuple[str, str, str], LanggraphChannelVersion] = {}
    for values in rows_read(connection, sql, params):
        version = model_from_row(connection, LanggraphChannelVersion, values[:split])
        content = (
            None
            if values[split] is None
            else model_from_row(connection, LanggraphContent, values[split:])
        )
        LanggraphChannelVersion.content.field.set_cached_value(version, content)
        LanggraphChannelVersion.thread.field.set_cached_value(version, thread)
        found[(version.checkpoint_ns, version.channel, version.version)] = version
    return found


@functools.cache
def _writes_sql(alias: str) -> str:
    columns = select_list(alias, LanggraphWrite, "w")
    return (
        f"SELECT {columns} FROM {table_name(alias, LanggraphWrite)} w "
        "WHERE w.thread_id = %s AND w.checkpoint_ns = ANY(%s::text[]) "
        "AND w.checkpoint_id = ANY(%s::text[])"
    )


def task_writes_rows(
    connection: Any, thread: Thread, namespaces: Collection[str], checkpoint_ids: Collection[str]
) -> list[LanggraphWrite]:
    """The thread's rows of writes that came before their checkpoint, for these namespaces and
    checkpoint ids, in one prepared statement."""
    rows = rows_read(
        connection,
        _writes_sql(connection.alias),
        (thread.pk, sorted(namespaces), sorted(checkpoint_ids)),
    )
    return [model_from_row(connection, LanggraphWrite, values) for values in rows]


@functools.cache
def _index_sql(alias: str) -> str:
    return (
        f"SELECT m.seq, m.last_seq FROM {table_name(alias, LanggraphMessage)} m "
        "WHERE m.thread_id = %s AND m.last_seq <= %s ORDER BY m.seq"
    )


def message_index_until(connection: Any, thread: Thread, until: int) -> list[tuple[int, int]]:
    """(seq, last_seq) of the thread's mirrored messages that end at or before `until`, in log
    order, in one prepared statement."""
    rows = rows_read(connection, _index_sql(connection.alias), (thread.pk, until))
    return [(int(seq), int(last)) for seq, last in rows]


@functools.cache
def _forms_sql(alias: str) -> str:
    # The seqs joined as rows (unnest), not tested with `e.seq = ANY(array)`: PostgreSQL
    # filters each of the thread's rows against the whole array, which for a restore's few
    # hundred seqs cost more than reading their JSON (docs/benchmarks.md, "Issue #26's rounds").
    # The content is taken out of `data` once (the lateral subquery, kept from being inlined
    # by OFFSET 0: each mention of `e.data` decompresses it again) and a string is answered as
    # its text (`#>> '{}'`), not as JSON text: writing a long string out as JSON, escaped, was
    # half of the statement's time, and the text needs no parsing here.
    return (
        "SELECT e.seq, x.content #>> '{}', jsonb_typeof(x.content), (e.metadata -> %s)::text "
        f"FROM unnest(%s::bigint[]) AS s(seq) JOIN {table_name(alias, Event)} e "
        "ON e.seq = s.seq CROSS JOIN LATERAL (SELECT CASE WHEN e.kind = %s "
        "THEN e.data -> 'result' ELSE e.data -> 'content' END AS content OFFSET 0) x "
        "WHERE e.thread_id = %s"
    )


def forms_at(connection: Any, thread: Thread, seqs: Collection[int]) -> dict[int, dict[str, Any]]:
    """seq -> the JSON form of the message its event carries, in one prepared statement with
    the seqs as one array (not one parameter each), reading only the two JSON parts the form
    is made of: a string content as text, any other as JSON decoded by orjson; value for value
    the forms of the ORM's read. A redacted event's seq is left out."""
    rows = rows_read(
        connection,
        _forms_sql(connection.alias),
        (METADATA_KEY, sorted(seqs), EventKind.TOOL_RESULT.value, thread.pk),
    )
    forms: dict[int, dict[str, Any]] = {}
    for seq, text, json_type, stored in rows:
        if stored is None:
            continue  # a redacted event: no form to read (selectors.redacted rebuilds it)
        content = text if json_type == "string" or text is None else json_loads(text)
        forms[int(seq)] = message_from_parts(json_loads(stored), content)
    return forms
