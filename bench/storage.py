"""Storage of a LangGraph run: LangGraph's PostgresSaver next to CtxadminSaver, on one PostgreSQL.

    uv run python bench/storage.py                 # starts its own throwaway PostgreSQL 15
    uv run python bench/storage.py --steps 200 --tool-bytes 2000

The same 200-step tool-heavy agent run (a scripted fake chat model and a real ToolNode: each
step calls a tool that answers 2 kB of varied text, as a file read in a code review would) is
checkpointed twice, in two databases of one cluster:
- by `langgraph.checkpoint.postgres.PostgresSaver` (its own tables), in-process over psycopg;
- by `ctxadmin_client.langgraph.CtxadminSaver`, over ctxadmin's HTTP API served by gunicorn with
  2 workers of 4 threads (gthread, keep-alive: the documented deployment), the database being
  ctxadmin's, migrated.

Measured: the bytes each side's tables grew by (`pg_total_relation_size`: heap, TOAST and
indexes) — for ctxadmin every table of its schema, so events, checkpoints, the LangGraph tables,
summaries, side effects, audit — after ctxadmin's folds ran (in-process, as a worker would); the
median time of `get_tuple` for the latest state (20 reads); and steps per second of the whole
run. For ctxadmin also the HTTP requests per step. Prints a table, writes
bench/results/storage.json and the table into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from docblock import replace_block  # noqa: E402
from ingest import throwaway_cluster  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "storage.json"
DOCS = ROOT / "docs" / "benchmarks.md"
# (floor, at most?): bytes and restores at most, steps per second at least (issue #26's table)
FLOORS = {
    "bytes": (0.05, True),
    "steps_async": (1.0, False),
    "steps_sync": (0.7, False),
    "restore_warm": (0.5, True),
    "restore_cold": (1.5, True),
}
VOCAB = ["def", "return", "self", "request", "context", "render", "import", "class", "if", "for"]
RESTORES = 20


def _read_file(out_bytes: int) -> Any:
    from langchain_core.tools import tool

    @tool
    def read_file(path: str) -> str:
        """Read a file of the pull request under review."""
        # Varied text, as real files are: repetitive filler would let compression hide growth.
        rnd = random.Random(path)
        words = [rnd.choice(VOCAB) + str(rnd.randrange(1000)) for _ in range(out_bytes // 6)]
        return " ".join(words)[:out_bytes]

    return read_file


def build_graph(checkpointer: Any, steps: int, out_bytes: int) -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    class ToolFake(GenericFakeChatModel):
        def bind_tools(self, tools: Sequence[Any], **kw: Any) -> ToolFake:  # type: ignore[override]
            return self

    def script() -> Iterator[AIMessage]:
        for i in range(steps):
            yield AIMessage(
                content=f"Reading file {i}.",
                tool_calls=[
                    {
                        "name": "read_file",
                        "args": {"path": f"src/module_{i}.py"},
                        "id": f"call_{i}",
                        "type": "tool_call",
                    }
                ],
            )
        yield AIMessage(content="Review complete: 3 issues found.")

    model = ToolFake(messages=script())

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([_read_file(out_bytes)]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def run_graph(
    checkpointer: Any, steps: int, out_bytes: int, durability: str = "async"
) -> dict[str, Any]:
    """One run of the agent under LangGraph's `durability` ("async": its default, the loop
    does not wait for a put; "sync": every put acknowledged before the next step); its
    config, seconds, messages and their raw bytes."""
    from langchain_core.messages import HumanMessage

    app = build_graph(checkpointer, steps, out_bytes)
    config = {
        "configurable": {"thread_id": "review-" + uuid.uuid4().hex[:6]},
        "recursion_limit": 10 * steps + 50,
    }
    start = time.perf_counter()
    out = app.invoke({"messages": [HumanMessage("Review PR #1842")]}, config, durability=durability)
    seconds = time.perf_counter() - start
    messages = out["messages"]
    raw = sum(len(json.dumps(m.model_dump(), default=str)) for m in messages)
    return {"config": config, "seconds": seconds, "messages": len(messages), "raw_bytes": raw}


def restore_ms(checkpointer: Any, config: dict[str, Any]) -> list[float]:
    """Warm restores: the saver that wrote the head reads it back, after one warm-up."""
    checkpointer.get_tuple(config)  # warm
    times = []
    for _ in range(RESTORES):
        start = time.perf_counter()
        found = checkpointer.get_tuple(config)
        times.append((time.perf_counter() - start) * 1000)
        assert found is not None
    return times


COLD_RESTORES = 10


def cold_restore_ms(new_saver: Any, config: dict[str, Any]) -> list[float]:
    """Cold restores: each a new saver (a new connection, empty caches), as a new process
    would make, and its first `get_tuple`; the saver's making and connecting counted."""
    times = []
    for _ in range(COLD_RESTORES):
        start = time.perf_counter()
        with new_saver() as saver:
            found = saver.get_tuple(config)
            times.append((time.perf_counter() - start) * 1000)
        assert found is not None
    return times


