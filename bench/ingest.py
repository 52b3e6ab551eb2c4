"""Ingest and verify throughput on PostgreSQL: ctxadmin's API next to raw psycopg, in one run.

    uv run python bench/ingest.py                 # starts its own throwaway PostgreSQL 15
    uv run python bench/ingest.py --dsn postgres://user@host:5432/db   # an existing database
    uv run python bench/ingest.py --profile       # also cProfile the API side
    uv run python bench/ingest.py --server        # 16 agents through gunicorn instead
    uv run python bench/ingest.py --server --profile   # ... and cProfile gunicorn's workers
    uv run python bench/ingest.py --server --statements   # ... and PostgreSQL's time per statement

Three comparisons, each on the same rows:
- batch ingest: POST /api/v1/threads/{id}/events/ with 500 events per request (Django's test
  client: the whole middleware, auth, validation, hashing, token counting, insert and the
  after-commit fold triggers) vs psycopg `executemany` of the rows it stored, 500 per
  transaction;
- single-event ingest: one event per request vs one INSERT per transaction;
- full chain verify: `integrity_check(full=True)` vs a bare loop that reads the rows with
  psycopg, builds their canonical JSON and chains SHA-256 over it.
Events are the real conversations of tests/data (tau-bench GPT-4o airline: user and assistant
messages, tool calls, tool results), system prompts left out, with trace metadata and a
client_event_id as agents send them. The cluster runs with PostgreSQL's durable defaults
(fsync and synchronous_commit on), so every commit reaches the disk on both sides.

Prints a table with ratios against the floors, writes bench/results/ingest.json and the table
into docs/benchmarks.md.

`--server` measures through the production server instead (bench/ingest_server.py): 16 agents
at once against gunicorn, next to the stack ceiling behind the same gunicorn and raw psycopg
from 16 connections; bench/results/ingest-server.json and its own table in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import gzip
import hashlib
import io
import json
import os
import pstats
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # stack_ceiling, docblock

from docblock import replace_block  # noqa: E402

DATA = ROOT / "tests" / "data" / "tau-bench-gpt-4o-airline.json.gz"
RESULTS = ROOT / "bench" / "results" / "ingest.json"
STATEMENTS = ROOT / "bench" / "results" / "ingest-statements.txt"
DOCS = ROOT / "docs" / "benchmarks.md"
BATCH = 500
FLOORS = {
    "batch": 0.35,
    "single": 0.6,
    "single_ceiling": 0.6,
    "single_bare": 0.6,
    "verify": 0.5,
}
# Tools of the airline agent that change something in the airline's system.
SIDE_EFFECT_TOOLS = {
    "book_reservation",
    "cancel_reservation",
    "update_reservation_flights",
    "update_reservation_passengers",
    "update_reservation_baggages",
    "send_certificate",
}
# As threads/services/event_rows.py EVENT_COLUMNS writes them, thread_id apart: secrets is
# JSON (index 11), the chain v2 columns (content_salt, content_digest) last.
EVENT_COLUMNS = (
    "seq, kind, created_at, client_event_id, metadata, data, role, tool_call_id, "
    "request_digest, token_count, hash, secrets, content_salt, content_digest"
)
SECRETS = 11


# --- PostgreSQL ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_bin() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise SystemExit("PostgreSQL binaries (initdb, pg_ctl) not found")


@contextmanager
def throwaway_cluster(*, statements: bool = False) -> Iterator[str]:
    """A PostgreSQL cluster in a temporary folder on a free port, with durable defaults;
    `statements`: with pg_stat_statements loaded, planning time included (statements_report)."""
    pg_bin = _pg_bin()
    work = Path(tempfile.mkdtemp(prefix="ctxadmin-bench-pg-"))
    data, port = work / "data", _free_port()
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(work, "postgres")
    run = lambda *cmd: subprocess.run([*prefix, *cmd], check=True, capture_output=True)  # noqa: E731
    run(str(pg_bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    options = f"-p {port} -k {work} -c listen_addresses=127.0.0.1"
    if statements:
        options += (
            " -c shared_preload_libraries=pg_stat_statements"
            " -c pg_stat_statements.track_planning=on"
        )
    run(
        str(pg_bin / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(work / "log"),
        "-w",
        "-o",
        options,
        "start",
    )
    try:
        subprocess.run(
            [
                *prefix,
                str(pg_bin / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "postgres",
                "ctxadmin_bench",
            ],
            check=True,
        )
        dsn = f"postgres://postgres@127.0.0.1:{port}/ctxadmin_bench"
        if statements:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as connection:
                connection.execute("CREATE EXTENSION pg_stat_statements")
        yield dsn
    finally:
        subprocess.run(
            [*prefix, str(pg_bin / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(work, ignore_errors=True)


def setup_django(dsn: str, var_dir: str) -> None:
    os.environ.update(
        DATABASE_URL=dsn,
        DJANGO_SETTINGS_MODULE="ctxadmin.settings",
        DJANGO_DEBUG="0",  # DEBUG keeps every query in memory: not what production runs
        DJANGO_SECRET_KEY=secrets.token_urlsafe(48),
        DJANGO_ALLOWED_HOSTS="testserver",
        DJANGO_SECURE_SSL_REDIRECT="0",
        CTXADMIN_VAR_DIR=var_dir,
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


# --- Events ----------------------------------------------------------------------------------


def tau_events() -> list[dict[str, Any]]:
    """The tau-bench conversations as agents would post them, one after the other."""
    conversations = json.loads(gzip.decompress(DATA.read_bytes()))
    events: list[dict[str, Any]] = []
    for number, conversation in enumerate(conversations):
        trace = f"tau-{conversation['task_id']}-{conversation.get('trial', 0)}-{number}"
        for turn, message in enumerate(conversation["traj"]):
            meta = {"trace_id": trace, "turn": turn, "model": "gpt-4o"}
            role = message["role"]
            if role in ("user", "assistant"):
                if message.get("content"):
                    events.append(
                        {
                            "kind": "message",
                            "role": role,
                            "content": message["content"],
                            "metadata": meta,
                        }
                    )
                for call in message.get("tool_calls") or []:
                    name = call["function"]["name"]
                    event = {
                        "kind": "tool_call",
                        "tool_call_id": call["id"],
                        "tool_name": name,
                        "arguments": json.loads(call["function"]["arguments"] or "{}"),
                        "metadata": meta,
                    }
                    if name in SIDE_EFFECT_TOOLS:
                        event.update(side_effect=True, idempotency_key=f"{trace}-{call['id']}")
                    events.append(event)
            elif role == "tool":
                try:
                    result: Any = json.loads(message["content"])
                except (TypeError, ValueError):
                    result = message["content"]
                events.append(
                    {
                        "kind": "tool_result",
                        "tool_call_id": message["tool_call_id"],
                        "status": "succeeded",
                        "result": result,
                        "metadata": meta,
                    }
                )
    for index, event in enumerate(events):
        event["client_event_id"] = f"ev-{index}"
    return events


# --- Measurements ----------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Bench:
    def __init__(self, dsn: str) -> None:
        import psycopg
        from django.test import Client

        from threads.services.workspaces import workspace_create

        self.psycopg = psycopg
        self.raw = psycopg.connect(dsn, autocommit=True)
        self.workspace, key = workspace_create(name=f"bench-{secrets.token_hex(4)}")
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
        self.threads = 0

    def new_thread(self) -> Any:
        from threads.services.threads import thread_get_or_create

        self.threads += 1
        return thread_get_or_create(workspace=self.workspace, external_id=f"bench-{self.threads}")[
            0
        ]

    def post(self, thread: Any, body: bytes, path: str = "/api/v1/threads/{id}/events/") -> None:
        response = self.client.post(
            path.format(id=thread.pk), data=body, content_type="application/json"
        )
        if response.status_code != 201:
            raise SystemExit(f"ingest refused: {response.status_code} {response.content[:500]!r}")

    def api_batches(self, events: list[dict[str, Any]]) -> tuple[Any, float]:
        """Post every event, BATCH per request, to a new thread; (thread, seconds)."""
        thread = self.new_thread()
        bodies = [
            json.dumps({"events": events[i : i + BATCH]}).encode()
            for i in range(0, len(events), BATCH)
        ]
        return thread, sum(timed(partial(self.post, thread, body)) for body in bodies)

    def post_each(self, thread: Any, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.post(thread, json.dumps(event).encode())

    def stored_rows(self, thread: Any) -> list[tuple[Any, ...]]:
        return self.raw.execute(
            f"SELECT {EVENT_COLUMNS} FROM threads_event WHERE thread_id = %s ORDER BY seq",
            (thread.pk,),
        ).fetchall()

    INSERT = (
        "INSERT INTO threads_event (thread_id, " + EVENT_COLUMNS + ") "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )

    def _raw_params(self, thread: Any, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        from psycopg.types.json import Jsonb

        # metadata and data (columns 4 and 5) go as jsonb, dumped when the INSERT runs: that
        # is part of what a client pays; secrets (the last) too, when the event has some. The
        # rest as stored.
        return [
            (
                thread.pk,
                *row[:4],
                Jsonb(row[4]),
                Jsonb(row[5]),
                *row[6:SECRETS],
                None if row[SECRETS] is None else Jsonb(row[SECRETS]),
                *row[SECRETS + 1 :],
            )
            for row in rows
        ]

    def batch_round(
        self, events: list[dict[str, Any]], rows: list[tuple[Any, ...]]
    ) -> tuple[Any, float, float]:
        """Batch ingest, the two sides interleaved request by request so that both see the same
        machine: API request i, then the raw transaction of the rows request i stores. `rows`
        are what the same events became in an earlier API run (read back before measuring, so
        that nothing is read in between). Returns (the API's thread, API seconds, raw
        seconds)."""
        api_thread, raw_thread = self.new_thread(), self.new_thread()
        params = self._raw_params(raw_thread, rows)
        api_seconds = raw_seconds = 0.0
        with self.raw.cursor() as cursor:
            for first in range(0, len(events), BATCH):
                body = json.dumps({"events": events[first : first + BATCH]}).encode()
                api_seconds += timed(partial(self.post, api_thread, body))

                def insert(chunk: list[tuple[Any, ...]] = params[first : first + BATCH]) -> None:
                    with self.raw.transaction():
                        cursor.executemany(self.INSERT, chunk)

                raw_seconds += timed(insert)
        return api_thread, api_seconds, raw_seconds

    def single_round(
        self, events: list[dict[str, Any]], rows: list[tuple[Any, ...]]
    ) -> dict[str, float]:
        """One event per request vs one INSERT per transaction (autocommit), interleaved event
        by event, with the stack's ceilings between them (bench/stack_ceiling.py): a DRF view
        that authenticates and parses as ctxadmin does and runs only the raw INSERT, and a bare
        Django view that runs only the raw INSERT. `rows` are the rows the same events became
        in a batch run. Returns seconds by side: api, ceiling, bare, raw."""
        import stack_ceiling
        from django.test.utils import override_settings

        threads = {side: self.new_thread() for side in ("api", "ceiling", "bare", "raw")}
        params = self._raw_params(threads["raw"], rows)
        stack_ceiling.INSERT = self.INSERT
        ceiling_rows = iter(self._raw_params(threads["ceiling"], rows))
        bare_rows = iter(self._raw_params(threads["bare"], rows))
        seconds = dict.fromkeys(threads, 0.0)
        with self.raw.cursor() as cursor, override_settings(ROOT_URLCONF="stack_ceiling"):
            for event, row in zip(events, params, strict=True):
                body = json.dumps(event).encode()
                with override_settings(ROOT_URLCONF="ctxadmin.urls"):
                    seconds["api"] += timed(partial(self.post, threads["api"], body))
                stack_ceiling.ROWS = ceiling_rows
                seconds["ceiling"] += timed(
                    partial(self.post, threads["ceiling"], body, path="/ceiling/{id}/")
                )
                stack_ceiling.ROWS = bare_rows
                seconds["bare"] += timed(
                    partial(self.post, threads["bare"], body, path="/bare/{id}/")
                )
                seconds["raw"] += timed(partial(cursor.execute, self.INSERT, row))
        return seconds

    def verify(self, thread: Any) -> float:
        from threads.services.integrity import integrity_check

        def check() -> None:
            verdict = integrity_check(thread=thread, full=True)
            assert verdict.ok, verdict.detail

        return timed(check)

    def bare_verify(self, thread: Any) -> tuple[float, float]:
        """A minimal independent verifier: read, canonical JSON, SHA-256 chain (chain v2: each
        event's salted content digest checked, then the link over its v2 form; a v1 event's
        link over the event itself). Also returns the hashing part alone (rows already in
        memory)."""
        from threads.domain.chain import genesis_hash
        from threads.keys.chain import chain_key

        if chain_key():
            raise SystemExit("the bare loop is plain SHA-256: unset CTXADMIN_CHAIN_KEY")
        start = genesis_hash(str(thread.pk))
        rows: list[tuple[Any, ...]] = []

        def fetch() -> None:
            rows[:] = self.raw.execute(
                "SELECT seq, kind, created_at, client_event_id, metadata, data, hash, "
                "content_salt, content_digest FROM threads_event WHERE thread_id = %s ORDER BY seq",
                (thread.pk,),
            ).fetchall()

        def chain() -> None:
            previous = start
            for seq, kind, created, client_id, metadata, data, stored, salt, digest in rows:
                body = {
                    "seq": seq,
                    "kind": kind,
                    "created_at": created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                }
                if client_id is not None:
                    body["client_event_id"] = client_id
                if digest is not None:
                    content = json.dumps(
                        {"data": data, "metadata": metadata},
                        sort_keys=True,
                        separators=(",", ":"),
                        ensure_ascii=False,
                    ).encode()
                    assert hashlib.sha256(bytes.fromhex(salt) + content).hexdigest() == digest
                    body.update(v=2, content_digest=digest)
                else:
                    body["metadata"] = metadata
                    body.update(data)
                canonical = json.dumps(
                    body, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                ).encode()
                previous = hashlib.sha256(previous.encode() + canonical).hexdigest()
                assert previous == stored, f"seq {seq}"

        fetch_time = timed(fetch)
        chain_time = timed(chain)
        return fetch_time + chain_time, chain_time


def settle() -> None:
    """Put what the harness holds (the events, rows read back) out of the garbage collector's
    reach before a measurement, as a server that froze its heap after start-up would have it:
    otherwise each full collection during a request scans the harness's data too. Both sides
    run in this process and are measured the same way."""
    gc.collect()
    gc.freeze()


def median_rate(count: int, seconds: list[float]) -> float:
    return count / statistics.median(seconds)


def profile_api(bench: Bench, events: list[dict[str, Any]], singles: int, out: Path) -> None:
    """cProfile the API side alone: the batch path over every event, then `singles` events
    posted one per request to a new thread. Both reports go to one file."""
    thread = bench.new_thread()
    runs: dict[str, Callable[[], Any]] = {
        "batch ingest, 500 events a request": partial(bench.api_batches, events),
        f"single-event ingest, {singles} requests": partial(
            bench.post_each, thread, events[:singles]
        ),
    }
    text = io.StringIO()
    for title, work in runs.items():
        profiler = cProfile.Profile()
        profiler.enable()
        work()
        profiler.disable()
        text.write(f"===== {title}\n")
        stats = pstats.Stats(profiler, stream=text).strip_dirs()
        stats.sort_stats("cumulative").print_stats(50)
        stats.sort_stats("tottime").print_stats(30)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.getvalue())


# --- Report ----------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    rows = [
        "| comparison | ctxadmin | raw baseline | ratio | floor | verdict |",
        "|---|---|---|---|---|---|",
    ]
    labels = {
        "batch": ("API batch ingest, 500/request", "psycopg executemany, 500/transaction"),
        "single": ("API single-event ingest", "one INSERT per transaction"),
        "single_ceiling": (
            "stack ceiling: a DRF view that only authenticates, parses and runs the raw INSERT",
            "one INSERT per transaction",
        ),
        "single_bare": (
            "bare Django ceiling: a view with no authentication that only runs the raw INSERT",
            "one INSERT per transaction",
        ),
        "verify": ("integrity_check(full=True)", "read + canonical JSON + SHA-256 loop"),
    }
    for name, (ours, theirs) in labels.items():
        r = results["comparisons"][name]
        verdict = "meets" if r["ratio"] >= r["floor"] else "MISSES"
        if name in ("single_ceiling", "single_bare"):
            # Not ctxadmin: the upper bound of any single-event append on this stack.
            verdict = f"bound: {'above' if r['ratio'] >= r['floor'] else 'below'} the floor"
        rows.append(
            f"| {name}: {ours} vs {theirs} | {r['ctxadmin_per_s']:,.0f} ev/s | "
            f"{r['baseline_per_s']:,.0f} ev/s | {r['ratio']:.2f}× | ≥ {r['floor']:.2f}× | "
            f"{verdict} |"
        )
    return "\n".join(rows)


def write_docs(results: dict[str, Any], rendered: str) -> None:
    begin, end = "<!-- ingest:begin -->", "<!-- ingest:end -->"
    env = results["environment"]
    block = (
        f"{begin}\n"
        f"Measured {results['measured_at']} on {env['cpus']} cores, PostgreSQL "
        f"{env['postgresql']}, Python {env['python']}: {results['events']['batch']} events in "
        f"the batch runs (mean {results['events']['mean_bytes']:.0f} bytes, "
        f"{results['events']['min_bytes']}–{results['events']['max_bytes']}), "
        f"{results['events']['single']} in the single-event runs, "
        f"median of {results['repeat']} runs; load average "
        f"{env['load_average_1min']['before']:.1f} → {env['load_average_1min']['after']:.1f}."
        f"\n\n{rendered}\n"
        f"\nVerify, hashing alone (rows already in memory): "
        f"{results['comparisons']['verify']['hash_only_per_s']:,.0f} ev/s.\n{end}"
    )
    replace_block(DOCS, block, begin, end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL database to migrate and write into")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--single", type=int, default=600, help="events in the single runs")
    parser.add_argument("--profile", action="store_true", help="cProfile the API side")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    parser.add_argument(
        "--server", action="store_true", help="16 agents through gunicorn (bench/ingest_server.py)"
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help=f"PostgreSQL's execution and planning time per statement, to {STATEMENTS.name}",
    )
    parser.add_argument(
        "--secrets",
        choices=("on", "off"),
        default="on",
        help="CTXADMIN_DETECT_SECRETS for the run (bench/ingest_secrets.py compares the two)",
    )
    parser.add_argument(
        "--server-single", type=int, default=60, help="events each agent posts one by one"
    )
    parser.add_argument(
        "--server-batches", type=int, default=8, help="50-event batches each agent posts"
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="where --server writes its JSON (default bench/results/ingest-server.json)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ctxadmin-bench-var-") as var_dir:
        if args.dsn:
            run(args, args.dsn, var_dir)
        else:
            with throwaway_cluster(statements=args.statements) as dsn:
                run(args, dsn, var_dir)
                if args.statements:
                    statements_report(dsn, STATEMENTS)


def statements_report(dsn: str, out: Path, top: int = 25) -> None:
    """The statements that cost PostgreSQL the most over the run, every side's (the ceilings'
    spell their SQL apart from ctxadmin's): calls, and execution and planning time per call.
    A prepared statement the server plans on every call shows here as planning time in every
    run of it; docs/benchmarks.md has what it found in issue #26's last round."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT calls, total_exec_time, total_plan_time, "
            "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
            "WHERE calls > 0 ORDER BY total_exec_time + total_plan_time DESC LIMIT %s",
            (top,),
        ).fetchall()
    lines = [
        f"PostgreSQL's time per statement over the run, the {top} costliest (pg_stat_statements)",
        "",
        f"{'calls':>8} {'exec µs/call':>13} {'plan µs/call':>13}  statement",
    ]
    for calls, executing, planning, query in rows:
        lines.append(
            f"{calls:>8} {executing / calls * 1000:>13.1f} {planning / calls * 1000:>13.1f}  "
            f"{query[:400]}"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(line[:160] for line in lines))
    print(f"wrote {out}")


