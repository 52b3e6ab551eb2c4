"""Retention on a 10,000-thread PostgreSQL database: the dry run and the run, side by side.

    uv run python bench/retention.py                      # 10,000 threads (throwaway PG 15)
    uv run python bench/retention.py --threads 2000       # smaller
    uv run python bench/retention.py --dsn postgres://user@host:5432/db   # an existing database

One workspace of `--threads` threads of `--events` events each (the conversation units of
bench/pages.py, numbered, bound, hashed and token-counted by the append service itself and
COPYed many threads per transaction, as bench/scale.py builds them), each with `--checkpoints`
checkpoints at evenly spaced cursors. Half the threads (every other one) were last active 400
days ago; the workspace keeps threads 365 days and `--keep` checkpoints per thread. Then, timed:

- the dry run (`retention_apply(dry_run=True)`, what `apply_retention --dry-run` runs): the
  threads and checkpoints it lists and the bytes it estimates (the rows' `pg_column_size`);
- the run (`retention_apply()`, what `apply_retention` and the beat task run), in batches of
  `--batch` threads a transaction: what it deleted and the bytes it estimated;
- the database's size (`pg_database_size`) before the run, after it, after `VACUUM`, and after
  `VACUUM FULL` (what gives the space back to the file system);
- that every deleted thread left a tombstone that verifies, and that what stays is untouched.

Prints a table, writes bench/results/retention.json and the table into docs/benchmarks.md
("Retention — `bench/retention.py`"). tests/services/test_bench_retention.py runs it tiny.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import throwaway_cluster  # noqa: E402
from pages import setup_django  # noqa: E402
from scale import flush, new_thread, thread_writes, units_for  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "retention.json"
DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Retention — `bench/retention.py`"
BEGIN, END = "<!-- retention:begin -->", "<!-- retention:end -->"
RETENTION_DAYS = 365
IDLE_DAYS = 400
THREADS_PER_COPY = 500


def build(workspace: Any, threads: int, events: int, checkpoints: int) -> dict[str, Any]:
    """The workspace's threads, their events and checkpoints; every other thread idle."""
    from django.db import transaction
    from django.utils import timezone

    from threads.models import Checkpoint, Thread

    started = time.perf_counter()
    unit = 0
    batch: list[Any] = []
    made: list[Any] = []

    def write(batch: list[Any]) -> None:
        flush(batch)
        rows = []
        for thread, _, _ in batch:
            for n in range(1, checkpoints + 1):
                cursor = max(1, thread.last_seq * n // checkpoints)
                rows.append(
                    Checkpoint(
                        thread_id=thread.pk,
                        cursor=cursor,
                        chain_hash=thread.chain_head,
                        checksum="0" * 64,
                        label=f"bench {n}",
                    )
                )
        with transaction.atomic():
            Checkpoint.objects.bulk_create(rows, batch_size=2000)

    for number in range(threads):
        thread = new_thread(workspace.pk, f"ticket-{number:05d}")
        batch.append(thread_writes(thread, events, unit))
        made.append(thread)
        unit += units_for(events)
        if len(batch) >= THREADS_PER_COPY:
            write(batch)
            batch = []
    if batch:
        write(batch)
    idle = [t.pk for number, t in enumerate(made) if number % 2 == 0]
    Thread.objects.filter(pk__in=idle).update(updated_at=timezone.now() - timedelta(days=IDLE_DAYS))
    return {
        "threads": threads,
        "idle_threads": len(idle),
        "events": sum(t.last_seq for t in made),
        "checkpoints": threads * checkpoints,
        "build_seconds": round(time.perf_counter() - started, 1),
    }


def database_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size")
        else:
            cursor.execute("SELECT pg_database_size(current_database())")
        return int(cursor.fetchone()[0])


def vacuum(full: bool) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute("VACUUM")
        else:
            cursor.execute("VACUUM (FULL, ANALYZE)" if full else "VACUUM (ANALYZE)")


def measure(workspace: Any, batch: int, *, vacuums: bool = True) -> dict[str, Any]:
    """The dry run, then the run, on the built workspace; sizes around them."""
    from threads.models import Checkpoint, Event, Thread, ThreadTombstone
    from threads.selectors.retention import tombstone_check
    from threads.services.retention import retention_apply

    started = time.perf_counter()
    [dry] = retention_apply(workspace_name=workspace.name, dry_run=True, batch_size=batch)
    dry_seconds = time.perf_counter() - started
    size_before = database_bytes()
    started = time.perf_counter()
    [done] = retention_apply(workspace_name=workspace.name, batch_size=batch)
    run_seconds = time.perf_counter() - started
    sizes = {"before": size_before, "after_run": database_bytes()}
    if vacuums:
        vacuum(full=False)
        sizes["after_vacuum"] = database_bytes()
        vacuum(full=True)
        sizes["after_vacuum_full"] = database_bytes()
    tombstones = list(ThreadTombstone.objects.filter(workspace=workspace))
    return {
        "dry_run": {
            "seconds": round(dry_seconds, 2),
            "threads": len(dry.threads),
            "checkpoints": dry.checkpoints.deleted,
            "bytes_estimated": dry.summary()["bytes"],
        },
        "run": {
            "seconds": round(run_seconds, 2),
            "threads": len(done.threads),
            "checkpoints": done.checkpoints.deleted,
            "bytes_estimated": done.summary()["bytes"],
            "rows": done.summary()["rows"],
        },
        "database_bytes": sizes,
        "left": {
            "threads": Thread.objects.filter(workspace=workspace).count(),
            "events": Event.objects.filter(thread__workspace=workspace).count(),
            "checkpoints": Checkpoint.objects.filter(thread__workspace=workspace).count(),
            "tombstones": len(tombstones),
            "tombstones_verifying": sum(tombstone_check(t) for t in tombstones),
        },
    }


def _mb(value: int) -> str:
    return f"{value / 1e6:,.1f} MB"


def table(result: dict[str, Any]) -> str:
    built, m = result["built"], result["measures"]
    dry, run, sizes, left = m["dry_run"], m["run"], m["database_bytes"], m["left"]
    lines = [
        f"Measured {result['measured_at']} on PostgreSQL {result['server_version']}, "
        f"{result['environment']['cpus']} CPUs (load {result['environment']['load_before']:.1f}); "
        f"`{result['command']}`.",
        "",
        f"Built: {built['threads']:,} threads ({built['idle_threads']:,} idle for {IDLE_DAYS} "
        f"days), {built['events']:,} events, {built['checkpoints']:,} checkpoints, in "
        f"{built['build_seconds']:,} s. Policy: {RETENTION_DAYS} days, keep "
        f"{result['keep']} checkpoints; batches of {result['batch']} threads.",
        "",
        "| | time | threads | checkpoints | bytes (row estimate) |",
        "|---|---:|---:|---:|---:|",
        f"| dry run | {dry['seconds']:.2f} s | {dry['threads']:,} | {dry['checkpoints']:,} "
        f"| {_mb(dry['bytes_estimated'])} |",
        f"| run | {run['seconds']:.2f} s | {run['threads']:,} | {run['checkpoints']:,} "
        f"| {_mb(run['bytes_estimated'])} |",
        "",
        "| database size | bytes |",
        "|---|---:|",
        *(f"| {name.replace('_', ' ')} | {_mb(value)} |" for name, value in sizes.items()),
        "",
        f"Left: {left['threads']:,} threads, {left['events']:,} events, "
        f"{left['checkpoints']:,} checkpoints; {left['tombstones']:,} tombstones, "
        f"{left['tombstones_verifying']:,} of them verifying.",
    ]
    return "\n".join(lines)


def write_docs(text: str) -> None:
    existing = DOCS.read_text()
    if BEGIN not in existing:
        existing = existing.rstrip("\n") + f"\n\n{SECTION}\n\n### Latest run\n\n{BEGIN}\n{END}\n"
    head, _, rest = existing.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOCS.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def run(args: argparse.Namespace, dsn: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ctxadmin-bench-var-") as var_dir:
        setup_django(dsn, var_dir)
        from django.db import connection

        from threads.models import Workspace
        from threads.services.workspaces import workspace_create

        workspace, _ = workspace_create(name=f"retention-{os.getpid()}")
        Workspace.objects.filter(pk=workspace.pk).update(
            retention_days=RETENTION_DAYS, keep_checkpoints=args.keep
        )
        workspace.refresh_from_db()
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = cursor.fetchone()[0]
        print(f"building {args.threads:,} threads …", flush=True)
        built = build(workspace, args.threads, args.events, args.checkpoints)
        vacuum(full=False)
        print(f"  built: {built}", flush=True)
        measures = measure(workspace, args.batch)
        result = {
            "command": "uv run python bench/retention.py "
            + " ".join(
                f"--{k} {getattr(args, k)}"
                for k in ("threads", "events", "checkpoints", "keep", "batch")
            ),
            "server_version": version,
            "keep": args.keep,
            "batch": args.batch,
            "built": built,
            "measures": measures,
            "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "environment": {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0]},
        }
        text = table(result)
        print()
        print(text, flush=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2, default=str) + "\n")
        if not args.no_docs:
            write_docs(text)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=12, help="events per thread")
    parser.add_argument("--checkpoints", type=int, default=5, help="checkpoints per thread")
    parser.add_argument("--keep", type=int, default=2, help="the workspace's keep_checkpoints")
    parser.add_argument("--batch", type=int, default=100, help="threads per transaction")
    parser.add_argument("--dsn", help="an existing PostgreSQL database (default: a throwaway one)")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/benchmarks.md")
    args = parser.parse_args()
    if args.dsn:
        run(args, args.dsn)
        return
    with throwaway_cluster() as dsn:
        run(args, dsn)


if __name__ == "__main__":
    main()