def table_sizes(conn: Any) -> dict[str, int]:
    """pg_total_relation_size (heap, TOAST, indexes) of every table of the public schema."""
    rows = conn.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind = 'r'"
    ).fetchall()
    return {name: int(size) for name, size in rows}


SEARCH_INDEX = "threads_event_search"


def search_index_bytes(conn: Any) -> int:
    """The message-search index's own size (docs/search.md, "Message search"): part of the event
    table's."""
    row = conn.execute(
        "SELECT coalesce(pg_relation_size(to_regclass(%s)), 0)", [SEARCH_INDEX]
    ).fetchone()
    return int(row[0])


def grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        name: after[name] - before.get(name, 0)
        for name in sorted(after)
        if after[name] != before.get(name, 0)
    }


def _database(dsn: str, name: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return dsn.rsplit("/", 1)[0] + f"/{name}"


# --- PostgresSaver ---------------------------------------------------------------------------


def postgres_side(
    dsn: str, steps: int, out_bytes: int, durabilities: Sequence[str]
) -> dict[str, Any]:
    import contextlib

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    runs: dict[str, Any] = {}
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        with psycopg.connect(dsn, autocommit=True) as conn:
            before = table_sizes(conn)
            run = run_graph(saver, steps, out_bytes, durabilities[0])
            conn.execute("ANALYZE")
            sizes = grown(before, table_sizes(conn))
        runs[durabilities[0]] = run["seconds"]
        for durability in durabilities[1:]:
            runs[durability] = run_graph(saver, steps, out_bytes, durability)["seconds"]
        restores = restore_ms(saver, run["config"])
        checkpoints = len(list(saver.list(run["config"])))

    @contextlib.contextmanager
    def new_saver() -> Iterator[Any]:
        with PostgresSaver.from_conn_string(dsn) as cold:
            yield cold

    cold = cold_restore_ms(new_saver, run["config"])
    return {
        **run,
        "seconds_by_durability": runs,
        "tables": sizes,
        "restore_ms": restores,
        "cold_restore_ms": cold,
        "checkpoints": checkpoints,
    }


# --- ctxadmin --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _environment(dsn: str, var_dir: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "DJANGO_SETTINGS_MODULE": "ctxadmin.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(48),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "CTXADMIN_VAR_DIR": var_dir,
        # No API rate limit: a graph checkpointing every node makes more requests a minute
        # than the default 1200 per key (an operator sizes CTXADMIN_API_RATE for such agents).
        "CTXADMIN_API_RATE": "0",
    }
    env.pop("CELERY_BROKER_URL", None)
    return env


def _gunicorn(
    env: dict[str, str], port: int, profile_dir: str | None = None
) -> subprocess.Popen[bytes]:
    # With a profile folder, bench/gunicorn_profile.py (ctxadmin's config and its hooks)
    # cProfiles, in CPU time, the requests that carry X-Bench-Profile.
    config = (
        str(ROOT / "bench" / "gunicorn_profile.py")
        if profile_dir
        else "python:ctxadmin.gunicorn_conf"
    )
    if profile_dir:
        env = {**env, "CTXADMIN_BENCH_PROFILE_DIR": profile_dir}
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        config,
        "ctxadmin.wsgi",
        # The documented deployment (docs/operations.md): threaded workers keep connections.
        "--workers",
        "2",
        "--worker-class",
        "gthread",
        "--threads",
        "4",
        "--keep-alive",
        "5",
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                time.sleep(1.0)  # both workers booted
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("gunicorn did not start")