def run(args: argparse.Namespace, dsn: str, var_dir: str) -> None:
    os.environ["CTXADMIN_DETECT_SECRETS"] = "1" if args.secrets == "on" else "0"
    setup_django(dsn, var_dir)
    if args.server:
        run_server(args, dsn, var_dir)
        return
    events = tau_events()
    sizes = [len(json.dumps(e, separators=(",", ":")).encode()) for e in events]
    singles = events[: args.single]
    bench = Bench(dsn)
    postgres_version = bench.raw.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]

    # Warm up both paths (imports, tiktoken's tables, plan caches) before measuring; the rows
    # this API run stores are what the raw side inserts in the batch runs.
    warm, _ = bench.api_batches(events)
    rows = bench.stored_rows(warm)
    assert len(rows) == len(events)
    bench.batch_round(events[:BATCH], rows[:BATCH])
    load_before = os.getloadavg()

    times: dict[str, list[float]] = {
        k: []
        for k in (
            "api_batch",
            "raw_batch",
            "api_single",
            "ceiling_single",
            "bare_single",
            "raw_single",
            "verify",
            "bare_verify",
        )
    }
    hash_only: list[float] = []
    for round_ in range(args.repeat):
        print(f"round {round_ + 1}/{args.repeat} …", file=sys.stderr)
        settle()
        thread, api_seconds, raw_seconds = bench.batch_round(events, rows)
        times["api_batch"].append(api_seconds)
        times["raw_batch"].append(raw_seconds)
        assert len(bench.stored_rows(thread)) == len(events)
        settle()
        single = bench.single_round(singles, rows[: len(singles)])
        times["api_single"].append(single["api"])
        times["ceiling_single"].append(single["ceiling"])
        times["bare_single"].append(single["bare"])
        times["raw_single"].append(single["raw"])
        times["verify"].append(bench.verify(thread))
        bare, hashing = bench.bare_verify(thread)
        times["bare_verify"].append(bare)
        hash_only.append(hashing)
    load_after = os.getloadavg()

    n, k = len(events), len(singles)
    comparisons = {}
    for name, ours, theirs, count in (
        ("batch", "api_batch", "raw_batch", n),
        ("single", "api_single", "raw_single", k),
        ("single_ceiling", "ceiling_single", "raw_single", k),
        ("single_bare", "bare_single", "raw_single", k),
        ("verify", "verify", "bare_verify", n),
    ):
        ours_rate, theirs_rate = median_rate(count, times[ours]), median_rate(count, times[theirs])
        comparisons[name] = {
            "ctxadmin_per_s": ours_rate,
            "baseline_per_s": theirs_rate,
            "ratio": ours_rate / theirs_rate,
            "floor": FLOORS[name],
            "ctxadmin_seconds": times[ours],
            "baseline_seconds": times[theirs],
        }
    comparisons["verify"]["hash_only_per_s"] = median_rate(n, hash_only)
    results = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeat": args.repeat,
        "events": {
            "batch": n,
            "single": k,
            "mean_bytes": statistics.mean(sizes),
            "min_bytes": min(sizes),
            "max_bytes": max(sizes),
            "source": "tests/data/tau-bench-gpt-4o-airline.json.gz",
        },
        "environment": {
            "cpus": os.cpu_count(),
            "postgresql": postgres_version,
            "python": sys.version.split()[0],
            "durability": "fsync=on, synchronous_commit=on"
            if not args.dsn
            else "as configured on --dsn",
            # Other work on the machine slows both sides; the interleaving shares it fairly.
            "load_average_1min": {"before": load_before[0], "after": load_after[0]},
        },
        "comparisons": comparisons,
    }
    rendered = table(results)
    print(rendered)
    print(f"\nverify, hashing alone: {comparisons['verify']['hash_only_per_s']:,.0f} ev/s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if not args.no_docs:
        write_docs(results, rendered)
        print(f"wrote {DOCS.relative_to(ROOT)}")
    if args.profile:
        out = RESULTS.parent / "ingest-profile.txt"
        profile_api(bench, events, 150, out)
        print(f"wrote {out.relative_to(ROOT)}")


def run_server(args: argparse.Namespace, dsn: str, var_dir: str) -> None:
    import ingest_server

    events = tau_events()
    bench = Bench(dsn)
    postgres_version = bench.raw.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    # The rows the events become: what the ceiling and the raw side write.
    warm, _ = bench.api_batches(events)
    rows = bench.stored_rows(warm)
    results = ingest_server.measure(
        dsn,
        var_dir,
        events,
        rows,
        singles=args.server_single,
        batches=args.server_batches,
        repeat=args.repeat,
        profile=RESULTS.parent / "ingest-server-profile.txt" if args.profile else None,
    )
    results["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results["environment"] = {
        "cpus": os.cpu_count(),
        "postgresql": postgres_version,
        "python": sys.version.split()[0],
        "durability": "fsync=on, synchronous_commit=on" if not args.dsn else "as on --dsn",
    }
    results["repeat"] = args.repeat
    rendered = ingest_server.table(results)
    print(rendered)
    out = args.results or RESULTS.parent / "ingest-server.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    if not args.no_docs:
        write_server_docs(results, rendered)
        print(f"wrote {DOCS.relative_to(ROOT)}")


def write_server_docs(results: dict[str, Any], rendered: str) -> None:
    begin, end = "<!-- ingest-server:begin -->", "<!-- ingest-server:end -->"
    env, load = results["environment"], results["load_average_1min"]
    block = (
        f"{begin}\n"
        f"Measured {results['measured_at']} on {env['cpus']} cores, PostgreSQL "
        f"{env['postgresql']}, Python {env['python']}, `{results['server']}`: "
        f"{results['agents']} agents at once, each to its own thread with its own API key; "
        f"{results['events']['single']} single-event requests and "
        f"{results['events']['batch'] // results['events']['batch_size']} batches of "
        f"{results['events']['batch_size']} per agent and side; median of "
        f"{results['repeat']} rounds; load average {load['before']:.1f} → "
        f"{load['after']:.1f}.\n\n{rendered}\n{end}"
    )
    replace_block(DOCS, block, begin, end)


if __name__ == "__main__":
    main()
