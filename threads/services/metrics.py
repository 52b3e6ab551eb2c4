"""What ctxadmin counts for /metrics and the Operations page (docs/operations.md).

Totals the database does not otherwise record (events appended by kind, compare-and-swap
conflicts, recoveries, verify runs, context requests) are `MetricCounter` rows, added to by one
UPSERT (`value = value + n`) inside the transaction of the write they count: they are exact
whatever the number of gunicorn and Celery processes, and survive restarts, with no shared
directory. A total is sharded by thread so writers on different threads never wait on one row.

Only the context request latency histogram is process-local (prometheus-client, multiprocess
mode when PROMETHEUS_MULTIPROC_DIR is set): timings are not worth a write of their own, and the
Operations page reads its percentiles from `ContextRequestLog` rows instead.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from prometheus_client import Histogram

from threads.domain.errors import BudgetTooSmall
from threads.models import ContextRequestLog, MetricCounter, Thread
from threads.services.event_rows import Statement

__all__ = [
    "CAS_CONFLICTS",
    "CONTEXT_NEEDS_FOLD",
    "CONTEXT_OVERFLOWS",
    "CONTEXT_REQUESTS",
    "CONTEXT_SECONDS",
    "EVENTS_APPENDED",
    "EVENTS_WITH_SECRETS",
    "PREPARED_RECOVERED",
    "SECOND_RESULTS",
    "VERIFY_RUNS",
    "context_log_prune",
    "context_request_observed",
    "events_appended_statements",
    "metric_statements",
    "metric_add",
]

EVENTS_APPENDED = "events_appended"
CAS_CONFLICTS = "cas_conflicts"
PREPARED_RECOVERED = "prepared_recovered"
VERIFY_RUNS = "verify_runs"
CONTEXT_REQUESTS = "context_requests"
CONTEXT_OVERFLOWS = "context_overflows"
CONTEXT_NEEDS_FOLD = "context_needs_fold"
# Tool results stored for a call that already had one (flagged `duplicate_of`).
SECOND_RESULTS = "second_tool_results"
# Events appended with a secret found in their text (docs/event-log.md, "Secrets at ingest").
EVENTS_WITH_SECRETS = "events_with_secrets"

SHARDS = 16

# Registered with no registry: /metrics collects it itself, or through MultiProcessCollector.
CONTEXT_SECONDS = Histogram(
    "ctxadmin_context_request_seconds",
    "Time to answer a working-context request over the API (this process, or all processes "
    "sharing PROMETHEUS_MULTIPROC_DIR).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=None,
)


def _shard(thread_id: Any) -> int:
    """The thread's shard: one thread's writes, already serialised by its row lock, always
    land on the same row; other threads' mostly on others."""
    if thread_id is None:
        return 0
    return uuid.UUID(str(thread_id)).int % SHARDS


def metric_statements(
    counts: Iterable[tuple[str, str, int]], *, thread_id: Any = None
) -> list[Statement]:
    """The UPSERT that adds (name, labels, n) each to the running totals, for a caller that
    runs it in its own batch of statements (the append path, in its one round trip).

    Keys in sorted order, so that two transactions adding to the same rows lock them in the
    same order and never deadlock.
    """
    totals: Counter[tuple[str, str]] = Counter()
    for name, labels, n in counts:
        totals[(name, labels)] += n
    rows = sorted((key, n) for key, n in totals.items() if n)
    if not rows:
        return []
    shard = _shard(thread_id)
    table = connection.ops.quote_name(MetricCounter._meta.db_table)
    sql = (
        f"INSERT INTO {table} (name, labels, shard, value) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (name, labels, shard) "
        f"DO UPDATE SET value = {table}.value + EXCLUDED.value"
    )
    return [(sql, [(name, labels, shard, n) for (name, labels), n in rows])]


def metric_add(counts: Iterable[tuple[str, str, int]], *, thread_id: Any = None) -> None:
    """Add to running totals, in the caller's transaction."""
    with connection.cursor() as cursor:
        for sql, params in metric_statements(counts, thread_id=thread_id):
            cursor.executemany(sql, params)


def events_appended_statements(
    thread: Thread, kinds: Iterable[str], *, second_results: int = 0, with_secrets: int = 0
) -> list[Statement]:
    """Count appended events by kind, and the second results and the events with a secret
    among them, inside the append's transaction (under the thread lock)."""
    counts = [(EVENTS_APPENDED, f"kind={kind}", 1) for kind in kinds]
    counts.append((SECOND_RESULTS, "", second_results))
    counts.append((EVENTS_WITH_SECRETS, "", with_secrets))
    return metric_statements(counts, thread_id=thread.pk)


@dataclass
class ContextRequestSeen:
    answer: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@contextmanager
def context_request_observed(*, thread: Thread) -> Iterator[ContextRequestSeen]:
    """Time one working-context request and record it: the counters (requests, overflows,
    needs_fold), one `ContextRequestLog` row and the latency histogram. Set `.answer` to the
    context served; a `BudgetTooSmall` raised inside counts as an overflow and goes on."""
    seen = ContextRequestSeen()
    started = time.perf_counter()
    overflow = False
    try:
        yield seen
    except BudgetTooSmall as refused:
        overflow = True
        # The refusal's numbers: the history it had to fit, and what was available.
        fields = refused.fields or {}
        seen.extra = {"used": fields.get("history", 0), "available": fields.get("available", 0)}
        raise
    finally:
        elapsed = time.perf_counter() - started
        answer = seen.answer
        if overflow or answer is not None:
            CONTEXT_SECONDS.observe(elapsed)
            budget = (answer or {}).get("budget", seen.extra)
            needs_fold = bool((answer or {}).get("needs_fold"))
            # A transaction of its own unless the caller holds one: its commit need not
            # wait for the disk (_telemetry_commit).
            asynchronous = not connection.in_atomic_block
            with transaction.atomic():
                if asynchronous:
                    _telemetry_commit()
                metric_add(
                    [
                        (CONTEXT_REQUESTS, "", 1),
                        (CONTEXT_OVERFLOWS, "", int(overflow)),
                        (CONTEXT_NEEDS_FOLD, "", int(needs_fold)),
                    ],
                    thread_id=thread.pk,
                )
                ContextRequestLog.objects.create(
                    workspace_id=thread.workspace_id,
                    thread=thread,
                    at=timezone.now(),
                    latency_ms=elapsed * 1000,
                    used=int(budget.get("used", 0)),
                    available=int(budget.get("available", 0)),
                    overflow=overflow,
                    needs_fold=needs_fold,
                )


def _telemetry_commit() -> None:
    """Let the current transaction commit without waiting for its WAL to reach the disk
    (PostgreSQL's `synchronous_commit = off`, for this transaction only). For the record of a
    context request, which the agent's read does not need: a commit that waits for the disk's
    flush made one context request in 25 take 100 ms to 2 s on a busy disk (docs/scale.md,
    "What one database holds"). The row is visible to every reader at once; a crash of the database
    server may lose the last fraction of a second of these records, never anything else. SQLite in
    WAL mode does not flush at commit anyway."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")


def context_log_prune(*, older_than: timedelta | None = None) -> int:
    """Delete context request rows older than CTXADMIN_CONTEXT_LOG_DAYS; return how many."""
    keep = (
        older_than if older_than is not None else timedelta(days=settings.CTXADMIN_CONTEXT_LOG_DAYS)
    )
    deleted, _ = ContextRequestLog.objects.filter(at__lt=timezone.now() - keep).delete()
    return deleted