class CountingTransport:
    """An httpx transport that counts the requests it carries, and their time."""

    def __init__(self) -> None:
        from ctxadmin_client.langgraph import nodelay_transport

        # The transport CtxadminSaver.from_url uses (TCP_NODELAY), counted.
        self.inner = nodelay_transport()
        self.requests = 0
        self.seconds = 0.0
        self.by_kind: dict[str, list[float]] = {}
        self.profile = False

    def handle_request(self, request: Any) -> Any:
        if self.profile:
            request.headers["X-Bench-Profile"] = "1"
        start = time.perf_counter()
        response = self.inner.handle_request(request)
        response.read()
        took = time.perf_counter() - start
        self.seconds += took
        self.requests += 1
        path = request.url.path.rstrip("/")
        kind = "put" if path.endswith("/checkpoints") and request.method == "POST" else ""
        kind = kind or ("put_writes" if path.endswith("/writes") else "")
        kind = kind or ("batch" if path.endswith("/batch") else "get_tuple")
        self.by_kind.setdefault(kind, []).append(took * 1000)
        return response

    def close(self) -> None:
        self.inner.close()


def ctxadmin_side(
    dsn: str,
    var_dir: str,
    steps: int,
    out_bytes: int,
    durabilities: Sequence[str],
    profile_dir: str | None = None,
) -> dict[str, Any]:
    import contextlib

    env = _environment(dsn, var_dir)
    os.environ.update(env)
    import django

    django.setup()
    import psycopg
    from ctxadmin_client import Client
    from ctxadmin_client.langgraph import CtxadminSaver
    from django.core.management import call_command

    from threads.models import Thread
    from threads.services.folding import fold_run
    from threads.services.workspaces import workspace_create

    call_command("migrate", verbosity=0)
    _, key = workspace_create(name=f"bench-{secrets.token_hex(4)}")
    port = _free_port()
    server = _gunicorn(env, port, profile_dir)
    counting = CountingTransport()
    try:
        client = Client(
            f"http://127.0.0.1:{port}",
            key,
            timeout=60,
            transport=counting,  # type: ignore[arg-type]
        )
        saver = CtxadminSaver(client)
        # Warm both workers up (imports, token tables) on another thread, before measuring.
        run_graph(saver, 5, out_bytes)
        counting.requests, counting.seconds, counting.by_kind = 0, 0.0, {}
        with psycopg.connect(dsn, autocommit=True) as conn:
            before = table_sizes(conn)
            index_before = search_index_bytes(conn)
            counting.profile = profile_dir is not None
            run = run_graph(saver, steps, out_bytes, durabilities[0])
            counting.profile = False
            requests, http_seconds = counting.requests, counting.seconds
            by_kind = {
                kind: {"requests": len(ms), "median_ms": statistics.median(ms)}
                for kind, ms in counting.by_kind.items()
            }
            # Folds the appends asked for, run here as a worker would run them.
            thread = Thread.objects.get(external_id=run["config"]["configurable"]["thread_id"])
            folds = 0
            while fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "bench"}):
                folds += 1
                if folds > 50:
                    break
            conn.execute("ANALYZE")
            sizes = grown(before, table_sizes(conn))
            search_index = search_index_bytes(conn) - index_before
        runs = {durabilities[0]: run["seconds"]}
        for durability in durabilities[1:]:
            runs[durability] = run_graph(saver, steps, out_bytes, durability)["seconds"]
        counting.profile = profile_dir is not None  # the warm restores profiled too
        restores = restore_ms(saver, run["config"])
        counting.profile = False
        checkpoints = len(list(saver.list(run["config"])))

        @contextlib.contextmanager
        def new_saver() -> Iterator[Any]:
            from ctxadmin_client.langgraph import nodelay_transport

            cold = CtxadminSaver(
                Client(f"http://127.0.0.1:{port}", key, timeout=60, transport=nodelay_transport())
            )
            try:
                yield cold
            finally:
                cold.close()

        cold_restores = cold_restore_ms(new_saver, run["config"])
        limits = ceilings(
            f"http://127.0.0.1:{port}", key, saver, run["config"], profile_dir is not None
        )
        saver.close()
    finally:
        server.terminate()
        server.wait(20)
    return {
        **run,
        "tables": sizes,
        "search_index_bytes": search_index,
        "seconds_by_durability": runs,
        "restore_ms": restores,
        "cold_restore_ms": cold_restores,
        "checkpoints": checkpoints,
        "http_requests": requests,
        "http_seconds": http_seconds,
        "http_by_kind": by_kind,
        "folds": folds,
        "ceilings": limits,
    }


