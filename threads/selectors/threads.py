"""Threads and memberships: finding a thread for a person or an agent key, and the thread list."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    CharField,
    Count,
    DateTimeField,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from threads.domain.errors import NotFound
from threads.domain.external_ids import text_storable
from threads.domain.problems import (
    AGENT_STALLED,
    APPROVAL_PENDING,
    CHAIN_BROKEN,
    FOLD_REJECTED,
    OVER_BUDGET,
    PINNED,
    SIDE_EFFECT_UNKNOWN,
    severity_weight,
)
from threads.domain.run_status import (
    HELD_CALL_AFTER,
    IDLE,
    RUN_STATUSES,
    RUNNING,
    RUNNING_WINDOW,
    STALLED,
    WAITING_FOR_AGENT,
    WAITING_FOR_PERSON,
)
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    Event,
    EventKind,
    Membership,
    SideEffect,
    SideEffectStatus,
    SummaryPhase,
    SummaryVersion,
    Thread,
    Workspace,
)
from threads.selectors.search import MAX_HITS, events_search, workspace_keys


def workspaces_for_user(user: Any) -> QuerySet[Workspace]:
    return Workspace.objects.filter(memberships__user_id=user.pk).order_by("name")


def _by_id_or_external_id(queryset: QuerySet[Thread], id: str) -> Thread:
    if not text_storable(id):
        raise NotFound("thread not found")
    try:
        uid = uuid.UUID(str(id))
    except ValueError:
        thread = queryset.filter(external_id=id).first()
    else:
        thread = queryset.filter(pk=uid).first() or queryset.filter(external_id=id).first()
    if thread is None:
        raise NotFound("thread not found")
    return thread


def thread_get_for_workspace(*, workspace: Workspace, id: str) -> Thread:
    """A thread by its UUID or external_id, within one workspace (agents)."""
    return _by_id_or_external_id(
        Thread.objects.select_related("workspace").filter(workspace=workspace), id
    )


def thread_get_for_member(*, user: Any, id: str, workspace_id: int | None = None) -> Thread:
    """A thread by UUID or external_id among the workspaces the person belongs to.

    A UUID is unique: it resolves in any of them. An external_id is unique only within a
    workspace (two workspaces may both hold "order-1"), so it resolves in the person's current
    workspace, `workspace_id` (the one chosen in the dashboard's switcher); with no choice (or a
    stale one), in the first of their workspaces by name that holds it. Never in whichever row
    happens to sort first (docs/access.md, "People and access").
    """
    if not text_storable(id):
        raise NotFound("thread not found")
    workspace_ids = Membership.objects.filter(user_id=user.pk).values("workspace_id")
    threads = Thread.objects.select_related("workspace").filter(workspace_id__in=workspace_ids)
    try:
        uid = uuid.UUID(str(id))
    except ValueError:
        uid = None
    thread = threads.filter(pk=uid).first() if uid is not None else None
    if thread is None:
        if (
            workspace_id is not None
            and Membership.objects.filter(user_id=user.pk, workspace_id=workspace_id).exists()
        ):
            threads = threads.filter(workspace_id=workspace_id)
        thread = threads.filter(external_id=id).order_by("workspace__name", "workspace_id").first()
    if thread is None:
        raise NotFound("thread not found")
    return thread


def workspace_current_for_member(*, user: Any, workspace_id: int | None) -> Workspace | None:
    """The person's current workspace: the one they chose, if they still belong to it, else
    their first by name (None for a person in no workspace)."""
    workspaces = workspaces_for_user(user)
    chosen = workspaces.filter(pk=workspace_id).first() if workspace_id is not None else None
    return chosen or workspaces.first()


def member_workspace_ids(user: Any) -> QuerySet[Membership, Any]:
    return Membership.objects.filter(user_id=user.pk).values("workspace_id")


def member_roles(user: Any) -> dict[int, str]:
    """workspace id -> the person's role there."""
    return dict(Membership.objects.filter(user_id=user.pk).values_list("workspace_id", "role"))


