"""Message search at 1,000,000 events: search p95 through the product's selector, and batch
ingest through the API with the search index vs without it.

    uv run python bench/search.py                 # PostgreSQL (a throwaway 15 cluster) and SQLite
    uv run python bench/search.py --postgres      # only PostgreSQL
    uv run python bench/search.py --sqlite        # only SQLite (a fresh file)
    uv run python bench/search.py --events 200000 --no-docs   # a smaller, quicker run

Building (not measured). The 200 real conversations of tests/data/ (tau-bench GPT-4o airline,
~5,200 events: user and assistant messages, tool calls with their arguments, tool results) are
posted once through the API into a template thread, so their stored form, token counts and
bindings are real. Then they are copied, conversation by conversation, one thread per copy,
until the database holds `--events` events: every word that holds a digit (reservation codes,
user ids, flight numbers, amounts in text) gets a suffix naming the copy, so ids stay rare while
ordinary words keep their frequency. The copies go in with the bulk path (COPY on PostgreSQL,
executemany on SQLite) with the search index dropped, and the index is then built over
everything with the migration's own SQL (`threads/database/search_index.py`: CREATE INDEX;
FTS5 backfill and triggers), as `0013_event_search` does for existing data; PostgreSQL is then
VACUUM ANALYZEd. Copied events keep their template's hash: their chains do not verify, which search
does not read.

Search. Query words are drawn from the corpus by how many events hold them: five bands of
document frequency (≥ 20 %, 5–20 %, 1–5 %, 0.1–1 %, < 0.1 %), ten words each, plus five ids of
one copy (a handful of events), five words no event holds and five two-word queries: 65 queries.
Each runs once to warm up, then `--repeat` times, through `threads.selectors.events_search`
with the dashboard's page size (21 rows: a page and the look-ahead), in the one workspace that
holds all the events: the scoping filter keeps every hit, the most work it can cause. Reports
p50 / p95 / max per band and overall against the floor (p95 ≤ 50 ms).

Ingest. After search, the database is copied (PostgreSQL: CREATE DATABASE … TEMPLATE; SQLite:
the file) and the copy's search index is dropped (the GIN index; the FTS5 triggers and table).
Two worker processes, one per database, post the same conversations through the API (Django's
test client: middleware, API-key auth, validation, hashing, tokens, the insert), 500 events
per request, each round to a new thread; requests alternate between the two in ABBA order so
both share whatever else the machine does. Reports events/s of each (median over rounds) and
the ratio with/without (floor ≥ 0.9×).

Prints a table, writes bench/results/search.json and the table into docs/benchmarks.md
(section "Message search").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pages import setup_django  # noqa: E402 - bench/ is the script's folder

RESULTS = ROOT / "bench" / "results" / "search.json"
DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Message search — `bench/search.py`"
FLOOR_P95_MS = 50.0
FLOOR_INGEST = 0.9
PAGE = 21  # threads.views.threads.HITS_PER_PAGE + 1
BATCH = 500
BANDS = (
    ("≥ 20 %", 0.20, 1.01),
    ("5–20 %", 0.05, 0.20),
    ("1–5 %", 0.01, 0.05),
    ("0.1–1 %", 0.001, 0.01),
    ("< 0.1 %", 0.0, 0.001),
)
ABSENT = ("zeppelin", "quokka", "marzipan", "okapi", "theremin")
_DIGIT_WORD = re.compile(r"\b(?=[A-Za-z]*\d)[A-Za-z0-9]{3,}\b")
_WORD = re.compile(r"[^\W_]+")


# --- Workers (one Django process per database) -------------------------------------------------


def _mutate(value: Any, tag: str) -> Any:
    """The value with every digit-holding word of its strings suffixed by `tag`."""
    if isinstance(value, str):
        return _DIGIT_WORD.sub(lambda m: m.group(0) + tag, value) if tag else value
    if isinstance(value, dict):
        return {k: _mutate(v, tag) for k, v in value.items()}
    if isinstance(value, list):
        return [_mutate(v, tag) for v in value]
    return value


def _tag(copy: int) -> str:
    digits = "abcdefghijklmnopqrstuvwxyz"
    out = ""
    n = copy
    while True:
        out = digits[n % 26] + out
        n //= 26
        if not n:
            break
    return "x" + out if copy else ""


def _post(client: Any, thread: Any, events: list[dict[str, Any]]) -> None:
    body = json.dumps({"events": events}).encode()
    response = client.post(
        f"/api/v1/threads/{thread.pk}/events/", data=body, content_type="application/json"
    )
    if response.status_code != 201:
        raise SystemExit(f"ingest refused: {response.status_code} {response.content[:300]!r}")


def worker_build(total: int) -> dict[str, Any]:
    """Template through the API, copies through the bulk path, then the index."""
    from django.db import connection, transaction
    from django.test import Client
    from ingest import tau_events

    from threads.database import search_index as searchindex
    from threads.domain.canonical import canonical_text
    from threads.models import Event, Thread
    from threads.services.event_rows import EVENT_COLUMNS
    from threads.services.threads import thread_get_or_create
    from threads.services.workspaces import workspace_create

    workspace, key = workspace_create(name="bench-search")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    template = thread_get_or_create(workspace=workspace, external_id="template")[0]
    events = tau_events()
    for first in range(0, len(events), BATCH):
        _post(client, template, events[first : first + BATCH])
    rows = list(Event.objects.filter(thread=template).order_by("seq"))
    conversations: list[list[Event]] = []
    for row in rows:
        if not conversations or row.metadata.get("trace_id") != (
            conversations[-1][0].metadata.get("trace_id")
        ):
            conversations.append([])
        conversations[-1].append(row)

    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute(searchindex.POSTGRES_DROP_INDEX)
        else:
            for statement in searchindex.SQLITE_REVERSE:
                cursor.execute(statement)
    started = time.monotonic()
    built, copy = len(rows), 1
    adapt_time = connection.ops.adapt_datetimefield_value
    quote = connection.ops.quote_name
    columns = ", ".join(quote(c) for c in EVENT_COLUMNS)
    insert = (
        f"INSERT INTO threads_event ({columns}) VALUES ({', '.join(['%s'] * len(EVENT_COLUMNS))})"
    )
    while built < total:
        tag = _tag(copy)
        threads, params = [], []
        for number, conversation in enumerate(conversations):
            if built >= total:
                break
            take = conversation[: total - built]
            thread = Thread(
                workspace=workspace,
                external_id=f"copy-{copy}-{number}",
                title=f"Airline conversation {number} ({tag})",
                last_seq=len(take),
                chain_head=take[-1].hash,
                token_total=sum(e.token_count for e in take),
            )
            threads.append(thread)
            thread_id = thread.pk if postgres else thread.pk.hex
            for e in take:
                params.append(
                    (
                        thread_id,
                        e.seq - conversation[0].seq + 1,
                        e.kind,
                        e.created_at if postgres else adapt_time(e.created_at),
                        None,
                        canonical_text(e.metadata),
                        canonical_text(_mutate(e.data, tag)),
                        e.role,
                        e.tool_call_id,
                        e.request_digest,
                        e.token_count,
                        e.hash,
                        None if e.secrets is None else canonical_text(e.secrets),
                    )
                )
            built += len(take)
        with transaction.atomic():
            Thread.objects.bulk_create(threads, batch_size=1000)
            if postgres:
                with connection.connection.cursor() as pg:
                    with pg.copy(f"COPY threads_event ({columns}) FROM STDIN") as stream:
                        for values in params:
                            stream.write_row(values)
            else:
                with connection.cursor() as cursor:
                    cursor.executemany(insert, params)
        copy += 1
        print(f"  built {built:,} events", file=sys.stderr, flush=True)
    load_seconds = time.monotonic() - started
    started = time.monotonic()
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute("SET maintenance_work_mem = '512MB'")
            cursor.execute(searchindex.POSTGRES_SQL)
        else:
            for statement in searchindex.SQLITE_SQL:
                cursor.execute(statement)
    index_seconds = time.monotonic() - started
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute("VACUUM ANALYZE")
            cursor.execute(
                "SELECT pg_size_pretty(pg_relation_size('threads_event_search')) || ' GIN, '"
                " || pg_size_pretty(pg_table_size('threads_event')) || ' events table'"
            )
            index_size = cursor.fetchone()[0]
        else:
            cursor.execute("ANALYZE")
            cursor.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'threads_event_search%'")
            index_size = f"{cursor.fetchone()[0] / 2**20:,.0f} MB FTS5"
    return {
        "events": Event.objects.count(),
        "threads": Thread.objects.count(),
        "copies": copy - 1,
        "workspace": workspace.pk,
        "load_seconds": round(load_seconds, 1),
        "index_seconds": round(index_seconds, 1),
        "index_size": index_size,
        "template_texts": [_search_text(e) for e in rows],
    }


def _search_text(event: Any) -> str:
    data = event.data
    parts: list[Any] = []
    if event.kind == "message":
        parts = [data.get("content")]
    elif event.kind == "tool_call":
        parts = [data.get("tool_name"), data.get("arguments")]
    elif event.kind == "tool_result":
        parts = [data.get("result")]
    return " ".join(p if isinstance(p, str) else json.dumps(p) for p in parts if p is not None)


def worker_search(workspace: int, queries: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    from threads.selectors import events_search

    for query in queries:  # warm-up: plans, caches, the index's pages
        events_search(workspace_ids=[workspace], q=query["q"], limit=PAGE)
    for query in queries:
        query["ms"] = []
        for _ in range(repeat):
            started = time.perf_counter()
            hits = events_search(workspace_ids=[workspace], q=query["q"], limit=PAGE)
            query["ms"].append((time.perf_counter() - started) * 1000)
        query["hits"] = len(hits)
    return {"queries": queries}


def worker_ingest() -> None:
    """Post batches on command: a line "round" starts new threads, "post N" posts batch N of
    the conversations through the API, then inserts the rows it stored again, raw, into
    another thread (the database's own cost of the same rows, index maintenance included),
    and answers both times."""
    from django.db import connection, transaction
    from django.test import Client
    from ingest import tau_events

    from threads.models import Event
    from threads.services.event_rows import EVENT_COLUMNS
    from threads.services.threads import thread_get_or_create
    from threads.services.workspaces import workspace_create

    workspace, key = workspace_create(name=f"ingest-{secrets.token_hex(3)}")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    events = tau_events()
    batches = [events[i : i + BATCH] for i in range(0, len(events), BATCH)]
    thread = raw_thread = None
    rounds = 0
    postgres = connection.vendor == "postgresql"
    columns = ", ".join(connection.ops.quote_name(c) for c in EVENT_COLUMNS)
    insert = (
        f"INSERT INTO threads_event ({columns}) VALUES ({', '.join(['%s'] * len(EVENT_COLUMNS))})"
    )
    print(json.dumps({"batches": len(batches), "events": len(events)}), flush=True)
    for line in sys.stdin:
        command = line.split()
        if command[0] == "round":
            rounds += 1
            thread = thread_get_or_create(workspace=workspace, external_id=f"round-{rounds}")[0]
            raw_thread = thread_get_or_create(workspace=workspace, external_id=f"raw-{rounds}")[0]
            print("{}", flush=True)
        elif command[0] == "post":
            assert thread is not None and raw_thread is not None
            batch = batches[int(command[1])]
            started = time.perf_counter()
            _post(client, thread, batch)
            api_seconds = time.perf_counter() - started
            stored = list(Event.objects.filter(thread=thread).order_by("-seq")[: len(batch)][::-1])
            raw_id = raw_thread.pk if postgres else raw_thread.pk.hex
            rows = [
                (
                    raw_id,
                    e.seq,
                    e.kind,
                    e.created_at
                    if postgres
                    else connection.ops.adapt_datetimefield_value(e.created_at),
                    e.client_event_id,
                    json.dumps(e.metadata),
                    json.dumps(e.data),
                    e.role,
                    e.tool_call_id,
                    e.request_digest,
                    e.token_count,
                    e.hash,
                    None if e.secrets is None else json.dumps(e.secrets),
                )
                for e in stored
            ]
            started = time.perf_counter()
            with transaction.atomic():
                if postgres:
                    with connection.connection.cursor() as pg:
                        with pg.copy(f"COPY threads_event ({columns}) FROM STDIN") as stream:
                            for row in rows:
                                stream.write_row(row)
                else:
                    with connection.cursor() as cursor:
                        cursor.executemany(insert, rows)
            raw_seconds = time.perf_counter() - started
            print(
                json.dumps({"seconds": api_seconds, "raw": raw_seconds, "events": len(batch)}),
                flush=True,
            )
        else:
            break


def worker_main(args: argparse.Namespace) -> None:
    setup_django(args.dsn or None, args.var_dir)
    if args.worker == "build":
        out = worker_build(args.events)
    elif args.worker == "search":
        spec = json.loads(Path(args.spec).read_text())
        out = worker_search(spec["workspace"], spec["queries"], args.repeat)
    else:
        worker_ingest()
        return
    Path(args.out).write_text(json.dumps(out))


# --- Orchestration -----------------------------------------------------------------------------


def _worker(kind: str, dsn: str | None, var_dir: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        kind,
        "--var-dir",
        var_dir,
        *(["--dsn", dsn] if dsn else []),
        *extra,
    ]


def choose_queries(texts: list[str], copies: int) -> list[dict[str, Any]]:
    """Words by the share of events that hold them (measured on the template: copies keep the
    share of every word without a digit)."""
    rng = random.Random(20261201)
    frequency: Counter[str] = Counter()
    ids: set[str] = set()
    for text in texts:
        words = {w for w in _WORD.findall(text.lower()) if len(w) >= 3}
        frequency.update(w for w in words if not any(c.isdigit() for c in w))
        ids.update(w for w in words if any(c.isdigit() for c in w) and w.isalnum())
    total = len(texts)
    queries: list[dict[str, Any]] = []
    for band, low, high in BANDS:
        in_band = sorted(w for w, n in frequency.items() if low <= n / total < high)
        for word in rng.sample(in_band, min(10, len(in_band))):
            queries.append({"band": band, "q": word, "share": frequency[word] / total})
    for word in rng.sample(sorted(ids), 5):
        # One copy's id: the suffix _mutate gave it in a copy in the middle.
        queries.append({"band": "one copy's id", "q": word + _tag(copies // 2), "share": None})
    for word in ABSENT:
        queries.append({"band": "absent", "q": word, "share": 0.0})
    common = [q["q"] for q in queries if q["band"] in ("5–20 %", "1–5 %")]
    for _ in range(5):
        a, b = rng.sample(common, 2)
        queries.append({"band": "two words", "q": f"{a} {b}", "share": None})
    return queries


def ingest_compare(with_index: list[str], without_index: list[str], rounds: int) -> dict[str, Any]:
    """The two ingest workers, requests in ABBA order."""
    procs = {
        "with": subprocess.Popen(
            with_index, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        ),
        "without": subprocess.Popen(
            without_index, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        ),
    }

    def ask(side: str, line: str) -> dict[str, Any]:
        proc = procs[side]
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    hello = {}
    for side, proc in procs.items():
        assert proc.stdout is not None
        hello[side] = json.loads(proc.stdout.readline())
    batches = hello["with"]["batches"]
    rates: dict[str, list[float]] = {"with": [], "without": []}
    raw_rates: dict[str, list[float]] = {"with": [], "without": []}
    try:
        for number in range(rounds + 1):  # round 0 warms up
            seconds = {"with": 0.0, "without": 0.0}
            raw = {"with": 0.0, "without": 0.0}
            events = {"with": 0, "without": 0}
            for side in procs:
                ask(side, "round")
            for batch in range(batches):
                order = ("with", "without") if (batch + number) % 2 == 0 else ("without", "with")
                for side in order:
                    answer = ask(side, f"post {batch}")
                    seconds[side] += answer["seconds"]
                    raw[side] += answer["raw"]
                    events[side] += answer["events"]
            if number:
                for side in procs:
                    rates[side].append(events[side] / seconds[side])
                    raw_rates[side].append(events[side] / raw[side])
            print(
                f"  ingest round {number}: with {events['with'] / seconds['with']:,.0f} ev/s, "
                f"without {events['without'] / seconds['without']:,.0f} ev/s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.write("quit\n")
            proc.stdin.close()
            proc.wait(timeout=60)
    with_rate = statistics.median(rates["with"])
    without_rate = statistics.median(rates["without"])
    raw_with, raw_without = (
        statistics.median(raw_rates["with"]),
        statistics.median(raw_rates["without"]),
    )
    return {
        "events_per_round": hello["with"]["events"],
        "rounds": rounds,
        "with_index": round(with_rate),
        "without_index": round(without_rate),
        "ratio": round(with_rate / without_rate, 3),
        "raw_with_index": round(raw_with),
        "raw_without_index": round(raw_without),
        "raw_ratio": round(raw_with / raw_without, 3),
        # The API's time per event beyond the raw insert, which the index does not change.
        "api_overhead_us": round((1 / without_rate - 1 / raw_without) * 1e6, 1),
        "index_us": round((1 / raw_with - 1 / raw_without) * 1e6, 1),
    }


def _summary(queries: list[dict[str, Any]]) -> dict[str, Any]:
    def stats(ms: list[float]) -> dict[str, float]:
        ms = sorted(ms)
        return {
            "n": len(ms),
            "p50": round(statistics.median(ms), 2),
            "p95": round(ms[max(0, int(round(0.95 * len(ms))) - 1)], 2),
            "max": round(ms[-1], 2),
        }

    bands: dict[str, list[float]] = {}
    for query in queries:
        bands.setdefault(query["band"], []).extend(query["ms"])
    slowest = max(queries, key=lambda q: max(q["ms"]))
    return {
        "overall": stats([m for q in queries for m in q["ms"]]),
        "bands": {band: stats(ms) for band, ms in bands.items()},
        "slowest": {"q": slowest["q"], "band": slowest["band"], "ms": round(max(slowest["ms"]), 2)},
    }


def run_database(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    var_a, var_b = work / f"{name}-a", work / f"{name}-b"
    var_a.mkdir()
    var_b.mkdir()
    with database(name) as (dsn_a, copy_to_b):
        build_out = work / f"{name}-build.json"
        print(f"{name}: building {args.events:,} events", file=sys.stderr, flush=True)
        subprocess.run(
            _worker(
                "build", dsn_a, str(var_a), "--events", str(args.events), "--out", str(build_out)
            ),
            check=True,
        )
        build = json.loads(build_out.read_text())
        queries = choose_queries(build.pop("template_texts"), build["copies"])
        spec = work / f"{name}-spec.json"
        spec.write_text(json.dumps({"workspace": build["workspace"], "queries": queries}))
        search_out = work / f"{name}-search.json"
        print(f"{name}: {len(queries)} queries × {args.repeat}", file=sys.stderr, flush=True)
        subprocess.run(
            _worker(
                "search",
                dsn_a,
                str(var_a),
                "--spec",
                str(spec),
                "--repeat",
                str(args.repeat),
                "--out",
                str(search_out),
            ),
            check=True,
        )
        searched = json.loads(search_out.read_text())["queries"]
        summary = _summary(searched)
        print(f"{name}: search {summary['overall']}", file=sys.stderr, flush=True)
        version = _version(name, dsn_a)
        dsn_b = copy_to_b(var_a, var_b)
        print(f"{name}: ingest with vs without the index", file=sys.stderr, flush=True)
        ingest = ingest_compare(
            _worker("ingest", dsn_a, str(var_a)), _worker("ingest", dsn_b, str(var_b)), args.rounds
        )
    return {
        "database": name,
        "version": version,
        "build": build,
        "search": summary,
        "queries": [
            {k: (round(v, 5) if isinstance(v, float) else v) for k, v in q.items() if k != "ms"}
            | {"p95_ms": round(sorted(q["ms"])[-1], 2)}
            for q in searched
        ],
        "ingest": ingest,
    }


def _version(name: str, dsn: str | None) -> str:
    if name == "sqlite":
        return f"SQLite {sqlite3.sqlite_version}"
    import psycopg

    with psycopg.connect(dsn) as conn:  # type: ignore[arg-type]
        return "PostgreSQL " + conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]


@contextmanager
def database(name: str) -> Iterator[tuple[str | None, Any]]:
    """The database to build in, and how to copy it to a second one without the search index
    (answers the copy's dsn: None for SQLite, whose file lives in the copy's var dir)."""
    if name == "sqlite":

        def copy_sqlite(var_a: Path, var_b: Path) -> None:
            source = sqlite3.connect(var_a / "ctxadmin.sqlite3")
            target = sqlite3.connect(var_b / "ctxadmin.sqlite3")
            source.backup(target)
            source.close()
            from threads.database import search_index as searchindex

            for statement in searchindex.SQLITE_REVERSE:
                target.execute(statement)
            target.commit()
            target.execute("VACUUM")
            target.close()

        yield None, copy_sqlite
        return
    import psycopg
    from ingest import throwaway_cluster

    with throwaway_cluster() as dsn:

        def copy_postgres(var_a: Path, var_b: Path) -> str:
            base, _, db = dsn.rpartition("/")
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                # No connection may hold the template: the build and search workers are done.
                conn.execute(f"CREATE DATABASE ctxadmin_plain TEMPLATE {db}")
            from threads.database import search_index as searchindex

            with psycopg.connect(f"{base}/ctxadmin_plain", autocommit=True) as conn:
                conn.execute(searchindex.POSTGRES_DROP_INDEX)
            return f"{base}/ctxadmin_plain"

        yield dsn, copy_postgres


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| database | events | search p50 | search p95 | max | floor | ingest with index "
        "| without | ratio | floor | verdict |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for r in results:
        s, i = r["search"]["overall"], r["ingest"]
        ok = s["p95"] <= FLOOR_P95_MS and i["ratio"] >= FLOOR_INGEST
        lines.append(
            f"| {r['version']} | {r['build']['events']:,} | {s['p50']:.1f} ms | {s['p95']:.1f} ms "
            f"| {s['max']:.1f} ms | ≤ {FLOOR_P95_MS:.0f} ms | {i['with_index']:,} ev/s "
            f"| {i['without_index']:,} ev/s | {i['ratio']:.2f}× | ≥ {FLOOR_INGEST}× "
            f"| {'meets' if ok else 'MISSES'} |"
        )
    lines += [
        "",
        "The same rows inserted raw after each request (COPY / executemany, one transaction): "
        "the database's own cost of the index, which no code above it can avoid:",
        "",
        "| database | raw insert with index | without | ratio | index cost per event "
        "| API cost per event beyond the raw insert | API ratio if it paid only the index |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        i = r["ingest"]
        lines.append(
            f"| {r['version'].split(' (')[0]} | {i['raw_with_index']:,} ev/s "
            f"| {i['raw_without_index']:,} ev/s | {i['raw_ratio']:.2f}× | {i['index_us']:.0f} µs "
            f"| {i['api_overhead_us']:.0f} µs "
            f"| {1e6 / i['without_index'] / (1e6 / i['without_index'] + i['index_us']):.2f}× |"
        )
    lines += ["", "Search p95 by how many events hold the words:", ""]
    bands = list(results[0]["search"]["bands"])
    lines.append("| band | " + " | ".join(r["version"].split(" (")[0] for r in results) + " |")
    lines.append("|---|" + "---:|" * len(results))
    for band in bands:
        cells = []
        for r in results:
            b = r["search"]["bands"].get(band)
            cells.append(f"{b['p95']:.1f} ms (p50 {b['p50']:.1f})" if b else "–")
        lines.append(f"| {band} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_docs(results: list[dict[str, Any]], rendered: str, load: tuple[float, float]) -> None:
    text = DOCS.read_text()
    begin, end = "<!-- search:begin -->", "<!-- search:end -->"
    builds = "; ".join(
        f"{r['version']}: {r['build']['threads']:,} threads, index built in "
        f"{r['build']['index_seconds']:.0f} s ({r['build']['index_size']})"
        for r in results
    )
    block = (
        f"{begin}\nMeasured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}; {builds}. {len(results[0]['queries'])} queries × "
        f"{results[0]['search']['overall']['n'] // len(results[0]['queries'])} runs each; ingest "
        f"{results[0]['ingest']['rounds']} rounds of {results[0]['ingest']['events_per_round']:,} "
        f"events per side; load average {load[0]:.1f} → {load[1]:.1f}.\n\n{rendered}\n{end}"
    )
    if begin in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    else:
        raise SystemExit(f"docs/benchmarks.md has no {begin} marker in {SECTION!r}")
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", action="store_true", help="only PostgreSQL")
    parser.add_argument("--sqlite", action="store_true", help="only SQLite")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each query")
    parser.add_argument("--rounds", type=int, default=3, help="measured ingest rounds")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    # Worker processes (internal).
    parser.add_argument("--worker", choices=["build", "search", "ingest"])
    parser.add_argument("--dsn")
    parser.add_argument("--var-dir")
    parser.add_argument("--spec")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.worker:
        worker_main(args)
        return
    names = ["postgresql"] if args.postgres else ["sqlite"] if args.sqlite else []
    names = names or ["postgresql", "sqlite"]
    load_before = os.getloadavg()[0]
    # A run of one database keeps the other's last result: the table shows both.
    kept = json.loads(RESULTS.read_text())["results"] if RESULTS.exists() else []
    by_name = {r["database"]: r for r in kept}
    with tempfile.TemporaryDirectory(prefix="ctxadmin-bench-search-") as work:
        for name in names:
            by_name[name] = run_database(name, args, Path(work)) | {
                "load": [round(load_before, 1), round(os.getloadavg()[0], 1)]
            }
            RESULTS.parent.mkdir(exist_ok=True)
            # Another run may have finished meanwhile: keep its result.
            if RESULTS.exists():
                for other in json.loads(RESULTS.read_text())["results"]:
                    if other["database"] not in names:
                        by_name[other["database"]] = other
            results = [by_name[n] for n in ("postgresql", "sqlite") if n in by_name]
            RESULTS.write_text(
                json.dumps({"results": results}, indent=2, ensure_ascii=False) + "\n"
            )
    load_after = os.getloadavg()[0]
    rendered = table(results)
    print(rendered)
    if not args.no_docs:
        write_docs(results, rendered, (load_before, load_after))


if __name__ == "__main__":
    main()
