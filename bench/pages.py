"""Dashboard speed: server time of the thread list at 10k threads and the timeline at 100k events.

    uv run python bench/pages.py                  # starts its own throwaway PostgreSQL 15
    uv run python bench/pages.py --dsn postgres://user@host:5432/db   # an existing database
    uv run python bench/pages.py --sqlite         # the embedded default: a fresh SQLite file
    uv run python bench/pages.py --both           # PostgreSQL and SQLite, one after the other
    uv run python bench/pages.py --profile        # also cProfile every page (not only misses)

One workspace holds 10,000 threads with a realistic spread of problems: unknown side effects
(a side-effecting call that timed out), pending approvals, rejected fold candidates, broken
chains, threads over their budget's high watermark, and committed summaries on some. The thread
rows (and their summary versions) are bulk-created; every event goes through the append service
(`event_append_batch`), so hashes, token counts, side-effect and approval rows are real. The
same workspace holds one thread of 100,000 events, appended in batches of 1,000, folded by
`fold_run` as the pipeline would, then 100 events more after its head. Fold triggers are off
while building.

Logged in as an operator (Django's test client with `force_login`: the whole middleware stack,
session and auth included), each page is requested `--warmup` times, then `--requests` times;
server time is the wall clock around `Client.get`. Reports p50/p95 per page against the
dashboard's limit (p95 ≤ 150 ms), the SQL share, and the query count. Pages that miss are
profiled with cProfile (bench/results/pages-profile-<database>.txt).

Prints a table, writes bench/results/pages.json (one entry per database, the last run of each)
and the table into docs/benchmarks.md (section "Dashboard pages", one block per database).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "pages.json"
DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Dashboard pages — `bench/pages.py`"
LIMIT_P95_MS = 150.0
THREADS = 10_000
LONG_EVENTS = 100_000
BATCH = 1000
THREADS_PER_TRANSACTION = 250
THREADS_PER_PAGE = 50  # threads.views.threads.THREADS_PER_PAGE
MANUAL = {"kind": "manual", "reason": "bench"}
TOPICS = ("refund", "rebooking", "baggage claim", "invoice", "address change", "cancellation")


# --- Databases -------------------------------------------------------------------------------


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    """ingest.py's throwaway cluster. Pages only read: its durable defaults cost only build
    time, and the reads are what is measured."""
    from ingest import throwaway_cluster as cluster  # bench/ is the script's folder

    with cluster() as dsn:
        yield dsn


def setup_django(dsn: str | None, var_dir: str, *, debug: bool = False) -> None:
    """DEBUG off (it keeps every query in memory: not what production runs). No dsn: the
    embedded default, a SQLite file in var_dir. `debug`: DEBUG on and no collectstatic (it
    takes 20 s), for smoke tests that time nothing."""
    if dsn:
        os.environ["DATABASE_URL"] = dsn
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="ctxadmin.settings",
        DJANGO_DEBUG="1" if debug else "0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(48),
        DJANGO_ALLOWED_HOSTS="testserver",
        DJANGO_SECURE_SSL_REDIRECT="0",
        CTXADMIN_VAR_DIR=var_dir,
        CTXADMIN_LOG_LEVEL="ERROR",
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not debug:
        # As a deployment does: DEBUG off serves static files from the collected manifest.
        call_command("collectstatic", interactive=False, verbosity=0)


# --- Data ------------------------------------------------------------------------------------


def thread_events(n: int) -> list[dict[str, Any]]:
    """A short support conversation; some threads carry a problem the list can filter on."""
    topic = TOPICS[n % len(TOPICS)]
    events: list[dict[str, Any]] = [
        {
            "kind": "message",
            "role": "user",
            "content": f"Hello, I need help with the {topic} for order {n}. It was placed "
            f"last week and nothing has happened since.",
        },
        {
            "kind": "tool_call",
            "tool_call_id": "c1",
            "tool_name": "lookup_order",
            "arguments": {"order": n},
        },
        {
            "kind": "tool_result",
            "tool_call_id": "c1",
            "status": "succeeded",
            "result": {"order": n, "total": 20 + n % 400, "status": "shipped"},
            "verified_facts": [{"key": "order_total", "value": 20 + n % 400}],
        },
        {
            "kind": "message",
            "role": "assistant",
            "content": f"Order {n} shipped and totals ${20 + n % 400}. Let me look into the "
            f"{topic} for you.",
        },
    ]
    if n % 40 == 7 or n % 25 == 3:
        # A side-effecting call: timed out (unknown: did it happen?) or succeeded.
        events += [
            {
                "kind": "tool_call",
                "tool_call_id": "c2",
                "tool_name": "issue_refund",
                "arguments": {"order": n, "amount": 20 + n % 400},
                "side_effect": True,
                "idempotency_key": f"refund-{n}",
            },
            {
                "kind": "tool_result",
                "tool_call_id": "c2",
                "status": "timeout" if n % 40 == 7 else "succeeded",
            },
        ]
    if n % 45 == 11:
        events.append(
            {
                "kind": "approval_request",
                "action": f"refund ${20 + n % 400} on order {n}",
                "tool_name": "issue_refund",
                "arguments": {"order": n},
            }
        )
    if n % 50 == 19:
        # Over budget: a long exchange on a small window (see build_threads).
        for turn in range(8):
            events.append(
                {
                    "kind": "message",
                    "role": "user" if turn % 2 == 0 else "assistant",
                    "content": " ".join(
                        f"Detail {turn}.{k}: the parcel for order {n} went to depot {k * 13}."
                        for k in range(8)
                    ),
                }
            )
    return events


def long_unit(n: int) -> list[dict[str, Any]]:
    """Four events of the long thread: a question, a lookup (side-effecting every 50th, and
    timing out every 1,000th), its result, a reply."""
    side_effect = n % 50 == 0
    call: dict[str, Any] = {
        "kind": "tool_call",
        "tool_call_id": f"c{n}",
        "tool_name": "update_ticket" if side_effect else "get_ticket",
        "arguments": {"ticket": n, "fields": ["status", "owner", "priority"]},
    }
    if side_effect:
        call.update(side_effect=True, idempotency_key=f"ticket-{n}-update")
    result: dict[str, Any] = {
        "kind": "tool_result",
        "tool_call_id": f"c{n}",
        "status": "timeout" if n % 1000 == 500 else "succeeded",
        "result": {
            "ticket": n,
            "status": "open",
            "owner": f"agent-{n % 17}",
            "priority": ["low", "normal", "high"][n % 3],
        },
    }
    if n % 5 == 0:
        result["verified_facts"] = [{"key": f"ticket.{n % 40}.owner", "value": f"agent-{n % 17}"}]
    return [
        {
            "kind": "message",
            "role": "user",
            "content": f"Could you check ticket {n} and tell me who owns it and whether the "
            f"customer was told about the delay on order {n * 7}?",
        },
        call,
        result,
        {
            "kind": "message",
            "role": "assistant",
            "content": f"Ticket {n} is open, owned by agent-{n % 17}; the customer was notified "
            f"about the delay on order {n * 7}.",
        },
    ]


def _summary_version(thread: Any, version: int, phase: str, until: int) -> Any:
    from threads.models import SummaryVersion

    content = {"facts": [{"key": "order_total", "value": 1, "source_event_ids": [until]}]}
    return SummaryVersion(
        thread=thread,
        version=version,
        base_version=version - 1,
        phase=phase,
        covered_from=1,
        covered_until=until,
        chain_hash="0" * 64,
        trigger=MANUAL,
        backend="structured",
        checksum="0" * 64,
        content=content,
        rendered=json.dumps(content),
        tokens=40,
        verification={"ok": phase != "rejected", "checks": []},
    )


def build_threads(workspace: Any, count: int) -> None:
    """`count` thread rows bulk-created, their events through the append service, a committed
    summary on every 10th, a rejected candidate on every 60th."""
    from django.db import transaction

    from threads.domain import chain
    from threads.domain.events import normalize_event
    from threads.keys.chain import chain_key
    from threads.models import Thread
    from threads.services.events import event_append_batch

    key = chain_key()
    rows = []
    for n in range(count):
        small = n % 50 == 19
        thread = Thread(
            workspace=workspace,
            external_id=f"order-{n:05d}",
            title=f"{TOPICS[n % len(TOPICS)].capitalize()} for order {n}",
            context_window=900 if small else 16000,
            reserved_output=100 if small else 2000,
            safety_margin=0 if small else 500,
            # A chain that failed verification somewhere (set as the integrity check would).
            chain_ok=n % 97 != 5,
            first_bad_seq=2 if n % 97 == 5 else None,
        )
        thread.chain_head = chain.genesis_hash(str(thread.id), key)
        rows.append(thread)
    Thread.objects.bulk_create(rows, batch_size=1000)
    for first in range(0, count, THREADS_PER_TRANSACTION):
        # Several appends per transaction: one commit for many threads, each still locked
        # and numbered by the service.
        with transaction.atomic():
            for n in range(first, min(first + THREADS_PER_TRANSACTION, count)):
                new = [normalize_event(b, max_bytes=1 << 20) for b in thread_events(n)]
                event_append_batch(thread=rows[n], new_events=new, lock=False)
        if first % 2000 == 0:
            print(f"  threads: {first + THREADS_PER_TRANSACTION:,}/{count:,}", flush=True)

    from threads.models import SummaryVersion

    heads = [t for n, t in enumerate(rows) if n % 10 == 0]
    rejected = [t for n, t in enumerate(rows) if n % 60 == 13]
    SummaryVersion.objects.bulk_create(
        [_summary_version(t, 1, "committed", 2) for t in heads]
        + [_summary_version(t, 1, "rejected", 2) for t in rejected],
        batch_size=1000,
    )
    Thread.objects.filter(pk__in=[t.pk for t in heads]).update(
        head_version=1, last_version=1, covered_until=2
    )
    Thread.objects.filter(pk__in=[t.pk for t in rejected]).update(last_version=1)
    # A person's decision their agent has not picked up yet: minutes ago (waiting for the
    # agent) on every 37th thread, hours ago (stalled) on every 74th.
    from datetime import timedelta

    from django.utils import timezone

    for n, age in ((3, timedelta(minutes=2)), (40, timedelta(hours=2))):
        owing = [t.pk for i, t in enumerate(rows) if i % 74 == n]
        when = timezone.now() - age
        Thread.objects.filter(pk__in=owing).update(agent_owed_at=when, agent_owed_since=when)


def build_long_thread(workspace: Any, events: int) -> Any:
    """The long thread: `events` events in batches of BATCH, folded to the end, then 100 raw
    events after the head (what an agent appends between folds)."""
    from threads.domain.events import normalize_event
    from threads.services.events import event_append_batch
    from threads.services.folding import fold_run
    from threads.services.threads import thread_get_or_create

    thread, _ = thread_get_or_create(workspace=workspace, external_id="long-100k")
    unit = 0
    pending: list[Any] = []

    def append_until(total: int) -> None:
        nonlocal unit, pending
        while thread.last_seq + len(pending) < total:
            pending += [normalize_event(b, max_bytes=1 << 20) for b in long_unit(unit)]
            unit += 1
            if len(pending) >= BATCH or thread.last_seq + len(pending) >= total:
                event_append_batch(thread=thread, new_events=pending)
                pending = []
                if thread.last_seq % 20_000 < 4:
                    print(f"  long thread: {thread.last_seq:,} events", flush=True)

    append_until(events)
    versions = 0
    while fold_run(thread_id=thread.pk, trigger=MANUAL) is not None:
        versions += 1
    append_until(events + 100)
    thread.refresh_from_db()
    print(
        f"  long thread: {thread.last_seq:,} events, {versions} fold versions, head covers "
        f"1–{thread.covered_until:,}",
        flush=True,
    )
    return thread


# --- Measurement -----------------------------------------------------------------------------


class SqlClock:
    """Time and count of the SQL each request runs (a connection execute wrapper)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.queries = 0

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started
            self.queries += 1


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def pages(thread_id: Any, threads: int, events: int) -> dict[str, str]:
    """Page label -> URL. The list pages run over the whole workspace (every thread)."""
    timeline = f"/threads/{thread_id}/"
    last_page = -(-(threads + 1) // THREADS_PER_PAGE)
    deep = max(1, last_page * 3 // 4)
    middle, near_end = events // 2, events - 1
    size = f"{events // 1000}k" if events >= 1000 else str(events)
    return {
        "thread list, first page": "/threads/",
        "thread list, search external id/title (q=order-0421)": "/threads/?q=order-0421",
        "thread list, search incl. message text (q=depot 91)": "/threads/?q=depot+91&content=1",
        "thread list, unknown side effects": "/threads/?unknown=1",
        "thread list, failed verification": "/threads/?failed=1",
        "thread list, pending approvals": "/threads/?pending=1",
        "thread list, over budget": "/threads/?over_budget=1",
        "thread list, waiting for the agent": "/threads/?run_status=waiting_for_agent",
        "thread list, stalled": "/threads/?run_status=stalled",
        "thread list, by last update": "/threads/?sort=-updated",
        "thread list, sorted by budget use": "/threads/?sort=-history",
        "thread list, sorted by events": "/threads/?sort=-events",
        f"thread list, page {deep} of {last_page}": f"/threads/?page={deep}",
        f"timeline {size}, newest page": timeline,
        f"timeline {size}, ?from={middle}": f"{timeline}?from={middle}",
        f"timeline {size}, ?seq={near_end} (redirect + page)": f"{timeline}?seq={near_end}",
        f"context {size}": f"/threads/{thread_id}/context/",
        f"summaries {size}": f"/threads/{thread_id}/summaries/",
    }


def measure_page(client: Any, url: str, warmup: int, requests: int) -> dict[str, Any]:
    from django.db import connection

    follow = "seq=" in url
    for _ in range(warmup):
        response = client.get(url, follow=follow)
        assert response.status_code == 200, (url, response.status_code)
    wall: list[float] = []
    cpu: list[float] = []
    sql: list[float] = []
    queries = 0
    size = 0
    for _ in range(requests):
        clock = SqlClock()
        with connection.execute_wrapper(clock):
            started, started_cpu = time.perf_counter(), time.process_time()
            response = client.get(url, follow=follow)
            wall.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        # A filter that matches nothing would time an empty page.
        assert b"No threads match." not in response.content, url
        sql.append(clock.seconds * 1000)
        queries, size = clock.queries, len(response.content)
    p95 = percentile(wall, 0.95)
    return {
        "url": url,
        "p50_ms": round(percentile(wall, 0.5), 1),
        "p95_ms": round(p95, 1),
        "max_ms": round(max(wall), 1),
        "cpu_p50_ms": round(percentile(cpu, 0.5), 1),
        "sql_p50_ms": round(percentile(sql, 0.5), 1),
        "queries": queries,
        "bytes": size,
        "meets": p95 <= LIMIT_P95_MS,
    }


def profile_page(client: Any, url: str, requests: int = 10) -> str:
    follow = "seq=" in url
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(requests):
        client.get(url, follow=follow)
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    return text.getvalue()


def run(args: argparse.Namespace, dsn: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ctxadmin-bench-var-") as var_dir:
        setup_django(dsn, var_dir)
        from django.db import connection
        from django.test import Client

        from threads.models import Event, Thread
        from threads.services import events as event_service
        from threads.services.workspaces import member_add, workspace_create

        database = connection.vendor
        # The bench builds its own folds: no triggers while appending.
        hooks, event_service.after_append_hooks = event_service.after_append_hooks, []
        workspace, _ = workspace_create(name=f"bench-{secrets.token_hex(4)}")
        print(f"building {args.threads:,} threads on {database} …", flush=True)
        started = time.perf_counter()
        build_threads(workspace, args.threads)
        threads_seconds = time.perf_counter() - started
        print(f"building the {args.events:,}-event thread …", flush=True)
        started = time.perf_counter()
        long = build_long_thread(workspace, args.events)
        long_seconds = time.perf_counter() - started
        event_service.after_append_hooks = hooks
        if database == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # what autovacuum does after a bulk load
        operator = member_add(
            workspace=workspace, username="bench-operator", role="operator", password=None
        )
        client = Client()
        client.force_login(operator)  # type: ignore[arg-type]

        results: dict[str, Any] = {}
        profiles: list[str] = []
        load_before = os.getloadavg()[0]
        for label, url in pages(long.pk, args.threads, args.events).items():
            results[label] = measure_page(client, url, args.warmup, args.requests)
            r = results[label]
            print(
                f"  {label}: p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, {r['queries']} queries",
                flush=True,
            )
            if args.profile or not r["meets"]:
                profiles.append(f"===== {label}: {url}\n{profile_page(client, url)}")
        load_after = os.getloadavg()[0]
        if profiles:
            out = RESULTS.parent / f"pages-profile-{database}.txt"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("\n".join(profiles))
            print(f"wrote {out.relative_to(ROOT)}", flush=True)
        version = None
        if database == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SHOW server_version")
                version = cursor.fetchone()[0]
        return {
            "database": database,
            "server_version": version,
            "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "data": {
                "threads": Thread.objects.filter(workspace=workspace).count(),
                "events": Event.objects.filter(thread__workspace=workspace).count(),
                "long_thread_events": long.last_seq,
                "long_thread_head": {"version": long.head_version, "covers": long.covered_until},
                "build_seconds": {
                    "threads": round(threads_seconds, 1),
                    "long_thread": round(long_seconds, 1),
                },
            },
            "requests": args.requests,
            "warmup": args.warmup,
            "limit_p95_ms": LIMIT_P95_MS,
            "environment": {
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "load_average_1min": {"before": load_before, "after": load_after},
            },
            "pages": results,
        }


# --- Report ----------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    data, env = result["data"], result["environment"]
    lines = [
        f"Measured {result['measured_at']} on {result['database']}"
        + (f" {result['server_version']}" if result.get("server_version") else "")
        + f", {env['cpus']} cores, Python {env['python']}: {data['threads']:,} threads, "
        f"{data['events']:,} events in the workspace; the long thread has "
        f"{data['long_thread_events']:,} events, its head summary v"
        f"{data['long_thread_head']['version']} covers 1–{data['long_thread_head']['covers']:,}. "
        f"{result['requests']} requests per page after {result['warmup']} warm-ups; load "
        f"average {env['load_average_1min']['before']:.1f} → "
        f"{env['load_average_1min']['after']:.1f}.",
        "",
        "| page | p50 ms | p95 ms | SQL p50 ms | queries | p95 ≤ 150 ms |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, r in result["pages"].items():
        lines.append(
            f"| {label} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['sql_p50_ms']:.1f} | "
            f"{r['queries']} | {'meets' if r['meets'] else 'MISSES'} |"
        )
    return "\n".join(lines)


DOCS_INTRO = """\
```
uv run python bench/pages.py            # a throwaway PostgreSQL 15 cluster
uv run python bench/pages.py --sqlite   # the embedded default: a fresh SQLite file
uv run python bench/pages.py --both     # both, one after the other
uv run python bench/pages.py --dsn postgres://user@host/db
```

Server time of the dashboard's pages, held to p95 ≤ 150 ms: the thread list over 10,000 threads
in one workspace (first page, search, each problem filter, sorted by a computed column, a deep
page) and the timeline, working context and summaries of a thread with 100,000 events. Thread
rows are bulk-created with a spread of problems (unknown side effects, pending approvals,
rejected fold candidates, broken chains, threads over their high watermark, agents that have
not picked up a decision, some of them stalled); every event goes
through the append service, so hashes, token counts and side-effect rows are real. The long
thread is folded to its end and then gets 100 raw events after its head. Requests go through
Django's test client logged in as an operator (middleware, session and auth included), with
`DEBUG` off; each page is requested 5 times to warm up, then 50 times. "SQL" is the time spent
in the database driver. A page that misses is profiled (`bench/results/pages-profile-*.txt`).

Where the time goes. The list's flags and budget use are per-thread subqueries; they are
computed for the page's 50 rows only (`selectors.thread_list_page`), and an unfolded thread's
history is its `token_total`, so filters and sorts on them cost one cheap subquery per thread.
On PostgreSQL the queries that filter or sort on budget use are estimated above
`jit_above_cost`, and the server's default JIT then spends 20–25 ms compiling each of them,
more than running it (the count and the page: twice per request); with `jit=off` (e.g.
`--dsn 'postgres://…/db?options=-c%20jit%3Doff'`) the over-budget filter takes about half the
time and the message-text search a tenth. The message-text search (`content=1`) scans the
JSON of every message event of the workspace (a `LIKE` on `data->content`), twice per request
(count and page); no index serves a substring search.
"""


def write_docs(text: str, database: str) -> None:
    """Our section's block for this database, replacing the last run's; others untouched."""
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    existing = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    if SECTION not in existing:
        markers = "\n".join(
            f"### Latest run, {db}\n\n<!-- pages:{db}:begin -->\n(not measured yet)\n"
            f"<!-- pages:{db}:end -->\n"
            for db in ("postgresql", "sqlite")
        )
        existing = existing.rstrip("\n") + f"\n\n{SECTION}\n\n{DOCS_INTRO}\n{markers}"
    begin, end = f"<!-- pages:{database}:begin -->", f"<!-- pages:{database}:end -->"
    head, _, rest = existing.partition(begin)
    _, _, tail = rest.partition(end)
    DOCS.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


def save(result: dict[str, Any], docs: bool) -> None:
    """Print, keep the run in pages.json beside the other database's last run, and document."""
    text = table(result)
    print()
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    stored: dict[str, Any] = {}
    if RESULTS.exists():
        try:
            stored = json.loads(RESULTS.read_text())
        except ValueError:
            stored = {}
    stored[result["database"]] = result
    RESULTS.write_text(json.dumps(stored, indent=2, default=str) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if docs:
        write_docs(text, result["database"])
        print(f"wrote {DOCS.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--dsn", help="a PostgreSQL database to migrate and write into")
    where.add_argument("--sqlite", action="store_true", help="a fresh SQLite file instead")
    parser.add_argument("--both", action="store_true", help="PostgreSQL, then SQLite")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per page")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--events", type=int, default=LONG_EVENTS, help="the long thread's")
    parser.add_argument("--profile", action="store_true", help="cProfile every page")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args()

    if args.both:
        # One Django per process: each database runs in a child of its own.
        common = [
            f"--requests={args.requests}",
            f"--warmup={args.warmup}",
            f"--threads={args.threads}",
            f"--events={args.events}",
        ]
        common += ["--profile"] * args.profile + ["--no-docs"] * args.no_docs
        postgres = [f"--dsn={args.dsn}"] if args.dsn else []
        failed = False
        for extra in (postgres, ["--sqlite"]):
            child = subprocess.run([sys.executable, __file__, *common, *extra], check=False)
            failed |= child.returncode != 0
        sys.exit(1 if failed else 0)

    if args.sqlite:
        result = run(args, None)
    elif args.dsn:
        result = run(args, args.dsn)
    else:
        with throwaway_cluster() as dsn:
            result = run(args, dsn)
    save(result, not args.no_docs)
    if not all(page["meets"] for page in result["pages"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
