"""`/metrics`: Prometheus text format (docs/operations.md, docs/api.md, "Metrics — `GET /metrics`").

Protected: with CTXADMIN_METRICS_TOKEN set, only `Authorization: Bearer <token>` reads it;
unset, only a request made on this machine and not forwarded by a proxy does: its client
address (threads.client_address) is loopback and it carries no X-Forwarded-For, Forwarded or
X-Real-IP header, since behind a proxy on this machine every request arrives from loopback.

Each scrape builds a registry of its own: a collector that reads the database-derived
families (a fixed number of queries, docs/operations.md) and the process-local families (the
context latency histogram, the untrusted forwarded requests counter, the pages served from
the primary because the read replica was unavailable or lagging) —
this process's, or every process's through MultiProcessCollector when PROMETHEUS_MULTIPROC_DIR
is set.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from threads.client_address import UNTRUSTED_FORWARDED, is_local
from threads.database.replica import REPLICA_FALLBACKS
from threads.models import EventKind
from threads.selectors import metrics as figures
from threads.selectors import run_status_counts
from threads.services import metrics as counted


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"ctxadmin_{name}", doc, value=value)


class DatabaseCollector(Collector):
    """The families the database records, read on each scrape."""

    def collect(self) -> Iterator[Metric]:
        totals = figures.metric_totals()

        def total(name: str, labels: str = "") -> int:
            return totals.get((name, labels), 0)

        appended = CounterMetricFamily(
            "ctxadmin_events_appended",
            "Events appended to threads' logs, by kind.",
            labels=["kind"],
        )
        for kind in EventKind.values:
            appended.add_metric([kind], total(counted.EVENTS_APPENDED, f"kind={kind}"))
        yield appended
        yield _counter(
            "context_requests",
            "Working-context requests over the API (answered or refused budget_too_small).",
            total(counted.CONTEXT_REQUESTS),
        )
        yield _counter(
            "context_overflows",
            "Context requests refused with budget_too_small (422).",
            total(counted.CONTEXT_OVERFLOWS),
        )
        yield _counter(
            "context_needs_fold",
            "Context answers with needs_fold true (the capacity trigger).",
            total(counted.CONTEXT_NEEDS_FOLD),
        )
        folds = figures.fold_figures()
        by_outcome = CounterMetricFamily(
            "ctxadmin_folds",
            "Fold candidates prepared (started) and how they were decided.",
            labels=["outcome"],
        )
        for outcome in figures.FOLD_OUTCOMES:
            by_outcome.add_metric([outcome], folds["outcomes"][outcome])
        yield by_outcome
        rejections = CounterMetricFamily(
            "ctxadmin_fold_rejections",
            "Rejected fold candidates by failed check (a candidate may fail several).",
            labels=["check"],
        )
        for check, n in folds["rejections"].items():
            rejections.add_metric([check], n)
        yield rejections
        yield _counter(
            "second_tool_results",
            "Tool results stored for a call that already had one (flagged duplicate_of; the "
            "call's outcome stays its first result's).",
            total(counted.SECOND_RESULTS),
        )
        yield _counter(
            "events_with_secrets",
            "Events appended with a secret found in their text (a plugin's type and the field "
            "flag the event; the secret is never stored apart).",
            total(counted.EVENTS_WITH_SECRETS),
        )
        yield _counter(
            "cas_conflicts",
            "Commits that lost the compare-and-swap on the thread head (candidate discarded).",
            total(counted.CAS_CONFLICTS),
        )
        yield _counter(
            "prepared_recovered",
            "Prepared versions whose worker died, decided by the recovery sweep.",
            total(counted.PREPARED_RECOVERED),
        )
        yield _counter(
            "tokens_replaced",
            "Event tokens covered by committed folds.",
            folds["tokens_replaced"],
        )
        yield _counter(
            "summary_tokens",
            "Tokens of the summaries of committed folds.",
            folds["summary_tokens"],
        )
        yield _counter(
            "verify_runs", "Integrity checks of a thread's chain.", total(counted.VERIFY_RUNS)
        )
        yield GaugeMetricFamily(
            "ctxadmin_chain_breaks",
            "Threads whose chain the last integrity check found broken.",
            value=figures.chain_breaks(),
        )
        effects = GaugeMetricFamily(
            "ctxadmin_side_effects", "Side effects by status, now.", labels=["status"]
        )
        for status, n in figures.side_effect_counts().items():
            effects.add_metric([status], n)
        yield effects
        by_run_status = GaugeMetricFamily(
            "ctxadmin_threads",
            'Threads by run status, now (docs/dashboard.md, "Run status").',
            labels=["run_status"],
        )
        for run_status, n in run_status_counts().items():
            by_run_status.add_metric([run_status], n)
        yield by_run_status
        approvals = figures.approval_figures()
        yield GaugeMetricFamily(
            "ctxadmin_approvals_pending",
            "Approval requests waiting for a decision.",
            value=approvals["pending"],
        )
        oldest = approvals["oldest"]
        yield GaugeMetricFamily(
            "ctxadmin_approval_oldest_pending_seconds",
            "Age of the oldest pending approval request (0 when none).",
            value=(timezone.now() - oldest).total_seconds() if oldest is not None else 0,
        )


class _ProcessFamilies(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from counted.CONTEXT_SECONDS.collect()
        yield from UNTRUSTED_FORWARDED.collect()
        yield from REPLICA_FALLBACKS.collect()


def metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ProcessFamilies())
    return registry


def metrics_allowed(request: HttpRequest) -> bool:
    token = settings.CTXADMIN_METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        # The scheme's name is case-insensitive (RFC 9110, section 11.1), as on the API.
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), token.encode()
        )
    return is_local(request)


def metrics(request: HttpRequest) -> Any:
    if request.method not in ("GET", "HEAD"):
        # Plain text like every answer here (docs/api.md, "Metrics — `GET /metrics`"), not the
        # dashboard's 405 page.
        refused = HttpResponse(
            "metrics: only GET is allowed\n", status=405, content_type="text/plain; charset=utf-8"
        )
        refused["Allow"] = "GET, HEAD"
        return refused
    if not metrics_allowed(request):
        answer = HttpResponse(
            "metrics: a Bearer token, or a loopback request no proxy forwarded, is required\n",
            status=401 if settings.CTXADMIN_METRICS_TOKEN else 403,
            content_type="text/plain",
        )
        if settings.CTXADMIN_METRICS_TOKEN:
            answer["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return answer
    return HttpResponse(generate_latest(metrics_registry()), content_type=CONTENT_TYPE_LATEST)