def _with_budget_use(queryset: QuerySet[Thread]) -> QuerySet[Thread]:
    """Budget use per thread as subqueries: one query for any page size.

    History tokens = the head summary's tokens plus the events after it, the same measure the
    budget compares with its high watermark (before trimming).
    """
    head_tokens = SummaryVersion.objects.filter(
        thread=OuterRef("pk"), version=OuterRef("head_version")
    ).values("tokens")[:1]
    delta_tokens = (
        Event.objects.filter(thread=OuterRef("pk"), seq__gt=OuterRef("covered_until"))
        .order_by()
        .values("thread")
        .annotate(total=Sum("token_count"))
        .values("total")[:1]
    )
    return queryset.annotate(
        # Unfolded threads (most short ones) skip both subqueries: with nothing covered every
        # event is history and token_total is their sum (as triggers.history_tokens reads it).
        history_tokens=Case(
            When(head_version=0, then=0),
            default=Coalesce(Subquery(head_tokens), 0),
            output_field=BigIntegerField(),
        )
        + Case(
            When(covered_until=0, then=F("token_total")),
            default=Coalesce(Subquery(delta_tokens), 0),
            output_field=BigIntegerField(),
        ),
        available_tokens=F("context_window")
        # The fixed input: the agent's own count, else its tools' (domain.budget.thread_budget).
        - Case(When(fixed_tokens=0, then=F("tool_tokens")), default=F("fixed_tokens"))
        - F("reserved_output")
        - F("reasoning_reserve")
        - F("safety_margin"),
        high_tokens=ExpressionWrapper(
            F("high_watermark") * F("available_tokens"), output_field=FloatField()
        ),
        # History as a fraction of B; NULL when the settings leave no budget at all.
        budget_use=Case(
            When(
                available_tokens__gt=0,
                then=Cast("history_tokens", FloatField()) / F("available_tokens"),
            ),
            default=None,
            output_field=FloatField(),
        ),
    )


THREAD_SORTS = {
    "updated": "updated_at",
    "external_id": "external_id",
    "events": "last_seq",
    "tokens": "token_total",
    "history": "history_tokens",
    "severity": "severity",
}


def threads_in(
    *,
    workspace_ids: Any,
    q: str = "",
    content: bool = False,
    status: str = "",
    unknown: bool | None = None,
    secrets: bool | None = None,
    failed: bool = False,
    pending: bool | None = None,
    over_budget: bool = False,
    run_status: str = "",
    sort: str = "-updated",
) -> QuerySet[Thread]:
    """The thread list of the API and the dashboard: threads of the given workspaces (an
    agent's one, or a person's), filtered and sorted, each with its problem flags.

    - q: external_id or title contains (any case); with `content`, or an event of the thread
      holds q's words (message search, docs/search.md, "Message search");
    - status: the thread's status;
    - unknown / pending: has (True) or has not (False) an unknown side effect / a pending
      approval; None does not filter;
    - secrets: has (True) or has not (False) an event that holds a secret found at ingest
      (docs/event-log.md, "Secrets at ingest"); None does not filter;
    - failed: verification failed — the latest decided summary version was rejected, or the
      chain is broken;
    - over_budget: history above the high watermark;
    - run_status: one of threads.domain.run_status.RUN_STATUSES (docs/dashboard.md,
      "Run status"), computed in SQL from the thread row's marks;
    - sort: a THREAD_SORTS key, "-" first for descending; most recently active first by
      default; "-severity": the most severe problems first (threads.domain.problems), the
      most recently active first among equals.
    Budget use is computed only when a filter or the sort needs it (thread_list_page adds it
    to a page's rows).

    The workspaces go into the query as values, not as a subquery of the person's
    memberships: with one workspace the planner then reads a page of the default order off the
    (workspace, updated_at, id) index and stops there; with a subquery it sorted every thread
    of the workspace (docs/scale.md, "What one database holds").
    """
    workspace_ids = workspace_keys(workspace_ids)
    threads = _thread_flags(
        Thread.objects.select_related("workspace").filter(workspace_id__in=workspace_ids)
    )
    field = THREAD_SORTS.get(sort.lstrip("-"), "updated_at")
    if over_budget or field in ("history_tokens", "severity"):
        threads = _with_budget_use(threads)
    if field == "severity":
        threads = _with_severity(threads)
    if q and not text_storable(q):
        # No external_id or title holds a NUL (none can be stored): an empty search.
        return threads.none()
    if q:
        match = Q(external_id__icontains=q) | Q(title__icontains=q)
        if content:
            # Words of the thread's messages, tool calls and results, through the search
            # index (threads/selectors/search.py): the threads of the newest MAX_HITS matching
            # events, the hits the page lists, so that a word every thread holds costs what a
            # rare one does instead of a subquery of every match.
            hit_threads = {
                hit.thread_id
                for hit in events_search(workspace_ids=workspace_ids, q=q, limit=MAX_HITS)
            }
            if hit_threads:
                match |= Q(pk__in=hit_threads)
        threads = threads.filter(match)
    if status:
        threads = threads.filter(status=status)
    # Annotated names go through Q so the type checker does not look them up as fields.
    if unknown is not None:
        # The count the side-effect triggers keep (threads/database/unknown_counts.py): a partial
        # index holds the threads above 0, in the list's order.
        threads = threads.filter(
            Q(unknown_side_effects__gt=0) if unknown else Q(unknown_side_effects=0)
        )
    if secrets is not None:
        # The count the append keeps on the row (docs/event-log.md, "Secrets at ingest"); a
        # partial index holds the threads above 0, in the list's order.
        threads = threads.filter(
            Q(events_with_secrets__gt=0) if secrets else Q(events_with_secrets=0)
        )
    if failed:
        threads = threads.filter(Q(has_rejected=True) | Q(chain_ok=False))
    if pending is not None:
        threads = threads.filter(Q(has_pending=pending))
    if over_budget:
        threads = threads.filter(Q(history_tokens__gt=F("high_tokens")))
    if run_status in RUN_STATUSES:
        threads = threads.filter(_run_status_narrowed(run_status), Q(run_status=run_status))
    order = f"-{field}" if sort.startswith("-") else field
    if field == "severity":
        return threads.order_by(order, "-updated_at", "pk")
    return threads.order_by(order, "pk")