def ceilings(
    base_url: str, key: str, saver: Any, config: dict[str, Any], profile: bool = False
) -> dict[str, float]:
    """What bounds the floors from below, measured through the same gunicorn: the round trip of
    the cheapest authenticated request (a `get_tuple` of a thread that does not exist: the key
    checked, one query, a 404), and a restore split into its HTTP round trip (the server's work
    and the transfer, JSON parsed) and the client's decoding (LangChain messages rebuilt)."""
    import httpx
    from ctxadmin_client.langgraph import nodelay_transport

    thread_id = config["configurable"]["thread_id"]
    headers = {"Authorization": f"Bearer {key}"}
    path = "/api/v1/threads/{}/langgraph/checkpoints/latest/"
    whole = {"X-Bench-Profile": "1"} if profile else {}  # the whole restores, profiled too
    noop, fetch, decode = [], [], []
    with httpx.Client(base_url=base_url, headers=headers, transport=nodelay_transport()) as http:
        http.get(path.format("no-such-thread"))
        for _ in range(50):
            start = time.perf_counter()
            http.get(path.format("no-such-thread"))
            noop.append((time.perf_counter() - start) * 1000)
        for _ in range(RESTORES):
            start = time.perf_counter()
            answer = http.get(
                path.format(thread_id), params={"checkpoint_ns": ""}, headers=whole
            ).json()
            fetch.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            saver._tuple(answer)
            decode.append((time.perf_counter() - start) * 1000)
    return {
        "noop_ms": statistics.median(noop),
        "restore_fetch_ms": statistics.median(fetch),
        "restore_decode_ms": statistics.median(decode),
    }


# --- Report ----------------------------------------------------------------------------------


def _verdict(ratio: float, floor: float, at_most: bool) -> str:
    ok = ratio <= floor if at_most else ratio >= floor
    return "meets" if ok else "MISSES"


