"""Every read, scoped by workspace. Another workspace's object is simply not found (404)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import (
    BigIntegerField,
    Case,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    When,
)
from django.db.models.functions import Cast, Coalesce

from threads.domain.errors import NotFound
from threads.domain.events import stored_form
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    AuditEntry,
    Checkpoint,
    Event,
    EventKind,
    Membership,
    SideEffect,
    SideEffectStatus,
    SummaryPhase,
    SummaryVersion,
    TaskRun,
    Thread,
    Workspace,
)
from threads.services.integrity import last_safe_checkpoint


def workspaces_for_user(user: Any) -> QuerySet[Workspace]:
    return Workspace.objects.filter(memberships__user_id=user.pk).order_by("name")


def _by_id_or_external_id(queryset: QuerySet[Thread], id: str) -> Thread:
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


def thread_get_for_member(*, user: Any, id: str) -> Thread:
    """A thread by UUID or external_id in any workspace the person belongs to."""
    workspace_ids = Membership.objects.filter(user_id=user.pk).values("workspace_id")
    return _by_id_or_external_id(
        Thread.objects.select_related("workspace").filter(workspace_id__in=workspace_ids), id
    )


# --- Dashboard reads (helper F). Every one is scoped to the person's workspaces. ----------------


def member_workspace_ids(user: Any) -> QuerySet[Membership, Any]:
    return Membership.objects.filter(user_id=user.pk).values("workspace_id")


def member_roles(user: Any) -> dict[int, str]:
    """workspace id -> the person's role there."""
    return dict(Membership.objects.filter(user_id=user.pk).values_list("workspace_id", "role"))


def _threads_annotated(queryset: QuerySet[Thread]) -> QuerySet[Thread]:
    """Problem flags and budget use per thread as subqueries: one query for any page size.

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
    return _thread_flags(queryset).annotate(
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
        - F("fixed_tokens")
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
}


def thread_list_for_member(
    *,
    user: Any,
    q: str = "",
    content: bool = False,
    unknown: bool = False,
    failed: bool = False,
    pending: bool = False,
    over_budget: bool = False,
    sort: str = "-updated",
) -> QuerySet[Thread]:
    """Threads of the person's workspaces, filtered and sorted, with problem flags."""
    threads = _threads_annotated(
        Thread.objects.select_related("workspace").filter(
            workspace_id__in=member_workspace_ids(user)
        )
    )
    if q:
        match = Q(external_id__icontains=q) | Q(title__icontains=q)
        if content:
            match |= Q(
                Exists(
                    Event.objects.filter(
                        thread=OuterRef("pk"), kind=EventKind.MESSAGE, data__content__icontains=q
                    )
                )
            )
        threads = threads.filter(match)
    # Annotated names go through Q so the type checker does not look them up as fields.
    if unknown:
        threads = threads.filter(Q(has_unknown=True))
    if failed:
        threads = threads.filter(Q(has_rejected=True) | Q(chain_ok=False))
    if pending:
        threads = threads.filter(Q(has_pending=True))
    if over_budget:
        threads = threads.filter(Q(history_tokens__gt=F("high_tokens")))
    field = THREAD_SORTS.get(sort.lstrip("-"), "updated_at")
    order = f"-{field}" if sort.startswith("-") else field
    return threads.order_by(order, "pk")


def thread_list_page(page_rows: QuerySet[Thread]) -> QuerySet[Thread]:
    """One page (a slice) of thread_list_for_member, its flags and budget use computed for the
    page's rows only. Still one query.

    The filtered, sorted slice becomes a subquery selecting keys alone; the outer query
    annotates those rows. Selecting the annotations with the slice makes the database evaluate
    every per-thread subquery for each row the sort or OFFSET passes over (SQLite's sorter
    stores whole result rows; PostgreSQL computes the rows an OFFSET skips): at 10k threads
    ~100 ms on SQLite for any page, ~370 ms on PostgreSQL for page 150 (bench/pages.py).
    """
    return _threads_annotated(
        Thread.objects.select_related("workspace").filter(pk__in=page_rows.values("pk"))
    ).order_by(*page_rows.query.order_by)