def thread_list_page(page_rows: QuerySet[Thread]) -> QuerySet[Thread]:
    """One page (a slice) of threads_in, its flags and budget use computed for the page's rows
    only. Still one query.

    The filtered, sorted slice becomes a subquery selecting keys alone; the outer query
    annotates those rows. Selecting the annotations with the slice makes the database evaluate
    every per-thread subquery for each row the sort or OFFSET passes over (SQLite's sorter
    stores whole result rows; PostgreSQL computes the rows an OFFSET skips): at 10k threads
    ~100 ms on SQLite for any page, ~370 ms on PostgreSQL for page 150 (bench/pages.py).
    """
    rows = _with_budget_use(
        _thread_flags(
            Thread.objects.select_related("workspace").filter(pk__in=page_rows.values("pk"))
        )
    )
    if any(str(key).lstrip("-") == "severity" for key in page_rows.query.order_by):
        rows = _with_severity(rows)
    return rows.order_by(*page_rows.query.order_by)


def active_constraints(*, thread_ids: set[Any]) -> dict[Any, list[dict[str, Any]]]:
    """Per thread: active constraints of the head summary plus constraint annotations after it.

    Two queries whatever the number of threads.
    """
    out: dict[Any, list[dict[str, Any]]] = {tid: [] for tid in thread_ids}
    heads = SummaryVersion.objects.filter(
        thread_id__in=thread_ids, version=F("thread__head_version")
    ).values_list("thread_id", "content")
    for thread_id, content in heads:
        for item in (content or {}).get("constraints", []):
            if item.get("status", "active") == "active":
                out[thread_id].append(
                    {"text": item.get("text", ""), "sources": item.get("source_event_ids", [])}
                )
    notes = (
        Event.objects.filter(
            thread_id__in=thread_ids,
            kind=EventKind.ANNOTATION,
            data__type="constraint",
            seq__gt=F("thread__covered_until"),
        )
        .order_by("seq")
        .values_list("thread_id", "seq", "data")
    )
    for thread_id, seq, data in notes:
        out[thread_id].append(
            {"text": (data.get("payload") or {}).get("text", ""), "sources": [seq]}
        )
    return out


def _thread_flags(queryset: QuerySet[Thread]) -> QuerySet[Thread]:
    """Per-thread problem flags, as EXISTS subqueries but for the count of unknown side effects
    the thread row keeps, and the run status: one query for any page size."""
    return _with_run_status(_problem_flags(queryset))


def _problem_flags(queryset: QuerySet[Thread]) -> QuerySet[Thread]:
    return queryset.annotate(
        has_unknown=ExpressionWrapper(Q(unknown_side_effects__gt=0), output_field=BooleanField()),
        # Pending and still decidable: a request past its expires_at waits for nobody.
        has_pending=Exists(
            ApprovalRequest.objects.filter(
                Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()),
                thread=OuterRef("pk"),
                status=ApprovalStatus.PENDING,
            )
        ),
        # A rejected candidate newer than the head: the latest decided version failed
        # verification (a later committed version would have become the head).
        has_rejected=Exists(
            SummaryVersion.objects.filter(
                thread=OuterRef("pk"),
                phase=SummaryPhase.REJECTED,
                version__gt=OuterRef("head_version"),
            )
        ),
    )


