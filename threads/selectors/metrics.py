"""The figures /metrics and the Operations page show (docs/operations.md), read from the
database: a fixed number of queries whatever the size of the log.

- running totals: `MetricCounter` rows (summed over their shards);
- folds by outcome, rejections by failed check, tokens replaced vs summary tokens: the
  `SummaryVersion` rows (a fold's candidate is never deleted, only moved to its phase);
- chain breaks, side effects by status, pending approvals: gauges from their tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from threads.models import (
    TOOL_CALL_INDEXED,
    ApprovalRequest,
    ApprovalStatus,
    ContextRequestLog,
    Event,
    EventKind,
    MetricCounter,
    SideEffect,
    SideEffectStatus,
    SummaryPhase,
    SummaryVersion,
    Thread,
)

__all__ = [
    "FOLD_OUTCOMES",
    "approval_figures",
    "approval_spans",
    "chain_breaks",
    "context_request_rows",
    "fold_figures",
    "fold_rows",
    "metric_totals",
    "secret_event_times",
    "side_effect_counts",
    "unknown_side_effect_spans",
]

FOLD_OUTCOMES = ("started", "committed", "rejected", "discarded")
# A committed fold stays a committed fold when a rollback later takes it back.
_COMMITTED = (SummaryPhase.COMMITTED, SummaryPhase.ROLLED_BACK)


def failed_checks(verification: dict[str, Any]) -> list[str]:
    return [c.get("name", "?") for c in verification.get("checks", []) if not c.get("ok")]


def metric_totals() -> dict[tuple[str, str], int]:
    """(name, labels) -> the running total, its shards summed. One query."""
    rows = MetricCounter.objects.values("name", "labels").annotate(total=Sum("value"))
    return {(r["name"], r["labels"]): int(r["total"] or 0) for r in rows}


def _folds() -> Any:
    # Versions a rollback wrote (restored_from) are not folds.
    return SummaryVersion.objects.filter(restored_from__isnull=True)


def fold_figures() -> dict[str, Any]:
    """Folds by outcome, rejections by failed check name, and the tokens committed folds
    replaced against the tokens of the summaries that replaced them. Two queries."""
    by_phase = {
        r["phase"]: r
        for r in _folds()
        .values("phase")
        .annotate(n=Count("id"), tokens=Sum("tokens"), replaced=Sum("tokens_replaced"))
        .order_by("phase")
    }

    def total(phases: Iterable[str], key: str = "n") -> int:
        return sum(int(by_phase.get(p, {}).get(key) or 0) for p in phases)

    checks: Counter[str] = Counter()
    for verification in (
        _folds().filter(phase=SummaryPhase.REJECTED).values_list("verification", flat=True)
    ):
        checks.update(failed_checks(verification or {}))
    return {
        "outcomes": {
            "started": total(SummaryPhase.values),
            "committed": total(_COMMITTED),
            "rejected": total([SummaryPhase.REJECTED]),
            "discarded": total([SummaryPhase.DISCARDED]),
        },
        "rejections": dict(sorted(checks.items())),
        "tokens_replaced": total(_COMMITTED, "replaced"),
        "summary_tokens": total(_COMMITTED, "tokens"),
    }


def chain_breaks() -> int:
    """Threads whose chain the last integrity check found broken."""
    return Thread.objects.filter(chain_ok=False).count()


def side_effect_counts() -> dict[str, int]:
    """Side effects by status, every status present (0 when none). One query."""
    counts = dict.fromkeys(SideEffectStatus.values, 0)
    for row in SideEffect.objects.values("status").annotate(n=Count("id")).order_by("status"):
        counts[row["status"]] = row["n"]
    return counts


def approval_figures() -> dict[str, Any]:
    """How many approvals are pending and when the oldest was asked for: those a reviewer
    can still decide (an expired request is not waiting; the approvals page lists it apart).
    One query."""
    decidable = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    return ApprovalRequest.objects.filter(decidable, status=ApprovalStatus.PENDING).aggregate(
        pending=Count("id"), oldest=Min("created_at")
    )


# --- over time, for the Operations page (scoped to the person's workspaces) ---------------------


def fold_rows(*, workspace_ids: Any, since: datetime) -> list[dict[str, Any]]:
    """Folds started or decided since `since`: when, their phase and (rejected) failed checks.
    One query; the verification report is read only for rejected candidates."""
    rows = (
        _folds()
        .filter(thread__workspace_id__in=workspace_ids)
        .filter(Q(created_at__gte=since) | Q(decided_at__gte=since))
        .values("created_at", "decided_at", "phase", "verification")
        .order_by("created_at")
    )
    out = []
    for row in rows:
        rejected = row["phase"] == SummaryPhase.REJECTED
        out.append(
            {
                "created_at": row["created_at"],
                "decided_at": row["decided_at"],
                "outcome": "committed"
                if row["phase"] in _COMMITTED
                else row["phase"],  # rejected | discarded | prepared
                "checks": failed_checks(row["verification"] or {}) if rejected else [],
            }
        )
    return out


def context_request_rows(*, workspace_ids: Any, since: datetime) -> list[tuple[Any, ...]]:
    """(at, latency_ms, overflow, needs_fold) of the context requests since `since`. One query."""
    return list(
        ContextRequestLog.objects.filter(workspace_id__in=workspace_ids, at__gte=since)
        .order_by("at")
        .values_list("at", "latency_ms", "overflow", "needs_fold")
    )


def secret_event_times(*, workspace_ids: Any, since: datetime) -> list[datetime]:
    """When each event flagged with a secret since `since` was made (its created_at: the
    agent's time, or the append's), read off the partial index of flagged events
    (docs/event-log.md, "Secrets at ingest"). The count only: no flag, no text. One query."""
    return list(
        Event.objects.filter(
            secrets__isnull=False,
            created_at__gte=since,
            thread__workspace_id__in=workspace_ids,
        )
        .order_by()
        .values_list("created_at", flat=True)
    )


def unknown_side_effect_spans(
    *, workspace_ids: Any, since: datetime
) -> list[tuple[datetime, datetime | None]]:
    """(became unknown, left unknown or None) of each side effect whose call timed out, that
    was still unknown at `since` or after. From the log: the timeout result's time and the
    first resolution's. One query."""
    result = Event.objects.filter(
        thread_id=OuterRef("thread_id"), seq=OuterRef("result_seq"), data__status="timeout"
    ).values("created_at")[:1]
    resolution = (
        Event.objects.filter(
            TOOL_CALL_INDEXED,
            thread_id=OuterRef("thread_id"),
            tool_call_id=OuterRef("tool_call_id"),
            kind=EventKind.SIDE_EFFECT_RESOLUTION,
            seq__gt=OuterRef("call_seq"),
        )
        .order_by("seq")
        .values("created_at")[:1]
    )
    rows = (
        SideEffect.objects.filter(thread__workspace_id__in=workspace_ids, result_seq__isnull=False)
        .annotate(unknown_at=Subquery(result), resolved_at=Subquery(resolution))
        .filter(unknown_at__isnull=False)
        .filter(Q(resolved_at__isnull=True) | Q(resolved_at__gte=since))
        .order_by("unknown_at")
        .values_list("unknown_at", "resolved_at")
    )
    return list(rows)


def approval_spans(
    *, workspace_ids: Any, since: datetime
) -> list[tuple[datetime, datetime | None]]:
    """(asked, ended or None) of each approval pending at `since` or after: it ends when it
    is decided or, undecided, when its expires_at passes. One query."""
    rows = (
        ApprovalRequest.objects.filter(thread__workspace_id__in=workspace_ids)
        .filter(Q(decided_at__isnull=True) | Q(decided_at__gte=since))
        .exclude(decided_at__isnull=True, expires_at__lt=since)
        .order_by("created_at")
        .values_list("created_at", "decided_at", "expires_at")
    )
    return [(asked, decided or expires) for asked, decided, expires in rows]
