"""Dashboard pages with and without the read replica while 8 agents append to the primary.

    uv run python bench/replica_pages.py                      # throwaway primary + replica
    uv run python bench/replica_pages.py --threads 500 --events 2000 --requests 10   # quick
    uv run python bench/replica_pages.py --dsn postgres://postgres@127.0.0.1:5432/db
        # an existing primary on this machine: the replica is built from it

A primary (bench/ingest.py's throwaway cluster: initdb's defaults allow streaming from
loopback) and a streaming replica of it (`pg_basebackup -R -X stream`, `hot_standby_feedback`
on, a free loopback port); ctxadmin runs with `CTXADMIN_REPLICA_URL` set to it. The workspace
is bench/pages.py's: `--threads` threads and a thread of `--events` events folded to its end.
While the pages are measured, 8 agents (threads of a separate process) append continuously, no
pause, one four-event exchange per `POST /api/v1/threads/{id}/events/` to a gunicorn
(bench/ingest_server.py's), each with its own key; the first appends to the thread whose
timeline is measured. The same process samples the replica's lag every 0.25 s (the router's
measure on the replica; `replay_lag` and WAL bytes behind from `pg_stat_replication`).

Pages go through Django's test client in this process, signed in as an operator, as
bench/pages.py measures them. Two clients: "replica" has the deployment's middleware,
"primary" the same stack without ReplicaReadsMiddleware (a deployment without a replica). They
alternate request by request, the first swapping every round. SQL is counted per database
alias (the primary client must run none on the replica); fallbacks are this process's
`ctxadmin_replica_fallback_pages_total` over the measured rounds. Writes
bench/results/replica-pages.json and the table into docs/benchmarks.md ("Read replica under
appending agents").
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import ingest  # noqa: E402  bench/: the throwaway cluster
import pages  # noqa: E402  the workspace, the pages' measure
from docblock import replace_block  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "replica-pages.json"
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- replica-pages:begin -->", "<!-- replica-pages:end -->"
AGENTS = 8
MIDDLEWARE = "ctxadmin.db_router.ReplicaReadsMiddleware"
FIRST_UNIT = 10_000_000  # agents' tool call ids never meet the long thread's
SIDES = ("replica", "primary")


# --- The replica ------------------------------------------------------------------------------


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def throwaway_replica(dsn: str) -> Iterator[str]:
    """A streaming replica of the primary at `dsn` (on this machine), in a scratch folder on a
    free loopback port; its DSN, same database and user."""
    import psycopg

    pg_bin = ingest._pg_bin()
    parts = urlsplit(dsn)
    user = parts.username or "postgres"
    folder = Path(tempfile.mkdtemp(prefix="ctxadmin-bench-replica-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", ingest._free_port()
    run = lambda *cmd: subprocess.run(_as_postgres([*cmd]), check=True, capture_output=True)  # noqa: E731
    primary = ["-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432), "-U", user]
    run(
        str(pg_bin / "pg_basebackup"), *primary, "-D", str(data), "-R", "-X", "stream", "-c", "fast"
    )
    # A standby refuses to start with fewer connections than its primary allows.
    with psycopg.connect(dsn, autocommit=True) as primary_connection:
        connections = primary_connection.execute("SHOW max_connections").fetchone()[0]  # type: ignore[index]
    options = (
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c hot_standby=on "
        f"-c hot_standby_feedback=on -c max_connections={connections}"
    )
    ctl = [str(pg_bin / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-t", "60"]
    run(*ctl, "-o", options, "start")
    try:
        yield parts._replace(netloc=f"{user}@127.0.0.1:{port}").geturl()
    finally:
        subprocess.run(
            _as_postgres([str(pg_bin / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)


def caught_up(primary: Any, replica: Any, timeout: float = 120) -> None:
    target = primary.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
    deadline = time.monotonic() + timeout
    while not replica.execute(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn").fetchone()[
        0
    ]:
        if time.monotonic() > deadline:
            raise SystemExit(f"the replica did not catch up in {timeout:.0f} s")
        time.sleep(0.05)


# --- The agents (a separate process) ----------------------------------------------------------


def _agent(port: int, key: str, thread: str, first: int, stop: Any, out: dict[str, Any]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    unit, latencies = first, []
    while not stop.is_set():
        body = json.dumps({"events": pages.long_unit(unit)}).encode()
        started = time.perf_counter()
        connection.request("POST", f"/api/v1/threads/{thread}/events/", body, headers)
        response = connection.getresponse()
        content = response.read()
        latencies.append(time.perf_counter() - started)
        if response.status != 201:
            out["error"] = f"{response.status} {content[:300]!r}"
            return
        unit += 1
    out["requests"] = len(latencies)
    out["latencies"] = latencies


def _sample_lag(primary_dsn: str, replica_dsn: str, stop: Any, samples: list[Any]) -> None:
    import psycopg

    from ctxadmin.db_router import LAG_SQL

    with (
        psycopg.connect(primary_dsn, autocommit=True) as primary,
        psycopg.connect(replica_dsn, autocommit=True) as replica,
    ):
        while not stop.is_set():
            row = primary.execute(
                "SELECT COALESCE(EXTRACT(EPOCH FROM replay_lag), 0), "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) FROM pg_stat_replication"
            ).fetchone()
            lag = replica.execute(LAG_SQL).fetchone()
            samples.append((float(lag[0] or 0) if lag else None, *(row if row else (None, None))))
            stop.wait(0.25)


def agents_process(
    port: int, work: list[Any], dsns: tuple[str, str], stop: Any, queue: Any
) -> None:
    """8 agents and the lag sampler until `stop`; puts what they did on `queue`."""
    outs: list[dict[str, Any]] = [{} for _ in work]
    samples: list[Any] = []
    threads = [
        threading.Thread(
            target=_agent, args=(port, key, thread, FIRST_UNIT * (i + 1), stop, outs[i])
        )
        for i, (key, thread) in enumerate(work)
    ]
    threads.append(threading.Thread(target=_sample_lag, args=(*dsns, stop, samples)))
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put({"seconds": time.perf_counter() - started, "agents": outs, "lag": samples})


# --- Pages ------------------------------------------------------------------------------------


def page_urls(long_thread: Any) -> dict[str, str]:
    return {
        "thread list, first page": "/threads/",
        "thread list, unknown side effects": "/threads/?unknown=1",
        "search (q=depot 91)": "/threads/?q=depot+91",
        "timeline of an appending agent's thread, newest page": f"/threads/{long_thread.pk}/",
        "Operations": "/operations/",
    }


class AliasCounter:
    """Statements a request runs, per database alias."""

    def __init__(self, alias: str, counts: dict[str, int]) -> None:
        self.alias, self.counts = alias, counts

    def __call__(self, execute: Callable[..., Any], *args: Any) -> Any:
        self.counts[self.alias] = self.counts.get(self.alias, 0) + 1
        return execute(*args)


def timed_get(client: Any, url: str) -> tuple[float, dict[str, int]]:
    from django.db import connections

    counts: dict[str, int] = {}
    with (
        connections["default"].execute_wrapper(AliasCounter("default", counts)),
        connections["replica"].execute_wrapper(AliasCounter("replica", counts)),
    ):
        started = time.perf_counter()
        response = client.get(url)
        seconds = time.perf_counter() - started
    assert response.status_code == 200, (url, response.status_code)
    assert b"No threads match." not in response.content, url
    return seconds * 1000, counts


def clients(operator: Any) -> dict[str, Any]:
    """The deployment's stack, and the same without the replica's middleware."""
    from django.conf import settings
    from django.test import Client, override_settings

    assert MIDDLEWARE in settings.MIDDLEWARE, "CTXADMIN_REPLICA_URL is not set"
    on, off = Client(), Client()
    with override_settings(MIDDLEWARE=[m for m in settings.MIDDLEWARE if m != MIDDLEWARE]):
        off.handler.load_middleware()
    for client in (on, off):
        client.force_login(operator)
    return {"replica": on, "primary": off}


def fallbacks() -> dict[str, float]:
    from threads.database.replica import LAGGING, REPLICA_FALLBACKS, UNAVAILABLE

    return {r: REPLICA_FALLBACKS.labels(reason=r)._value.get() for r in (UNAVAILABLE, LAGGING)}


def measure(by_side: dict[str, Any], urls: dict[str, str], warmup: int, requests: int) -> dict:
    for client in by_side.values():
        for url in urls.values():
            for _ in range(warmup):
                timed_get(client, url)
    wall: dict[str, dict[str, list[float]]] = {s: {p: [] for p in urls} for s in SIDES}
    sql: dict[str, dict[str, dict[str, int]]] = {s: {p: {} for p in urls} for s in SIDES}
    for round_ in range(requests):
        order = SIDES if round_ % 2 == 0 else SIDES[::-1]
        for label, url in urls.items():
            for side in order:
                ms, counts = timed_get(by_side[side], url)
                wall[side][label].append(ms)
                for alias, n in counts.items():
                    sql[side][label][alias] = sql[side][label].get(alias, 0) + n
    assert not any(sql["primary"][p].get("replica") for p in urls), "primary pages read the replica"
    result = {}
    for label in urls:
        sides: dict[str, Any] = {}
        for side in SIDES:
            values, counts = wall[side][label], sql[side][label]
            sides[side] = {
                "p50_ms": round(pages.percentile(values, 0.5), 1),
                "p95_ms": round(pages.percentile(values, 0.95), 1),
                "statements_on_replica": counts.get("replica", 0),
                "statements_on_primary": counts.get("default", 0),
            }
        r, p = sides["replica"], sides["primary"]
        sides["ratio_p50"] = round(r["p50_ms"] / p["p50_ms"], 2) if p["p50_ms"] else None
        sides["ratio_p95"] = round(r["p95_ms"] / p["p95_ms"], 2) if p["p95_ms"] else None
        sides["url"] = urls[label]
        result[label] = sides
    return result


# --- The run ----------------------------------------------------------------------------------


def lag_summary(samples: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Samples: (the replica's own lag s, `replay_lag` s, bytes behind): the last two None
    while the primary lists no streaming replica."""
    summary: dict[str, Any] = {
        "samples": len(samples),
        "streaming_all_along": all(s[1] is not None for s in samples),
    }
    for i, key in enumerate(("replica_lag_s", "replay_lag_s", "bytes_behind")):
        values = [float(s[i]) for s in samples if s[i] is not None]
        summary[key] = values and {
            "p50": round(pages.percentile(values, 0.5), 3),
            "p95": round(pages.percentile(values, 0.95), 3),
            "max": round(max(values), 3),
        }
    return summary


