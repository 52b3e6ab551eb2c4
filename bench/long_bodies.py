"""Pages with long bodies: thirty events of 1 MiB each, cut to a preview and read as a prefix
from the database, next to the same pages reading every body whole from the database (before
bodies were read as prefixes) and carrying every body whole (before bodies were cut), in one
run.

    uv run python bench/long_bodies.py              # the embedded default: a fresh SQLite file
    uv run python bench/long_bodies.py --dsn postgres://user@host:5432/db
    uv run python bench/long_bodies.py --requests 5

One thread holds 14 user messages and 14 tool results of about 1 MiB each, a side-effecting
call whose arguments are 1 MiB and an approval request whose arguments are 1 MiB (30 long
bodies, 46 events), appended through the append service. Logged in as an operator (Django's
test client, the whole middleware stack), each page is requested `--requests` times in each
of three ways, the ways taking turns request by request: "prefix" (bodies cut at
BODY_SHOWN_CHARS, long body strings read as a prefix: what pages do), "read whole" (cut, but
every event's data read whole: threads/selectors/event_bodies.py's READ_PREFIX off) and
"whole" (the cut lifted too: every body in the page); then one event's body route. Reports the
bytes of HTML, the bytes of column values the page's queries fetched from the database (every
str in UTF-8, bytes as they are, 8 for any other value) and the median server time of each.
Writes bench/results/long_bodies.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pages import setup_django  # bench/ is the script's folder

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "long_bodies.json"
MIB = 1 << 20
BODY_CHARS = MIB - 512  # an event's JSON must fit in CTXADMIN_MAX_EVENT_BYTES (1 MiB)


def big_text(n: int) -> str:
    words = " ".join(f"e{n}w{i}" for i in range(BODY_CHARS // 4))
    return f"START-{n} " + words[: BODY_CHARS - 20] + f" END-{n}"


def seed() -> tuple[Any, Any]:
    from threads.domain.events import normalize_event
    from threads.services.events import event_append_batch
    from threads.services.threads import thread_get_or_create
    from threads.services.workspaces import member_add, workspace_create

    workspace, _ = workspace_create(name="bench")
    person = member_add(workspace=workspace, username="olga", role="operator", password="x" * 20)
    thread, _ = thread_get_or_create(
        workspace=workspace, external_id="long-bodies", context_window=100_000_000
    )

    def append(body: dict[str, Any]) -> None:
        event_append_batch(thread=thread, new_events=[normalize_event(body, max_bytes=MIB)])

    def call(call_id: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "kind": "tool_call",
            "tool_call_id": call_id,
            "tool_name": "t",
            "arguments": arguments,
            **extra,
        }

    for n in range(1, 29, 2):
        append({"kind": "message", "role": "user", "content": big_text(n)})
        append(call(f"c{n}", {"url": f"/{n}"}))
        append(
            {
                "kind": "tool_result",
                "tool_call_id": f"c{n}",
                "status": "succeeded",
                "result": big_text(n + 1),
            }
        )
    append(call("pay", {"blob": big_text(29)}, side_effect=True, idempotency_key="r-1"))
    append({"kind": "tool_result", "tool_call_id": "pay", "status": "timeout"})
    append({"kind": "approval_request", "action": "refund", "arguments": {"blob": big_text(30)}})
    thread.refresh_from_db()
    return thread, person


class FetchedBytes:
    """Counts the bytes of the column values that Django's cursors fetch: what a page reads
    from the database, whatever the driver."""

    def __init__(self) -> None:
        self.total = 0

    def install(self) -> None:
        from django.db.backends.utils import CursorWrapper

        counter = self

        def size(rows: Any) -> Any:
            for row in rows:
                for value in row:
                    if isinstance(value, str):
                        counter.total += len(value.encode("utf-8", "surrogatepass"))
                    elif isinstance(value, (bytes, bytearray, memoryview)):
                        counter.total += len(value)
                    else:
                        counter.total += 8
            return rows

        def fetchone(self: Any) -> Any:
            row = self.cursor.fetchone()
            return row if row is None else size([row])[0]

        def fetchmany(self: Any, *args: Any) -> Any:
            return size(self.cursor.fetchmany(*args))

        def fetchall(self: Any) -> Any:
            return size(self.cursor.fetchall())

        CursorWrapper.fetchone = fetchone  # type: ignore[attr-defined]
        CursorWrapper.fetchmany = fetchmany  # type: ignore[attr-defined]
        CursorWrapper.fetchall = fetchall  # type: ignore[attr-defined]


def one_request(client: Any, url: str, fetched: FetchedBytes) -> tuple[float, int, int]:
    """Seconds, bytes of HTML, bytes fetched from the database."""
    before = fetched.total
    started = time.perf_counter()
    response = client.get(url)
    seconds = time.perf_counter() - started
    assert response.status_code == 200, (url, response.status_code)
    return seconds, len(response.content), fetched.total - before


def summary(samples: list[tuple[float, int, int]]) -> dict[str, Any]:
    return {
        "bytes": samples[-1][1],
        "db_bytes": samples[-1][2],
        "median_ms": round(statistics.median(s[0] for s in samples) * 1000, 1),
    }


WAYS = ("prefix", "read whole", "whole")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL database to migrate and write into")
    parser.add_argument("--requests", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as var_dir:
        setup_django(args.dsn, var_dir)
        from django.test import Client

        from threads.selectors import event_bodies
        from threads.views import present

        thread, person = seed()
        fetched = FetchedBytes()
        fetched.install()
        client = Client()
        client.force_login(person)
        base = f"/threads/{thread.pk}/"
        pages = {
            "timeline": f"{base}?from=1",
            "context": f"{base}context/",
            "side effects": "/side-effects/",
            "approvals": "/approvals/",
            "one event": f"{base}events/1/",
        }
        cut_at = present.BODY_SHOWN_CHARS

        def way(name: str) -> None:
            """Pages as they are, reading bodies whole, or carrying them whole."""
            event_bodies.READ_PREFIX = name == "prefix"
            present.BODY_SHOWN_CHARS = 10**12 if name == "whole" else cut_at

        rows: dict[str, Any] = {}
        for label, url in pages.items():
            samples: dict[str, list[tuple[float, int, int]]] = {name: [] for name in WAYS}
            for _ in range(args.requests):
                for name in WAYS:
                    way(name)
                    samples[name].append(one_request(client, url, fetched))
            way("prefix")
            rows[label] = {name: summary(samples[name]) for name in WAYS}
        body = summary([one_request(client, f"{base}events/1/body/", fetched)])
    print(
        f"{'page':<14}{'page bytes':>12}{'db prefix':>12}{'db whole':>12}{'ms prefix':>11}"
        f"{'ms whole':>10}{'page whole':>13}{'ms':>8}"
    )
    for label, row in rows.items():
        cut, read, whole = row["prefix"], row["read whole"], row["whole"]
        print(
            f"{label:<14}{cut['bytes']:>12,}{cut['db_bytes']:>12,}{read['db_bytes']:>12,}"
            f"{cut['median_ms']:>11}{read['median_ms']:>10}{whole['bytes']:>13,}"
            f"{whole['median_ms']:>8}"
        )
    print(
        f"body route, one 1 MiB body: {body['bytes']:,} bytes in {body['median_ms']} ms "
        f"({body['db_bytes']:,} bytes from the database)"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    database = "postgresql" if args.dsn else "sqlite"
    RESULTS.write_text(
        json.dumps({"database": database, "pages": rows, "body_route": body}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