def _with_run_status(queryset: QuerySet[Thread], now: datetime | None = None) -> QuerySet[Thread]:
    """The run status (docs/dashboard.md, "Run status"; threads.domain.run_status), from the
    thread row's marks and the problem flags, first that holds:

    - waiting_for_person: an unknown side effect, a decidable pending approval, or a held
      call (a side effect still `running` HELD_CALL_AFTER after its call);
    - stalled: the agent owes a pickup since longer than its workspace's
      stall_after_seconds;
    - waiting_for_agent: the agent owes a pickup (agent_owed_since is set);
    - running: the agent appended or read within RUNNING_WINDOW;
    - idle.

    Also `has_held_call`, and `stalled_at`: when a wait for the agent becomes (or became)
    stalled, null when the thread does not wait for it. Needs _problem_flags."""
    now = now or timezone.now()
    recent = now - RUNNING_WINDOW
    # Integer seconds times one second: a duration on both databases (SQLite refuses the
    # multiplication for an unsigned field, hence the cast).
    stall_after = ExpressionWrapper(
        Cast("workspace__stall_after_seconds", IntegerField()) * Value(timedelta(seconds=1)),
        output_field=DurationField(),
    )
    return queryset.annotate(
        has_held_call=Exists(
            SideEffect.objects.filter(
                thread=OuterRef("pk"),
                status=SideEffectStatus.RUNNING,
                updated_at__lt=now - HELD_CALL_AFTER,
            )
        ),
        stalled_at=ExpressionWrapper(
            F("agent_owed_since") + stall_after, output_field=DateTimeField()
        ),
        run_status=Case(
            When(
                Q(unknown_side_effects__gt=0) | Q(has_pending=True) | Q(has_held_call=True),
                then=Value(WAITING_FOR_PERSON),
            ),
            When(Q(stalled_at__lte=now), then=Value(STALLED)),
            When(Q(agent_owed_since__isnull=False), then=Value(WAITING_FOR_AGENT)),
            When(
                Q(agent_appended_at__gt=recent) | Q(agent_read_at__gt=recent),
                then=Value(RUNNING),
            ),
            default=Value(IDLE),
            output_field=CharField(),
        ),
    )


def run_status_counts(*, workspace_ids: Any = None) -> dict[str, int]:
    """How many threads are in each run status, every status named (0 when none): of the
    given workspaces, or of all (`/metrics`). One grouped query."""
    threads = Thread.objects.all()
    if workspace_ids is not None:
        threads = threads.filter(workspace_id__in=workspace_keys(workspace_ids))
    flagged: Any = _thread_flags(threads)
    rows = flagged.order_by().values("run_status").annotate(n=Count("pk"))
    counts = dict.fromkeys(RUN_STATUSES, 0)
    for row in rows:
        counts[row["run_status"]] = row["n"]
    return counts


def _run_status_narrowed(run_status: str) -> Q:
    """A condition every thread of `run_status` meets, on the row's own columns, so that the
    filter reads the few threads that can have it (the waiting ones: the
    thread_waiting_for_agent index) before computing the status of those."""
    if run_status in (STALLED, WAITING_FOR_AGENT):
        return Q(agent_owed_since__isnull=False)
    if run_status == RUNNING:
        recent = timezone.now() - RUNNING_WINDOW
        return Q(agent_appended_at__gt=recent) | Q(agent_read_at__gt=recent)
    return Q()


def thread_with_flags(thread: Thread) -> Thread:
    """The same thread re-read with its problem flags (for the detail answer)."""
    return _thread_flags(Thread.objects.filter(pk=thread.pk)).get()


def thread_with_flags_and_budget(thread: Thread) -> Thread:
    """The same thread re-read with the list's problem flags and budget use (the banner's,
    threads/selectors/problems.py): one query."""
    return _with_budget_use(_thread_flags(Thread.objects.filter(pk=thread.pk))).get()


def _with_severity(queryset: QuerySet[Thread]) -> QuerySet[Thread]:
    """The list's severity sort key: the sum of the weights of the problems its flags show
    (threads.domain.problems.severity_weight), so the thread with the most severe problem
    comes first. Needs the flags and the budget use."""
    weighed = [
        (Q(chain_ok=False), CHAIN_BROKEN),
        (Q(has_unknown=True), SIDE_EFFECT_UNKNOWN),
        (Q(run_status=STALLED), AGENT_STALLED),
        (Q(has_pending=True), APPROVAL_PENDING),
        (Q(has_rejected=True), FOLD_REJECTED),
        (Q(history_tokens__gt=F("high_tokens")), OVER_BUDGET),
        (Q(pinned_at__isnull=False), PINNED),
    ]
    total: Any = Value(0)
    for condition, kind in weighed:
        total = total + Case(
            When(condition, then=Value(severity_weight(kind))),
            default=Value(0),
            output_field=IntegerField(),
        )
    return queryset.annotate(severity=ExpressionWrapper(total, output_field=IntegerField()))


def memberships_for_user(*, user: Any) -> list[Membership]:
    return list(
        Membership.objects.filter(user_id=user.pk)
        .select_related("workspace")
        .order_by("workspace__name")
    )