def run(args: argparse.Namespace, dsn: str) -> dict[str, Any]:
    import psycopg

    var_dir = tempfile.mkdtemp(prefix="ctxadmin-bench-var-")
    with throwaway_replica(dsn) as replica_dsn:
        os.environ["CTXADMIN_REPLICA_URL"] = replica_dsn
        pages.setup_django(dsn, var_dir, debug=args.smoke)
        import ingest_server
        from django.db import connection, connections

        from threads.models import Event, Thread
        from threads.services import events as event_service
        from threads.services.workspaces import api_key_create, member_add, workspace_create

        hooks, event_service.after_append_hooks = event_service.after_append_hooks, []
        workspace, key = workspace_create(name=f"bench-{secrets.token_hex(4)}")
        print(f"building {args.threads:,} threads and a {args.events:,}-event thread …", flush=True)
        started = time.perf_counter()
        pages.build_threads(workspace, args.threads)
        long = pages.build_long_thread(workspace, args.events)
        build_seconds = time.perf_counter() - started
        event_service.after_append_hooks = hooks
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        operator = member_add(workspace=workspace, username="bench-operator", role="operator")
        keys = [key] + [
            api_key_create(workspace=workspace, name=f"agent-{i}") for i in range(1, AGENTS)
        ]
        targets = [long.pk] + list(
            Thread.objects.filter(workspace=workspace)
            .exclude(pk=long.pk)
            .order_by("external_id")
            .values_list("pk", flat=True)[: AGENTS - 1]
        )
        work = [(k, str(t)) for k, t in zip(keys, targets, strict=True)]
        with (
            psycopg.connect(dsn, autocommit=True) as p,
            psycopg.connect(replica_dsn, autocommit=True) as r,
        ):
            caught_up(p, r)
            version = p.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        by_side = clients(operator)
        urls = page_urls(long)
        events_before = Event.objects.filter(thread__workspace=workspace).count()
        server_env = {
            "CTXADMIN_API_RATE": ingest_server.RATE,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "CTXADMIN_REPLICA_URL": "",  # the API reads the primary anyway
        }
        connections.close_all()  # nothing of ours crosses the fork
        with ingest_server.gunicorn(server_env) as (port, _master):
            context = multiprocessing.get_context("fork")
            stop, queue = context.Event(), context.Queue()
            agents = context.Process(
                target=agents_process, args=(port, work, (dsn, replica_dsn), stop, queue)
            )
            agents.start()
            time.sleep(args.ramp)
            load_before = os.getloadavg()[0]
            before = fallbacks()
            measured_from = time.perf_counter()
            try:
                results = measure(by_side, urls, args.warmup, args.requests)
            finally:
                measured_seconds = time.perf_counter() - measured_from
                after = fallbacks()
                load_after = os.getloadavg()[0]
                stop.set()
                done = queue.get(timeout=120)
                agents.join(timeout=60)
        errors = [a["error"] for a in done["agents"] if "error" in a]
        if errors:
            raise SystemExit(f"an agent's append was refused: {errors[0]}")
        latencies = [x * 1000 for a in done["agents"] for x in a["latencies"]]
        appended = Event.objects.filter(thread__workspace=workspace).count() - events_before
        connections.close_all()
    shutil.rmtree(var_dir, ignore_errors=True)
    return {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "postgresql": version,
        "data": {
            "threads": args.threads + 1,
            "events": events_before,
            "long_thread_events": args.events,
            "build_seconds": round(build_seconds, 1),
        },
        "requests": args.requests,
        "warmup": args.warmup,
        "order": "alternating request by request; the first side swaps every round",
        "agents": {
            "count": AGENTS,
            "path": "HTTP to gunicorn (" + " ".join(ingest_server.SERVER_ARGS) + ")",
            "events_per_request": 4,
            "requests": len(latencies),
            "events_appended": appended,
            "events_per_s": round(appended / done["seconds"], 1),
            "append_p50_ms": round(pages.percentile(latencies, 0.5), 1),
            "append_p95_ms": round(pages.percentile(latencies, 0.95), 1),
        },
        "lag": lag_summary(done["lag"]),
        "fallbacks": {
            "replica_pages": args.requests * len(urls),
            **{reason: int(after[reason] - before[reason]) for reason in after},
        },
        "measured_seconds": round(measured_seconds, 1),
        "environment": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_average_1min": {"before": load_before, "after": load_after},
        },
        "pages": results,
    }