def table(results: dict[str, Any]) -> str:
    pg, ctx = results["postgres_saver"], results["ctxadmin"]
    c = results["comparisons"]
    search = ctx.get("search_index_bytes", 0)
    labels = {
        "bytes": ("bytes stored (tables, TOAST, indexes; search index included)", "{:,}"),
        "steps_async": ('steps per second, `durability="async"`', "{:.1f}"),
        "steps_sync": ('steps per second, `durability="sync"`', "{:.1f}"),
        "restore_warm": (
            f"restore, warm (`get_tuple` by the saver that wrote, median of {RESTORES})",
            "{:.1f} ms",
        ),
        "restore_cold": (
            f"restore, cold (a new saver and connection, median of {COLD_RESTORES})",
            "{:.1f} ms",
        ),
    }
    rows = [
        "| measure | CtxadminSaver | PostgresSaver | ratio | floor | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for name, (label, form) in labels.items():
        if name not in c:
            continue
        floor, at_most = FLOORS[name]
        ratio = c[name]["ratio"]
        rows.append(
            f"| {label} | {form.format(c[name]['ctxadmin'])} | {form.format(c[name]['postgres'])} "
            f"| {ratio:.3f}× | {'≤' if at_most else '≥'} {floor:.2f}× | "
            f"{_verdict(ratio, floor, at_most)} |"
        )
        if name == "bytes":
            rows.append(
                f"| of which the message-search index | {search:,} | — | "
                f"{search / pg['bytes']:.3f}× | | |"
            )
    return "\n".join(rows)


def tables_line(sizes: dict[str, int]) -> str:
    top = sorted(sizes.items(), key=lambda item: -item[1])
    return ", ".join(f"`{name}` {size / 1024:,.0f} kB" for name, size in top if size > 0)


def write_docs(results: dict[str, Any], rendered: str) -> None:
    begin, end = "<!-- storage:begin -->", "<!-- storage:end -->"
    env, pg, ctx = results["environment"], results["postgres_saver"], results["ctxadmin"]
    limits = ctx["ceilings"]
    first = results["durabilities"][0]
    pg_steps = pg["steps_per_s"][first]
    per_step = ctx["http_requests"] / results["steps"]
    ceiling_steps = 1000 / (per_step * limits["noop_ms"])
    ceiling_ratio = ceiling_steps / pg_steps
    search = ctx.get("search_index_bytes", 0)
    without = ctx["bytes"] - search
    block = (
        f"{begin}\n"
        f"Measured {results['measured_at']} on {env['cpus']} cores, PostgreSQL "
        f"{env['postgresql']}, Python {env['python']}, load average "
        f"{env['load_average']:.1f} at the end: {results['steps']} steps, "
        f"{results['tool_bytes']} bytes per tool answer, {pg['messages']} messages "
        f"({pg['raw_bytes']:,} bytes as JSON, each once); {pg['checkpoints']} checkpoints "
        f"on each side; ctxadmin's folds after the run: {ctx['folds']}.\n\n"
        f"{rendered}\n\n"
        f"- PostgresSaver's tables: {tables_line(pg['tables'])}.\n"
        f"- ctxadmin's tables: {tables_line(ctx['tables'])}. Of the event table's, the "
        f"message-search index ([Message search](search.md#message-search)) is "
        f"{search / 1024:,.0f} kB: without it "
        f"ctxadmin would store {without:,} bytes, {without / pg['bytes']:.3f}× PostgresSaver's.\n"
        f"- ctxadmin's `{first}` run: {ctx['http_requests']} HTTP requests "
        f"({ctx['http_requests'] / results['steps']:.1f} per step) whose round trips add up "
        f"to {ctx['http_seconds']:.1f} s over the {ctx['seconds']:.1f} s run (LangGraph puts "
        f"from background threads, so requests overlap); PostgresSaver's run took "
        f"{pg['seconds']:.1f} s. Requests by kind (count, median round trip): "
        + ", ".join(
            f"{kind} {v['requests']} × {v['median_ms']:.0f} ms"
            for kind, v in ctx["http_by_kind"].items()
        )
        + ".\n"
        f"- Ceilings, through the same gunicorn: the cheapest authenticated request (a 404 "
        f"`get_tuple`) takes {limits['noop_ms']:.1f} ms, so {per_step:.1f} requests a step "
        f"cannot go faster than {ceiling_steps:.1f} steps/s ({ceiling_ratio:.2f}× "
        f"PostgresSaver's {pg_steps:.1f}) even if the server did nothing; a full restore is "
        f"{limits['restore_fetch_ms']:.1f} ms of round trip (server, transfer, JSON) and "
        f"{limits['restore_decode_ms']:.1f} ms of decoding on the client (LangChain messages "
        f"rebuilt, as PostgresSaver also does in its {pg['restore_median_ms']:.1f} ms).\n"
        f"- Cold restores (ms, each a new saver): ctxadmin "
        f"{', '.join(f'{ms:.1f}' for ms in ctx['cold_restore_ms'])}; PostgresSaver "
        f"{', '.join(f'{ms:.1f}' for ms in pg['cold_restore_ms'])}.\n"
        f"{end}"
    )
    replace_block(DOCS, block, begin, end)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--tool-bytes", type=int, default=2000)
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    parser.add_argument(
        "--durability",
        choices=["async", "sync", "both"],
        default="both",
        help="LangGraph's durability of the runs (both: an async run, then a sync one)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile gunicorn's workers during the run (bench/results/storage-profile.txt)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxadmin-bench-var-") as var_dir:
        with throwaway_cluster() as dsn:
            run(args, dsn, var_dir)


def profiled_side(
    dsn: str, var_dir: str, steps: int, out_bytes: int, durabilities: Sequence[str]
) -> dict[str, Any]:
    """The ctxadmin side with gunicorn's workers under cProfile (CPU time): the figures of such
    a run are the profiler's, so they go to bench/results/storage-profile.txt and not the docs."""
    import io
    import pstats

    with tempfile.TemporaryDirectory(prefix="ctxadmin-bench-profile-") as folder:
        side = ctxadmin_side(dsn, var_dir, steps, out_bytes, durabilities, profile_dir=folder)
        files = sorted(Path(folder).glob("worker-*.prof"))
        if not files:
            raise SystemExit("the workers wrote no profile")
        text = io.StringIO()
        stats = pstats.Stats(str(files[0]), stream=text)
        for extra in files[1:]:
            stats.add(str(extra))
        stats.sort_stats("cumulative").print_stats(150)
        stats.sort_stats("tottime").print_stats(40)
    out = RESULTS.parent / "storage-profile.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.getvalue())
    print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)
    return side


