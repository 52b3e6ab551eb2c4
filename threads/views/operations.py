"""The Operations page (docs/operations.md): the figures /metrics gives, over time, from the
database, so it needs no Prometheus server. Across the person's workspaces (operator and up);
the last 24 hours in hourly buckets, `?hours=` up to 7 days."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from threads import selectors
from threads.client_address import came_through_proxy
from threads.domain.run_status import LABELS as RUN_STATUS_LABELS
from threads.domain.timeseries import Buckets, counts, levels, percentile, ratio
from threads.models import Role
from threads.selectors import metrics as figures
from threads.views.charts import Series, bar_chart, line_chart, starting_at_first
from threads.views.common import HtmxHttpRequest, can, roles

DEFAULT_HOURS, MAX_HOURS = 24, 7 * 24


def _now() -> datetime:
    return timezone.now()


def _hours(request: HtmxHttpRequest) -> int:
    try:
        hours = int(request.GET.get("hours", DEFAULT_HOURS))
    except ValueError:
        hours = DEFAULT_HOURS
    return min(max(hours, 1), MAX_HOURS)


def _ms(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def _pct(value: float | None) -> str:
    return f"{100 * value:.1f}%" if value is not None else "–"


def operations_figures(*, workspace_ids: Any, buckets: Buckets) -> dict[str, Any]:
    """Every series of the page, per bucket: five queries whatever the number of buckets."""
    since = buckets.start
    folds = figures.fold_rows(workspace_ids=workspace_ids, since=since)
    decided = {
        outcome: counts(buckets, (r["decided_at"] for r in folds if r["outcome"] == outcome))
        for outcome in ("committed", "rejected", "discarded")
    }
    started = counts(buckets, (r["created_at"] for r in folds))
    checks = sorted({c for r in folds for c in r["checks"]})
    by_check = {
        check: counts(buckets, (r["decided_at"] for r in folds if check in r["checks"]))
        for check in checks
    }
    requests = figures.context_request_rows(workspace_ids=workspace_ids, since=since)
    per_bucket: list[list[tuple[Any, ...]]] = [[] for _ in range(buckets.count)]
    for row in requests:
        i = buckets.index(row[0])
        if i is not None:
            per_bucket[i].append(row)
    secrets = counts(buckets, figures.secret_event_times(workspace_ids=workspace_ids, since=since))
    unknown_spans = figures.unknown_side_effect_spans(workspace_ids=workspace_ids, since=since)
    pending_spans = figures.approval_spans(workspace_ids=workspace_ids, since=since)
    unknown = levels(buckets, unknown_spans)
    pending = levels(buckets, pending_spans)
    ends = buckets.ends()
    began = {
        # Whether anything the level counts had begun by each bucket's end: the chart's line
        # starts there (starting_at_first), the table keeps its zeros.
        name: [any(b < end for b, _ in spans) for end in ends]
        for name, spans in (("unknown", unknown_spans), ("pending", pending_spans))
    }
    rows = []
    for i, start in enumerate(buckets.starts()):
        done = decided["committed"][i] + decided["rejected"][i] + decided["discarded"][i]
        sample = per_bucket[i]
        overflows = sum(1 for r in sample if r[2])
        rows.append(
            {
                "start": start,
                "started": started[i],
                "committed": decided["committed"][i],
                "rejected": decided["rejected"][i],
                "discarded": decided["discarded"][i],
                "rejection_rate": ratio(decided["rejected"][i], done),
                "rejection_pct": _pct(ratio(decided["rejected"][i], done)),
                "checks": [by_check[c][i] for c in checks],
                "requests": len(sample),
                "overflows": overflows,
                "needs_fold": sum(1 for r in sample if r[3]),
                "overflow_rate": ratio(overflows, len(sample)),
                "overflow_pct": _pct(ratio(overflows, len(sample))),
                "p95_ms": _ms(percentile([r[1] for r in sample], 95)),
                "unknown": unknown[i],
                "pending": pending[i],
                "secrets": secrets[i],
            }
        )
    return {"rows": rows, "checks": checks, "began": began, "secrets_total": sum(secrets)}


def _charts(starts: list[Any], data: dict[str, Any]) -> dict[str, Any]:
    rows = data["rows"]

    def col(key: str) -> list[Any]:
        return [r[key] for r in rows]

    # Counts per hour are bars, rates and levels lines; colours are the badges' (charts.py).
    began = data["began"]
    return {
        "folds": bar_chart(
            starts=starts,
            series=[
                Series(k, col(k), tone)
                for k, tone in (("committed", "ok"), ("rejected", "bad"), ("discarded", "muted"))
            ],
        ),
        "rejections": line_chart(
            starts=starts,
            series=[Series("rejection rate", col("rejection_rate"), "bad")],
            percent=True,
        ),
        "checks": bar_chart(
            starts=starts,
            series=[
                Series(check, [r["checks"][k] for r in rows])
                for k, check in enumerate(data["checks"])
            ],
            legend=True,
        ),
        "overflow": line_chart(
            starts=starts,
            series=[Series("overflow rate", col("overflow_rate"), "warn")],
            percent=True,
        ),
        "p95": line_chart(starts=starts, series=[Series("p95", col("p95_ms"))], unit=" ms"),
        "secrets": bar_chart(
            starts=starts, series=[Series("events with secrets", col("secrets"), "bad")]
        ),
        "backlog": line_chart(
            starts=starts,
            series=[
                Series(
                    "unknown side effects",
                    starting_at_first(col("unknown"), began["unknown"]),
                    "warn",
                ),
                Series(
                    "pending approvals", starting_at_first(col("pending"), began["pending"]), "info"
                ),
            ],
        ),
    }


@login_required
@require_GET
def operations(request: HtmxHttpRequest) -> HttpResponse:
    workspace_ids = [w for w in roles(request) if can(request, w, Role.OPERATOR)]
    if not workspace_ids:
        raise PermissionDenied("this needs the operator role in a workspace")
    hours = _hours(request)
    buckets = Buckets.hourly(now=_now(), hours=hours)
    data = operations_figures(workspace_ids=workspace_ids, buckets=buckets)
    return render(
        request,
        "threads/operations.html",
        {
            "hours": hours,
            "hour_choices": (6, 24, 72, MAX_HOURS),
            "rows": data["rows"],
            "checks": data["checks"],
            "charts": _charts(buckets.starts(), data),
            "secrets_total": data["secrets_total"],
            "since": buckets.start,
            # Now, not per hour: a run status is a state, derived when read.
            "run_statuses": [
                (value, RUN_STATUS_LABELS[value], n)
                for value, n in selectors.run_status_counts(workspace_ids=workspace_ids).items()
            ],
            # This very page came through a proxy that ctxadmin does not trust: every client
            # is one address to the login lockout (docs/operations.md, "Behind a proxy").
            "proxy_untrusted": settings.CTXADMIN_TRUSTED_PROXIES <= 0
            and came_through_proxy(request),
        },
    )