# --- Report -----------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    data, agents, lag, env = result["data"], result["agents"], result["lag"], result["environment"]
    fb = result["fallbacks"]

    def lag_text(key: str, unit: str, scale: float = 1.0) -> str:
        s = lag[key]
        if not s:
            return "not seen"
        return ", ".join(f"{q} {s[q] * scale:.3g} {unit}" for q in ("p50", "p95", "max"))

    lines = [
        f"Measured {result['measured_at']} on PostgreSQL {result['postgresql']} (primary and "
        f"replica on this machine), {env['cpus']} cores shared with other work, Python "
        f"{env['python']}: {data['threads']:,} threads, {data['events']:,} events before the "
        f"agents started, the timeline's thread {data['long_thread_events']:,} events; "
        f"{result['requests']} requests per page and side after {result['warmup']} warm-ups, "
        f"the sides alternating request by request, over {result['measured_seconds']} s; load "
        f"average {env['load_average_1min']['before']:.1f} → "
        f"{env['load_average_1min']['after']:.1f}.",
        "",
        f"Agents: {agents['count']} appending continuously through {agents['path']}, "
        f"{agents['events_per_request']} events a request: {agents['events_appended']:,} events "
        f"({agents['events_per_s']:,} ev/s), append p50 {agents['append_p50_ms']} ms, p95 "
        f"{agents['append_p95_ms']} ms.",
        "",
        f"Replica lag over {lag['samples']} samples: on the replica (the router's measure) "
        f"{lag_text('replica_lag_s', 's')}; `replay_lag` on the primary "
        f"{lag_text('replay_lag_s', 's')}; WAL not yet replayed "
        f"{lag_text('bytes_behind', 'kB', 1 / 1024)}. Fallbacks to the primary: "
        f"{fb['unavailable']} unavailable, {fb['lagging']} lagging, of {fb['replica_pages']} "
        f"replica-side pages.",
        "",
        "| page | replica p50 ms | replica p95 ms | primary p50 ms | primary p95 ms | "
        "p50 ratio | p95 ratio | SQL on the replica |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in result["pages"].items():
        rep, pri = r["replica"], r["primary"]
        share = rep["statements_on_replica"] / max(
            1, rep["statements_on_replica"] + rep["statements_on_primary"]
        )
        lines.append(
            f"| {label} | {rep['p50_ms']:.1f} | {rep['p95_ms']:.1f} | {pri['p50_ms']:.1f} | "
            f"{pri['p95_ms']:.1f} | {r['ratio_p50']:.2f}× | {r['ratio_p95']:.2f}× | "
            f"{share:.0%} |"
        )
    ratios = {q: [r[f"ratio_{q}"] for r in result["pages"].values()] for q in ("p50", "p95")}
    mean = {q: statistics.geometric_mean(v) for q, v in ratios.items()}
    lines.append(
        f"| all pages (geometric mean) | | | | | {mean['p50']:.2f}× | {mean['p95']:.2f}× | |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="an existing PostgreSQL primary on this machine")
    parser.add_argument("--threads", type=int, default=3000)
    parser.add_argument("--events", type=int, default=20_000, help="the timeline thread's")
    parser.add_argument("--requests", type=int, default=100, help="per page and side")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--ramp", type=float, default=3.0, help="seconds of appends first")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true", help="DEBUG on, no collectstatic: a test")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args()

    if args.dsn:
        result = run(args, args.dsn)
    else:
        with ingest.throwaway_cluster() as dsn:
            result = run(args, dsn)
    text = table(result)
    print()
    print(text)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {args.results}")
    if not (args.no_docs or args.smoke):
        replace_block(DOCS, f"{BEGIN}\n{text}\n{END}", BEGIN, END)
        print(f"wrote {DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