def run(args: argparse.Namespace, dsn: str, var_dir: str) -> None:
    import psycopg

    with psycopg.connect(dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    langgraph_dsn = _database(dsn, "langgraph_bench")
    durabilities = ["async", "sync"] if args.durability == "both" else [args.durability]
    print("PostgresSaver …", file=sys.stderr)
    pg = postgres_side(langgraph_dsn, args.steps, args.tool_bytes, durabilities)
    print("CtxadminSaver …", file=sys.stderr)
    if args.profile:
        ctx = profiled_side(dsn, var_dir, args.steps, args.tool_bytes, durabilities)
    else:
        ctx = ctxadmin_side(dsn, var_dir, args.steps, args.tool_bytes, durabilities)
    measures: dict[str, tuple[float, float]] = {}
    for side in (pg, ctx):
        side["bytes"] = sum(side["tables"].values())
        side["restore_median_ms"] = statistics.median(side["restore_ms"])
        side["cold_restore_median_ms"] = statistics.median(side["cold_restore_ms"])
        side["steps_per_s"] = {
            d: args.steps / seconds for d, seconds in side["seconds_by_durability"].items()
        }
        side.pop("config")
    pairs = {
        "bytes": (ctx["bytes"], pg["bytes"]),
        **{f"steps_{d}": (ctx["steps_per_s"][d], pg["steps_per_s"][d]) for d in durabilities},
        "restore_warm": (ctx["restore_median_ms"], pg["restore_median_ms"]),
        "restore_cold": (ctx["cold_restore_median_ms"], pg["cold_restore_median_ms"]),
    }
    measures.update(pairs)
    results = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "steps": args.steps,
        "tool_bytes": args.tool_bytes,
        "durabilities": durabilities,
        "environment": {
            "cpus": os.cpu_count(),
            "postgresql": version,
            "python": sys.version.split()[0],
            "gunicorn_workers": 2,
            "gunicorn_threads": 4,
            "load_average": os.getloadavg()[0],
        },
        "postgres_saver": pg,
        "ctxadmin": ctx,
        "comparisons": {
            name: {"ctxadmin": mine, "postgres": theirs, "ratio": mine / theirs}
            for name, (mine, theirs) in measures.items()
        },
    }
    rendered = table(results)
    print(rendered)
    print("PostgresSaver tables:", tables_line(pg["tables"]))
    print("ctxadmin tables:", tables_line(ctx["tables"]))
    print(f"ctxadmin's search index: {ctx['search_index_bytes']:,} bytes")
    print(f"ctxadmin HTTP requests: {ctx['http_requests']} ({ctx['http_seconds']:.1f} s)")
    print("ctxadmin ceilings:", ctx["ceilings"], "by kind:", ctx["http_by_kind"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if not args.no_docs and not args.profile:  # a profiled run measures the profiler too
        write_docs(results, rendered)
        print(f"wrote {DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