def event_window(*, thread: Thread, from_seq: int, limit: int) -> list[Event]:
    """Events from_seq .. from_seq+limit-1, in seq order: never the whole log."""
    return list(
        Event.objects.filter(thread=thread, seq__gte=from_seq, seq__lt=from_seq + limit).order_by(
            "seq"
        )
    )


def event_get(*, thread: Thread, seq: int) -> Event:
    event = Event.objects.filter(thread=thread, seq=seq).first()
    if event is None:
        raise NotFound("event not found")
    return event


def events_by_seqs(*, thread: Thread, seqs: set[int]) -> list[Event]:
    return list(Event.objects.filter(thread=thread, seq__in=seqs).order_by("seq"))


def closing_events_for_calls(
    *, thread: Thread, call_ids: set[str], after: int
) -> list[tuple[int, str, int | None]]:
    """(seq, kind, call_seq) of results and resolutions naming these tool call ids."""
    if not call_ids:
        return []
    rows = (
        Event.objects.filter(
            thread=thread,
            tool_call_id__in=call_ids,
            seq__gt=after,
            kind__in=(EventKind.TOOL_RESULT, EventKind.SIDE_EFFECT_RESOLUTION),
        )
        .order_by("seq")
        .values_list("seq", "kind", "data__call_seq")
    )
    return [(seq, kind, call_seq) for seq, kind, call_seq in rows]


def side_effects_for_calls(*, thread: Thread, call_seqs: list[int]) -> dict[int, SideEffect]:
    return {s.call_seq: s for s in SideEffect.objects.filter(thread=thread, call_seq__in=call_seqs)}


def approvals_for_requests(*, thread: Thread, seqs: list[int]) -> dict[int, ApprovalRequest]:
    return {
        a.request_event.seq: a
        for a in ApprovalRequest.objects.filter(
            thread=thread, request_event__seq__in=seqs
        ).select_related("request_event", "decision_event", "decided_by")
    }


