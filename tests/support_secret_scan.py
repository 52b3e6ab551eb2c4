"""A scan of every text, varchar, JSON and binary column of every table of the test database for a
value: where does a secret still live? (docs/repairs.md, "Redaction beside the event").

The schema is introspected (information_schema on PostgreSQL, sqlite_master and PRAGMA
table_info on SQLite), so a table added later is scanned too. Binary values are searched as
they are, decompressed when they are zlib or gzip (the LangGraph tables hold zlib of JSON, an
upload may be gzipped), and
inside that JSON every string that is base64 of bytes is decoded and searched as well (packed
channel values and writes are base64 inside the compressed JSON).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from django.db import connection

TEXT_TYPES_PG = ("text", "character varying", "character", "json", "jsonb", "bytea")
TEXT_TYPES_SQLITE = ("text", "varchar", "char", "json", "blob", "clob", "")


def _columns() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.table_name, c.column_name FROM information_schema.columns c "
                "JOIN information_schema.tables t ON t.table_schema = c.table_schema "
                "AND t.table_name = c.table_name WHERE c.table_schema = current_schema() "
                "AND t.table_type = 'BASE TABLE' AND c.data_type = ANY(%s) "
                "ORDER BY c.table_name, c.ordinal_position",
                [list(TEXT_TYPES_PG)],
            )
            return [(str(t), str(c)) for t, c in cursor.fetchall()]
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        tables = [str(row[0]) for row in cursor.fetchall()]
        found = []
        for table in tables:
            cursor.execute(f'PRAGMA table_info("{table}")')
            for _, name, declared, *_ in cursor.fetchall():
                kind = str(declared).lower().split("(")[0].strip()
                if any(kind.startswith(t) for t in TEXT_TYPES_SQLITE if t) or kind == "":
                    found.append((table, str(name)))
        return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *_strings(v))]
    return []


def _blob_texts(data: bytes) -> list[bytes]:
    """The bytes to search in a binary value: itself, its zlib decompression, and the base64
    strings inside that (when it is JSON), decoded."""
    texts = [data]
    try:
        # wbits 47: zlib or gzip, by the header (an upload may be gzipped).
        inflated = zlib.decompress(data, 47)
    except zlib.error:
        return texts
    texts.append(inflated)
    try:
        loaded = json.loads(inflated)
    except ValueError:
        return texts
    for text in _strings(loaded):
        if len(text) >= 8 and len(text) % 4 == 0:
            try:
                texts.append(base64.b64decode(text, validate=True))
            except (binascii.Error, ValueError):
                continue
    return texts


def _holds(value: Any, needle: str) -> bool:
    if value is None:
        return False
    if isinstance(value, memoryview | bytes | bytearray):
        spellings = {
            spelled.encode("utf-8")
            for spelled in (
                needle,
                json.dumps(needle)[1:-1],
                json.dumps(needle, ensure_ascii=False)[1:-1],
            )
        }
        return any(s in text for text in _blob_texts(bytes(value)) for s in spellings)
    if isinstance(value, dict | list):
        return any(needle in text for text in _strings(value))
    text = value if isinstance(value, str) else str(value)
    # JSON text escapes what is not ASCII on some paths: search the escaped form as well.
    return needle in text or json.dumps(needle)[1:-1] in text


def find_everywhere(value: str, *, skip_tables: Any = ()) -> list[tuple[str, str, int]]:
    """(table, column, rows holding `value`) of every column of the schema that holds it,
    except the tables named in `skip_tables`."""
    skipped = set(skip_tables)
    found = []
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table, column in _columns():
            if table in skipped:
                continue
            cursor.execute(f"SELECT {quote(column)} FROM {quote(table)}")
            rows = sum(1 for (cell,) in cursor.fetchall() if _holds(cell, value))
            if rows:
                found.append((table, column, rows))
    return found


def sqlite_search_tables() -> list[str]:
    """The SQLite FTS5 message-search table and its shadow tables (none on PostgreSQL, whose
    index follows the event row): the event's own search index."""
    if connection.vendor != "sqlite":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name LIKE 'threads_event_search%'"
        )
        return [str(row[0]) for row in cursor.fetchall()]


def secret_locations(connection_: Any, secret: str, *, tail: int = 12) -> list[str]:
    """`table.column` of every column holding `secret`, in any case, or its last `tail`
    characters (a copy cut short still leaks the key). `connection_`: the default one, named
    for the callers that pass it."""
    assert connection_ is connection
    fragments = {secret, secret.lower(), secret.upper()}
    if 0 < tail < len(secret):
        fragments |= {secret[-tail:], secret[-tail:].lower()}
    return sorted(
        {
            f"{table}.{column}"
            for fragment in fragments
            for table, column, _ in find_everywhere(fragment)
        }
    )
