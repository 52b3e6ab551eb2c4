"""Thread list and timeline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from threads import selectors
from threads.access import chosen_workspace_id
from threads.domain.markers import RETRACTABLE_KINDS
from threads.domain.run_status import (
    IDLE,
    RUN_STATUSES,
    RUNNING,
    STALLED,
    WAITING_FOR_AGENT,
    WAITING_FOR_PERSON,
)
from threads.domain.run_status import (
    LABELS as RUN_STATUS_LABELS,
)
from threads.domain.search import MAX_QUERY_TERMS, too_many_terms
from threads.domain.timing import duration_text, gap_seconds
from threads.domain.units import split_units
from threads.models import ApprovalStatus, Role, SummarizerBackend, Thread
from threads.selectors.approval_context import OPEN_STATUSES
from threads.views.common import (
    HtmxHttpRequest,
    can,
    found,
    page_of,
    query_without,
    region,
    thread_for,
)
from threads.views.present import event_body, page_prefix_chars, present
from threads.views.queues import approval_presented

TIMELINE_PAGE = 200
THREADS_PER_PAGE = 50
HITS_PER_PAGE = 20
# The chip's colour, as the badges have it: stalled is a problem (warn), a wait is news (info).
RUN_STATUS_LEVELS = {
    RUNNING: "ok",
    WAITING_FOR_PERSON: "info",
    WAITING_FOR_AGENT: "info",
    STALLED: "warn",
    IDLE: "",
}
FILTERS = {
    "unknown": "Unknown side effects",
    "secrets": "Secrets in events",
    "failed": "Failed verification",
    "pending": "Pending approvals",
    "over_budget": "Over high watermark",
}


@login_required
@require_GET
def home(request: HtmxHttpRequest) -> HttpResponse:
    return redirect("thread-list")


def thread_tabs(request: HtmxHttpRequest, thread: Thread, tab: str) -> dict[str, Any]:
    """What every thread tab shows in its header."""
    flagged = selectors.thread_with_flags_and_budget(thread)
    return {
        "thread": thread,
        "tab": tab,
        "can_operate": can(request, thread.workspace_id, Role.OPERATOR),
        "can_review": can(request, thread.workspace_id, Role.REVIEWER),
        "can_admin": can(request, thread.workspace_id, Role.ADMIN),
        "summarizers": SummarizerBackend.choices,
        # The banner: every open problem, most severe first, with the link that acts on it.
        "problems": selectors.thread_problems(thread=thread, flags=flagged),
        **run_status_chip(flagged),
        # What the integrations show of the thread.
        "panels": [found for panel in thread_panels if (found := panel(thread)) is not None],
    }


# Boxes an integration adds under a thread's header (where an agent's graph stopped, what runs
# next): each answers the context of one box, with the `template`
# that draws it, or None when it has nothing to show. Registered in AppConfig.ready().
thread_panels: list[Callable[[Thread], dict[str, Any] | None]] = []


def run_status_chip(flagged: Any) -> dict[str, Any]:
    """The header's run-status chip of a thread read with its flags: the status, and for a
    thread waiting for its agent since when and what it has to pick up (docs/dashboard.md,
    "Run status")."""
    waiting = flagged.run_status in (WAITING_FOR_AGENT, STALLED)
    return {
        "run_status": flagged.run_status,
        "run_status_label": RUN_STATUS_LABELS[flagged.run_status],
        "run_status_level": RUN_STATUS_LEVELS[flagged.run_status],
        "run_status_since": flagged.agent_owed_since if waiting else None,
        "stalled_at": flagged.stalled_at if waiting else None,
        "agent_read_at": flagged.agent_read_at,
        "pickups": selectors.agent_pickups(thread=flagged) if waiting else [],
    }


@login_required
@require_GET
def thread_list(request: HtmxHttpRequest) -> HttpResponse:
    params = request.GET
    active = {name: params.get(name) == "1" for name in FILTERS}
    # Most severe problems first unless the person sorts otherwise (docs/dashboard.md, "Dashboard").
    sort = params.get("sort", "-severity")
    run_status = params.get("run_status", "")
    content = _search_events(request)
    threads = selectors.threads_in(
        workspace_ids=selectors.member_workspace_ids(request.user),
        q=params.get("q", "").strip(),
        content=content,
        # The dashboard's checkboxes narrow to threads that have the problem, never to those
        # without it.
        unknown=True if active["unknown"] else None,
        secrets=True if active["secrets"] else None,
        failed=active["failed"],
        pending=True if active["pending"] else None,
        over_budget=active["over_budget"],
        run_status=run_status,
        sort=sort,
    )
    page = page_of(threads, request, THREADS_PER_PAGE)
    # The page's slice of the queryset; its flags and budget use are computed for its rows only.
    page.object_list = selectors.thread_list_page(cast(QuerySet[Thread], page.object_list))
    context = {
        "page": page,
        **_search_hits(request),
        "search": params.get("q", ""),
        "names_only": not content,
        "filters": [(name, label, active[name]) for name, label in FILTERS.items()],
        "run_statuses": [(value, RUN_STATUS_LABELS[value]) for value in RUN_STATUSES],
        "run_status": run_status,
        "run_status_labels": RUN_STATUS_LABELS,
        "sort": sort,
        "sort_query": query_without(request, "sort", "page"),
        "page_query": query_without(request, "page"),
        "multi_workspace": len({t.workspace_id for t in page.object_list}) > 1,
    }
    return region(request, "threads/thread_list.html", context, "thread_table")


def _search_events(request: HtmxHttpRequest) -> bool:
    """The search box finds words in events too unless "names and titles only" is ticked
    (`names_only=1`; the old `content=0` as well): a plain word search that skipped the events
    found nothing where a person expected their agent's words. Bounded as the hits are
    (docs/search.md, "Message search": the threads of the newest matching events, a page of
    hits)."""
    return request.GET.get("names_only") != "1" and request.GET.get("content") != "0"


def _search_hits(request: HtmxHttpRequest) -> dict[str, Any]:
    """Unless names only, the events of the person's current workspace that hold the
    query's words (docs/search.md, "Message search"), newest first, a page at a time (`before`: the
    last hit's key of the page before)."""
    q = request.GET.get("q", "").strip()
    if not _search_events(request) or not q:
        return {"hits": None}
    workspace = selectors.workspace_current_for_member(
        user=request.user, workspace_id=chosen_workspace_id(request)
    )
    before = request.GET.get("before", "")
    count = too_many_terms(q)
    if count is not None:
        note = f"Use at most {MAX_QUERY_TERMS} words: every word is required, and this has {count}."
        return {"hits": [], "hits_note": note, "hits_workspace": workspace}
    hits = selectors.events_search(
        workspace_ids=[workspace.pk] if workspace is not None else [],
        q=q,
        limit=HITS_PER_PAGE + 1,
        before=int(before) if before.isdigit() else None,
    )
    more = len(hits) > HITS_PER_PAGE
    hits = hits[:HITS_PER_PAGE]
    base = query_without(request, "before", "page")
    return {
        "hits": hits,
        "hits_workspace": workspace,
        "hits_more_query": f"{base}&before={hits[-1].event_id}" if more else None,
        "hits_first_query": base if before else None,
    }