def event_token_buckets(*, thread: Thread, buckets: int = 120) -> tuple[int, list[tuple[int, int]]]:
    """(bucket width, [(bucket index, tokens)]) over the whole log, summed in the database."""
    width = max(1, -(-thread.last_seq // buckets))
    rows = (
        Event.objects.filter(thread=thread)
        .annotate(bucket=(F("seq") - 1) / width)
        .order_by()
        .values("bucket")
        .annotate(tokens=Sum("token_count"))
        .order_by("bucket")
        .values_list("bucket", "tokens")
    )
    return width, [(int(b), int(t or 0)) for b, t in rows]


def summary_versions_for_thread(*, thread: Thread) -> list[SummaryVersion]:
    return list(
        SummaryVersion.objects.filter(thread=thread)
        .defer("content", "rendered")
        .order_by("-version")
    )


def summary_version_get(*, thread: Thread, version: int) -> SummaryVersion:
    found = SummaryVersion.objects.filter(thread=thread, version=version).first()
    if found is None:
        raise NotFound("summary version not found")
    return found


def checkpoints_for_thread(*, thread: Thread) -> list[Checkpoint]:
    return list(
        Checkpoint.objects.filter(thread=thread)
        .select_related("summary_version", "created_by")
        .defer("summary_version__content", "summary_version__rendered")
        .order_by("-cursor", "-pk")
    )


def checkpoint_get(*, thread: Thread, id: int) -> Checkpoint:
    found = (
        Checkpoint.objects.filter(thread=thread, pk=id).select_related("summary_version").first()
    )
    if found is None:
        raise NotFound("checkpoint not found")
    return found


def side_effects_for_member(
    *, user: Any, status: str = "", thread: str = ""
) -> QuerySet[SideEffect]:
    effects = SideEffect.objects.filter(thread__workspace_id__in=member_workspace_ids(user))
    if status:
        effects = effects.filter(status=status)
    if thread:
        effects = effects.filter(thread__external_id=thread)
    return effects.select_related("thread", "thread__workspace", "call_event").order_by(
        "-updated_at", "pk"
    )


def side_effect_get_for_member(*, user: Any, id: int) -> SideEffect:
    found = side_effects_for_member(user=user).filter(pk=id).first()
    if found is None:
        raise NotFound("side effect not found")
    return found


def approvals_for_member(
    *, user: Any, status: str = ApprovalStatus.PENDING, thread: str = ""
) -> QuerySet[ApprovalRequest]:
    approvals = ApprovalRequest.objects.filter(thread__workspace_id__in=member_workspace_ids(user))
    if status:
        approvals = approvals.filter(status=status)
    if thread:
        approvals = approvals.filter(thread__external_id=thread)
    return approvals.select_related(
        "thread", "thread__workspace", "request_event", "decided_by"
    ).order_by("created_at", "pk")


def approval_get_for_member(*, user: Any, id: int) -> ApprovalRequest:
    found = approvals_for_member(user=user, status="").filter(pk=id).first()
    if found is None:
        raise NotFound("approval not found")
    return found


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


def threads_integrity_for_member(*, user: Any) -> QuerySet[Thread]:
    """Broken chains first, then the least recently verified."""
    return (
        Thread.objects.filter(workspace_id__in=member_workspace_ids(user))
        .select_related("workspace")
        .annotate(
            unsafe_checkpoints=Exists(Checkpoint.objects.filter(thread=OuterRef("pk"), safe=False))
        )
        .only(
            "id",
            "external_id",
            "title",
            "workspace__name",
            "chain_ok",
            "first_bad_seq",
            "verified_until",
            "verified_at",
            "last_seq",
        )
        .order_by("chain_ok", F("verified_at").asc(nulls_first=True), "pk")
    )


def unsafe_checkpoints_for_member(*, user: Any) -> QuerySet[Checkpoint]:
    return (
        Checkpoint.objects.filter(thread__workspace_id__in=member_workspace_ids(user), safe=False)
        .select_related("thread")
        .only("id", "cursor", "unsafe_reason", "created_at", "thread__external_id", "thread__id")
        .order_by("-created_at")
    )


def audit_for_member(
    *, user: Any, actor: str = "", action: str = "", thread: str = ""
) -> QuerySet[AuditEntry]:
    entries = AuditEntry.objects.filter(workspace_id__in=member_workspace_ids(user))
    if actor:
        entries = entries.filter(actor_label=actor)
    if action:
        entries = entries.filter(action=action)
    if thread:
        entries = entries.filter(
            Q(thread__external_id=thread) | Q(thread_id__in=_uuid_or_none(thread))
        )
    return entries.select_related("thread", "workspace").order_by("-created_at", "-pk")


def _uuid_or_none(value: str) -> list[uuid.UUID]:
    try:
        return [uuid.UUID(value)]
    except ValueError:
        return []


def audit_facets_for_member(*, user: Any) -> dict[str, list[str]]:
    entries = AuditEntry.objects.filter(workspace_id__in=member_workspace_ids(user)).order_by()
    return {
        "actors": sorted(set(entries.values_list("actor_label", flat=True).distinct())),
        "actions": sorted(set(entries.values_list("action", flat=True).distinct())),
    }


def task_run_get_for_member(*, user: Any, id: str) -> TaskRun:
    found = TaskRun.objects.filter(workspace_id__in=member_workspace_ids(user), pk=id).first()
    if found is None:
        raise NotFound("task not found")
    return found


def task_runs_in_flight(*, thread: Thread, kind: str) -> TaskRun | None:
    """The newest run of this kind on the thread, if it has not finished."""
    return (
        TaskRun.objects.filter(
            thread=thread, kind=kind, state__in=("PENDING", "STARTED", "PROGRESS")
        )
        .order_by("-created_at")
        .first()
    )


# --- Agent API reads (helper A) ------------------------------------------------------------------


def event_dict(event: Event) -> dict[str, Any]:
    """One event in its stored form (INTERFACES: what the chain covers) plus token_count, hash."""
    out = stored_form(
        seq=event.seq,
        kind=event.kind,
        created_at=event.created_at,
        client_event_id=event.client_event_id,
        metadata=event.metadata,
        data=event.data,
    )
    out["token_count"] = event.token_count
    out["hash"] = event.hash
    return out


def event_dicts(
    thread: Thread, *, after: int = 0, until: int | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Events with seq in (after, until], in seq order, as stored-form dicts (INTERFACES)."""
    rows = Event.objects.filter(thread=thread, seq__gt=after)
    if until is not None:
        rows = rows.filter(seq__lte=until)
    values = rows.order_by("seq").values_list(
        "seq", "kind", "created_at", "client_event_id", "metadata", "data", "token_count", "hash"
    )
    if limit is not None:
        values = values[:limit]
    out = []
    for (
        seq,
        kind,
        created_at,
        client_event_id,
        metadata,
        data,
        token_count,
        hash_,
    ) in values.iterator(chunk_size=2000):
        event = stored_form(
            seq=seq,
            kind=kind,
            created_at=created_at,
            client_event_id=client_event_id,
            metadata=metadata,
            data=data,
        )
        event["token_count"] = token_count
        event["hash"] = hash_
        out.append(event)
    return out


def _thread_flags(queryset: QuerySet[Thread]) -> QuerySet[Thread]:
    """Per-thread problem flags as EXISTS subqueries: one query for any page size. The API's
    list uses them as they are; the dashboard's (_threads_annotated) adds budget use."""
    return queryset.annotate(
        has_unknown=Exists(
            SideEffect.objects.filter(thread=OuterRef("pk"), status=SideEffectStatus.UNKNOWN)
        ),
        has_pending=Exists(
            ApprovalRequest.objects.filter(thread=OuterRef("pk"), status=ApprovalStatus.PENDING)
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


def _threads_filtered(queryset: QuerySet[Thread], filters: dict[str, Any]) -> QuerySet[Thread]:
    """filters: q (external_id/title contains), status, has_unknown_side_effects (bool),
    verification ("failed"), pending_approvals (bool). Newest activity first."""
    threads = _thread_flags(queryset)
    if filters.get("q"):
        q = filters["q"]
        threads = threads.filter(Q(external_id__icontains=q) | Q(title__icontains=q))
    if filters.get("status"):
        threads = threads.filter(status=filters["status"])
    if filters.get("has_unknown_side_effects") is not None:
        threads = threads.filter(Q(has_unknown=filters["has_unknown_side_effects"]))
    if filters.get("verification") == "failed":
        threads = threads.filter(Q(has_rejected=True))
    if filters.get("pending_approvals") is not None:
        threads = threads.filter(Q(has_pending=filters["pending_approvals"]))
    return threads.order_by("-updated_at", "pk")


def threads_for_workspace(workspace: Workspace, filters: dict[str, Any]) -> QuerySet[Thread]:
    """An agent's view: its workspace's threads, filtered (see _threads_filtered)."""
    return _threads_filtered(Thread.objects.filter(workspace=workspace), filters)


def threads_for_member(user: Any, filters: dict[str, Any]) -> QuerySet[Thread]:
    """A person's view through the API: threads of every workspace they belong to."""
    return _threads_filtered(
        Thread.objects.filter(workspace_id__in=member_workspace_ids(user)), filters
    )


def thread_with_flags(thread: Thread) -> Thread:
    """The same thread re-read with its problem flags (for the detail answer)."""
    return _thread_flags(Thread.objects.filter(pk=thread.pk)).get()


def task_run_get_for_workspace(*, workspace: Workspace, id: str) -> TaskRun:
    found = TaskRun.objects.filter(workspace=workspace, pk=id).first()
    if found is None:
        raise NotFound("task not found")
    return found


# --- Integrity (helper C) ------------------------------------------------------------------------


def thread_integrity(*, thread: Thread) -> dict[str, Any]:
    """CONTRACT's integrity answer, from the verdict the last check recorded on the thread.

    `last_safe_checkpoint` is the checkpoint a rollback can use: the highest cursor that is
    still safe (its checksum recomputes and the chain up to its cursor verifies)."""
    checkpoint = last_safe_checkpoint(thread=thread)
    return {
        "chain_ok": thread.chain_ok,
        "first_bad_seq": thread.first_bad_seq,
        "verified_until": thread.verified_until,
        "verified_at": thread.verified_at.isoformat() if thread.verified_at else None,
        "last_seq": thread.last_seq,
        "last_safe_checkpoint": None
        if checkpoint is None
        else {
            "id": checkpoint.pk,
            "summary_version": (
                checkpoint.summary_version.version if checkpoint.summary_version else None
            ),
            "cursor": checkpoint.cursor,
            "chain_hash": checkpoint.chain_hash,
            "summary_checksum": checkpoint.summary_checksum,
            "safe": checkpoint.safe,
            "created_at": checkpoint.created_at.isoformat(),
            "label": checkpoint.label,
        },
    }


# --- Working context and summaries (helper E1) ---------------------------------------------------

CONTEXT_OVERRIDES = (
    "window",
    "fixed_tokens",
    "reserved_output",
    "reasoning_reserve",
    "safety_margin",
)


def working_context(*, thread: Thread, overrides: dict[str, Any]) -> dict[str, Any]:
    """CONTRACT's working context: the head summary ⊕ the events after it, trimmed to budget.

    One consistent snapshot without a transaction (on SQLite every transaction is IMMEDIATE,
    which would make a read take the write lock):
    - the head (head_version, covered_until), read_until = last_seq and the head version's
      summary come from ONE statement (the thread row joined to its head version), and a
      statement sees one snapshot: the head changes only by compare-and-swap of head_version
      and covered_until together, last_seq only with the events it numbers;
    - events are append-only and seq ≤ last_seq were committed with last_seq, so the events in
      (covered_until, read_until] are exactly the log as it stood at that read; later appends
      are beyond read_until and left to the next call.
    Reads only events after covered_until, with their stored token counts: two queries
    whatever the length of the thread.
    """
    from django.db.models import FilteredRelation

    from threads.domain.budget import Budget, plan_context

    head = (
        Thread.objects.filter(pk=thread.pk)
        .annotate(
            head=FilteredRelation("versions", condition=Q(versions__version=F("head_version")))
        )
        .values(
            "head_version",
            "covered_until",
            "last_seq",
            "context_window",
            "fixed_tokens",
            "reserved_output",
            "reasoning_reserve",
            "safety_margin",
            "high_watermark",
            "low_watermark",
            "head__covered_until",
            "head__content",
            "head__checksum",
            "head__rendered",
            "head__tokens",
        )
        .get()
    )
    settings = {
        "window": head["context_window"],
        "fixed_tokens": head["fixed_tokens"],
        "reserved_output": head["reserved_output"],
        "reasoning_reserve": head["reasoning_reserve"],
        "safety_margin": head["safety_margin"],
    }
    settings.update(
        {k: int(v) for k, v in overrides.items() if k in CONTEXT_OVERRIDES and v is not None}
    )
    budget = Budget(
        window=settings["window"],
        fixed=settings["fixed_tokens"],
        reserved_output=settings["reserved_output"],
        reasoning_reserve=settings["reasoning_reserve"],
        safety_margin=settings["safety_margin"],
    )
    covered, read_until = head["covered_until"], head["last_seq"]
    summary: dict[str, Any] | None = None
    summary_tokens = 0
    if head["head_version"]:
        summary_tokens = head["head__tokens"]
        summary = {
            "version": head["head_version"],
            "covered_until": head["head__covered_until"],
            "content": head["head__content"],
            "checksum": head["head__checksum"],
            "rendered": head["head__rendered"],
            "tokens": summary_tokens,
        }
    events = event_dicts(thread, after=covered, until=read_until) if read_until > covered else []
    plan = plan_context(
        events=events,
        summary_tokens=summary_tokens,
        budget=budget,
        high=head["high_watermark"],
        low=head["low_watermark"],
    )
    return {
        "summary": summary,
        "events": plan.events,
        "read_until": read_until,
        "trimmed_units": plan.trimmed_units,
        "budget": {**budget.as_dict(), "used": plan.used, "sections": plan.sections},
        "needs_fold": plan.needs_fold,
    }


def summary_versions_full(*, thread: Thread) -> QuerySet[SummaryVersion]:
    """Every version of a thread with its content, oldest first (the API's list)."""
    return SummaryVersion.objects.filter(thread=thread).order_by("version")


def memberships_for_user(*, user: Any) -> list[Membership]:
    return list(
        Membership.objects.filter(user_id=user.pk)
        .select_related("workspace")
        .order_by("workspace__name")
    )


# --- Checkpoints, side effects and approvals for the API (helper E2) ---------------------------


def side_effects_in(
    *, workspace_ids: Any, status: str = "", thread: str = ""
) -> QuerySet[SideEffect]:
    """Side effects of the given workspaces (an agent's one, or a person's), by thread and
    call. `thread` narrows to one thread by UUID or external_id."""
    effects = SideEffect.objects.filter(thread__workspace_id__in=workspace_ids)
    if status:
        effects = effects.filter(status=status)
    if thread:
        effects = effects.filter(
            Q(thread__external_id=thread) | Q(thread_id__in=_uuid_or_none(thread))
        )
    return effects.select_related("thread").order_by("thread__external_id", "call_seq", "pk")


def side_effect_get_in(*, workspace_ids: Any, id: int) -> SideEffect:
    found = side_effects_in(workspace_ids=workspace_ids).filter(pk=id).first()
    if found is None:
        raise NotFound("side effect not found")
    return found


def side_effect_rows(effects: QuerySet[SideEffect] | list[SideEffect]) -> list[dict[str, Any]]:
    """The API's side-effect objects with the resolutions the log holds for each: two queries
    whatever the number of side effects."""
    effects = list(effects)
    resolutions: dict[tuple[Any, int], list[dict[str, Any]]] = {}
    if effects:
        rows = (
            Event.objects.filter(
                kind=EventKind.SIDE_EFFECT_RESOLUTION,
                thread_id__in={e.thread_id for e in effects},
                tool_call_id__in={e.tool_call_id for e in effects},
            )
            .order_by("seq")
            .values_list("thread_id", "seq", "created_at", "data")
        )
        for thread_id, seq, created_at, data in rows:
            resolutions.setdefault((thread_id, data.get("call_seq")), []).append(
                {
                    "seq": seq,
                    "status": data.get("status"),
                    "evidence": data.get("evidence", ""),
                    "actor": data.get("actor", ""),
                    "created_at": created_at,
                }
            )
    return [
        {
            "id": e.pk,
            "thread": str(e.thread_id),
            "thread_external_id": e.thread.external_id,
            "tool_call_id": e.tool_call_id,
            "tool_name": e.tool_name,
            "idempotency_key": e.idempotency_key,
            "status": e.status,
            "call_seq": e.call_seq,
            "result_seq": e.result_seq,
            "request_id": e.request_id,
            "updated_at": e.updated_at,
            "resolutions": resolutions.get((e.thread_id, e.call_seq), []),
        }
        for e in effects
    ]


def approvals_in(*, workspace_ids: Any, status: str = "") -> QuerySet[ApprovalRequest]:
    approvals = ApprovalRequest.objects.filter(thread__workspace_id__in=workspace_ids)
    if status:
        approvals = approvals.filter(status=status)
    return approvals.select_related(
        "thread", "request_event", "decision_event", "decided_by"
    ).order_by("created_at", "pk")


def approval_get_in(*, workspace_ids: Any, id: int) -> ApprovalRequest:
    found = approvals_in(workspace_ids=workspace_ids).filter(pk=id).first()
    if found is None:
        raise NotFound("approval not found")
    return found


def approvals_of_thread(*, thread: Thread, status: str = "") -> QuerySet[ApprovalRequest]:
    approvals = ApprovalRequest.objects.filter(thread=thread)
    if status:
        approvals = approvals.filter(status=status)
    return approvals.select_related(
        "thread", "request_event", "decision_event", "decided_by"
    ).order_by("request_event__seq")


def approval_rows(
    approvals: QuerySet[ApprovalRequest] | list[ApprovalRequest],
) -> list[dict[str, Any]]:
    """The API's approval objects; `decision` is what the agent polls for."""
    decisions = {ApprovalStatus.APPROVED: "approve", ApprovalStatus.REJECTED: "reject"}
    return [
        {
            "id": a.pk,
            "thread": str(a.thread_id),
            "thread_external_id": a.thread.external_id,
            "approval_seq": a.request_event.seq,
            "action": a.action,
            "tool_name": a.tool_name,
            "arguments": a.arguments,
            "status": a.status,
            "decision": decisions.get(ApprovalStatus(a.status)),
            "reason": a.reason,
            "decided_by": a.decided_by.get_username()
            if a.decided_by
            else (a.decision_event.data.get("actor") if a.decision_event else None),
            "decided_at": a.decided_at,
            "decision_seq": a.decision_event.seq if a.decision_event else None,
            "expires_at": a.expires_at,
            "created_at": a.created_at,
        }
        for a in approvals
    ]
