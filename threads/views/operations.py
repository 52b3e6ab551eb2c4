"""The Operations page (docs/operations.md): the figures /metrics gives, over time, from the
database, so it needs no Prometheus server. Across the person's workspaces (operator and up);
the last 24 hours in hourly buckets, `?hours=` up to 7 days."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from threads.domain.timeseries import Buckets, counts, levels, percentile, ratio
from threads.models import Role
from threads.selectors import metrics as figures
from threads.views.charts import Series, line_chart
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
    """Every series of the page, per bucket: four queries whatever the number of buckets."""
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
    unknown = levels(
        buckets, figures.unknown_side_effect_spans(workspace_ids=workspace_ids, since=since)
    )
    pending = levels(buckets, figures.approval_spans(workspace_ids=workspace_ids, since=since))
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
            }
        )
    return {"rows": rows, "checks": checks}


def _charts(starts: list[Any], data: dict[str, Any]) -> dict[str, Any]:
    rows = data["rows"]

    def col(key: str) -> list[Any]:
        return [r[key] for r in rows]

    return {
        "folds": line_chart(
            starts=starts,
            series=[Series(k, col(k)) for k in ("committed", "rejected", "discarded")],
        ),
        "rejections": line_chart(
            starts=starts,
            series=[
                Series("rejection rate", col("rejection_rate")),
            ],
            percent=True,
        ),
        "checks": line_chart(
            starts=starts,
            series=[
                Series(check, [r["checks"][k] for r in rows])
                for k, check in enumerate(data["checks"])
            ],
            legend=True,
        ),
        "overflow": line_chart(
            starts=starts, series=[Series("overflow rate", col("overflow_rate"))], percent=True
        ),
        "p95": line_chart(starts=starts, series=[Series("p95", col("p95_ms"))], unit=" ms"),
        "backlog": line_chart(
            starts=starts,
            series=[
                Series("unknown side effects", col("unknown")),
                Series("pending approvals", col("pending")),
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
            "since": buckets.start,
        },
    )
