"""Where a value is stored anywhere in the database: every text, varchar, json/jsonb and
bytea/blob column of every table, found by introspecting the schema (information_schema on
PostgreSQL; sqlite_master and PRAGMA table_info on SQLite, the FTS5 shadow tables included),
zlib-compressed blobs (the LangGraph tables') searched decompressed too.

`secret_locations(connection, "AKIA...")` answers ["table.column", ...]: empty when the value is
nowhere. Case-insensitive (a search index keeps words lower-cased). A blob is also searched for
the value's last `tail` characters: an FTS5 segment stores a word after the prefix it shares with
the word before it.
"""

from __future__ import annotations

import zlib
from typing import Any

TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "bytea")


def secret_locations(connection: Any, secret: str, *, tail: int = 12) -> list[str]:
    needle = secret.lower()
    fragments = [needle.encode()]
    if 0 < tail < len(needle):
        fragments.append(needle[-tail:].encode())
    found: list[str] = []
    for table, column, kind in _columns(connection):
        quoted_table = connection.ops.quote_name(table)
        quoted_column = connection.ops.quote_name(column)
        with connection.cursor() as cursor:
            if kind == "text":
                cursor.execute(
                    f"SELECT COUNT(*) FROM {quoted_table} "
                    f"WHERE lower(CAST({quoted_column} AS TEXT)) LIKE %s",
                    [f"%{needle}%"],
                )
                if cursor.fetchone()[0]:
                    found.append(f"{table}.{column}")
                continue
            cursor.execute(
                f"SELECT {quoted_column} FROM {quoted_table} WHERE {quoted_column} IS NOT NULL"
            )
            if any(_holds(value, fragments) for (value,) in cursor.fetchall()):
                found.append(f"{table}.{column}")
    return found


def _holds(value: Any, fragments: list[bytes]) -> bool:
    if isinstance(value, memoryview):
        value = value.tobytes()
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    if not isinstance(value, bytes | bytearray):
        value = str(value).encode()
    texts = [bytes(value).lower()]
    try:
        texts.append(zlib.decompress(bytes(value)).lower())
    except zlib.error:
        pass
    return any(fragment in text for text in texts for fragment in fragments)


def _columns(connection: Any) -> list[tuple[str, str, str]]:
    """(table, column, "text" | "blob") of every column that can hold text or bytes."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND data_type = ANY(%s) "
                "AND table_name IN (SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')",
                [list(TEXT_TYPES)],
            )
            return [
                (table, column, "blob" if kind == "bytea" else "text")
                for table, column, kind in cursor.fetchall()
            ]
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
        tables = [name for name, sql in cursor.fetchall() if "VIRTUAL TABLE" not in (sql or "")]
        columns = []
        for table in tables:
            cursor.execute(f"PRAGMA table_info({connection.ops.quote_name(table)})")
            for _, column, declared, *_ in cursor.fetchall():
                kind = (declared or "").lower()
                if any(word in kind for word in ("int", "real", "bool", "date", "decimal")):
                    continue
                # Untyped (FTS5 shadow tables), blob or text: read every value as it is.
                columns.append((table, column, "blob"))
        return columns