def _aligned(seq: int) -> int:
    return max(1, ((seq - 1) // TIMELINE_PAGE) * TIMELINE_PAGE + 1)


@login_required
@require_GET
def thread_timeline(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    base = reverse("thread-timeline", args=[thread.pk])
    if request.GET.get("seq", "").strip():
        try:
            seq = min(max(1, int(request.GET["seq"])), max(thread.last_seq, 1))
        except ValueError:
            return redirect(base)
        return redirect(f"{base}?from={_aligned(seq)}#seq-{seq}")
    newest = _aligned(thread.last_seq)
    try:
        # A page past the end (an old link, a typed number) is the newest page.
        from_seq = min(_aligned(int(request.GET.get("from", ""))), newest)
    except ValueError:
        from_seq = newest  # the newest page first: that is where work is
    # The event before the page comes along (same query), for the gap before the first one.
    before = 1 if from_seq > 1 else 0
    rows = selectors.event_window_for_page(
        thread=thread,
        from_seq=from_seq - before,
        limit=TIMELINE_PAGE + before,
        chars=page_prefix_chars(),
    )
    previous_at = rows[0].created_at if before and rows else None
    rows = rows[before:]
    until = from_seq + TIMELINE_PAGE - 1

    def href(seq: int | None) -> str:
        if seq is None:
            return ""
        if from_seq <= seq <= until:
            return f"#seq-{seq}"
        return f"{base}?from={_aligned(seq)}#seq-{seq}"

    # Results, resolutions and each call's duration, from one query (the time axis).
    closings = selectors.call_closings(
        thread=thread, calls=rows, after=from_seq - 1, now=timezone.now()
    )
    closing = closings.closing
    effects = selectors.side_effects_for_calls(thread=thread, call_seqs=list(closings.timings))
    approvals = selectors.approvals_for_requests(
        thread=thread, seqs=[e.seq for e in rows if e.kind == "approval_request"]
    )
    # What bears on each request (docs/repairs.md, "Approvals"): its related side effects.
    related = selectors.approval_related_side_effects(approvals.values())
    # Retractions of the window's events, wherever they are (docs/event-log.md, "Kinds").
    retracted_by = selectors.retractions_by_target(
        thread=thread, targets={e.seq for e in rows if e.kind in RETRACTABLE_KINDS}
    )
    shown: dict[int, dict[str, Any]] = {}
    for event in rows:
        item = present(event)
        item["timing"] = closings.timings.get(event.seq)
        gap = gap_seconds(previous_at, event.created_at)
        item["gap"] = None if gap is None else duration_text(gap)
        previous_at = event.created_at
        item["closed_by"] = [(s, href(s)) for s in closing.get(event.seq, [])]
        item["call_href"] = href(item["call_seq"])
        item["approval_href"] = href(item["approval_seq"])
        item["retracts_href"] = href(item["retracts"])
        by = retracted_by.get(event.seq)
        item["retracted_by"] = (
            {"seq": by, "href": href(by), "label": f"retracted by #{by}"}
            if by is not None
            else None
        )
        item["effect"] = effect = effects.get(event.seq)
        item["approval"] = approval = approvals.get(event.seq)
        # A badge of something open links to where a person acts on it, as the banner does.
        item["effect_target"] = (
            selectors.side_effect_target(effect, thread)
            if effect is not None and effect.status in selectors.OPEN_EFFECT_STATUSES
            else ""
        )
        item["approval_expired"] = approval is not None and selectors.approval_expired(approval)
        if approval is not None:
            item["headline"] = approval_presented(approval)["title"]
            item["approval_picked_up"] = selectors.approval_picked_up(approval, thread)
            item["approval_related"] = related.get(approval.pk, [])
            item["approval_open_related"] = [
                r for r in item["approval_related"] if r["status"] in OPEN_STATUSES
            ]
        item["approval_target"] = (
            selectors.approval_target(approval, thread)
            if approval is not None
            and approval.status == ApprovalStatus.PENDING
            and not item["approval_expired"]
            else ""
        )
        shown[event.seq] = item
    units = []
    split = split_units(
        [
            {
                "seq": e.seq,
                "kind": e.kind,
                "role": e.data.get("role"),
                "call_seq": e.data.get("call_seq"),
                "side_effect": e.data.get("side_effect", False),
                "retracts": e.data.get("retracts"),
                "token_count": e.token_count,
            }
            for e in rows
        ],
        closed_calls={c for c, seqs in closing.items() if any(s > until for s in seqs)},
    )
    for index, unit in enumerate(split):
        units.append(
            {
                "from_seq": unit.from_seq,
                "to_seq": unit.to_seq,
                "tokens": unit.tokens,
                "closed": unit.closed,
                "side_effect": unit.has_side_effect,
                # A window can start inside a unit; say so rather than pretend it starts here.
                "continued": index == 0 and from_seq > 1 and rows[0].data.get("role") != "user",
                "events": [shown[e["seq"]] for e in unit.events],
            }
        )
    context = {
        **thread_tabs(request, thread, "timeline"),
        "units": units,
        "from_seq": from_seq,
        "until": min(until, thread.last_seq),
        "prev_from": from_seq - TIMELINE_PAGE if from_seq > 1 else None,
        "next_from": until + 1 if until < thread.last_seq else None,
        "last_from": _aligned(thread.last_seq),
        "page_size": TIMELINE_PAGE,
    }
    return render(request, "threads/thread_timeline.html", context)


@login_required
@require_GET
def thread_event_body(request: HtmxHttpRequest, id: str, seq: int) -> HttpResponse:
    """One event's whole body, which pages cut at BODY_SHOWN_CHARS: for htmx the fragment
    that replaces the cut one (escaped, inside hx-disable), else the text itself as
    text/plain, which a browser shows and never runs."""
    thread = thread_for(request, id)
    event = found(selectors.event_get, thread=thread, seq=seq)
    body = event_body(event)
    if request.htmx:
        return render(request, "threads/_body_full.html", {"body": body})
    return HttpResponse(body, content_type="text/plain; charset=utf-8")


@login_required
@require_GET
def thread_event(request: HtmxHttpRequest, id: str, seq: int) -> HttpResponse:
    """One event: the card alone for htmx (a summary entry's sources expanded in place), the
    thread's page around it otherwise."""
    thread = thread_for(request, id)
    event = found(selectors.event_get_for_page, thread=thread, seq=seq, chars=page_prefix_chars())
    item = present(event)
    # Its links as the timeline draws them, to the timeline (the card is shown elsewhere).
    timeline = reverse("thread-timeline", args=[thread.pk])

    def href(target: int | None) -> str:
        return "" if target is None else f"{timeline}?seq={target}"

    if event.kind == "tool_call":
        closings = selectors.call_closings(
            thread=thread, calls=[event], after=event.seq, now=timezone.now()
        )
        item["closed_by"] = [(closing, href(closing)) for closing in closings.closing.get(seq, [])]
        item["timing"] = closings.timings.get(seq)
        item["effect"] = effect = selectors.side_effects_for_calls(
            thread=thread, call_seqs=[seq]
        ).get(seq)
        if effect is not None and effect.status in selectors.OPEN_EFFECT_STATUSES:
            item["effect_target"] = selectors.side_effect_target(effect, thread)
    item["call_href"] = href(item["call_seq"])
    item["approval_href"] = href(item["approval_seq"])
    item["retracts_href"] = href(item["retracts"])
    if event.kind in RETRACTABLE_KINDS:
        by = selectors.retractions_by_target(thread=thread, targets={seq}).get(seq)
        if by is not None:
            item["retracted_by"] = {"seq": by, "href": href(by), "label": f"retracted by #{by}"}
    if request.htmx:
        context = {
            "thread": thread,
            "event": item,
            "can_admin": can(request, thread.workspace_id, Role.ADMIN),
        }
        return render(request, "threads/_event_card.html", context)
    # Opened as a page (a bookmark, a link opened in a new tab): the card in the thread's page.
    context = {**thread_tabs(request, thread, "event"), "event": item}
    return render(request, "threads/thread_event.html", context)
