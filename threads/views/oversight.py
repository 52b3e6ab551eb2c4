"""Integrity (chain verdicts, unsafe checkpoints, verify with progress) and the audit log."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from threads import selectors
from threads.models import Role
from threads.services.integrity import integrity_verify_request
from threads.views.common import (
    HtmxHttpRequest,
    can,
    page_of,
    progress_started,
    query_without,
    region,
    require,
    thread_for,
)


@login_required
@require_GET
def integrity(request: HtmxHttpRequest) -> HttpResponse:
    page = page_of(selectors.threads_integrity_for_member(user=request.user), request, 50)
    # Where to go back to: only broken chains need it, read for the whole page at once.
    last_safe = selectors.last_safe_checkpoints(
        thread_ids={thread.pk for thread in page.object_list if not thread.chain_ok}
    )
    rows = [
        {
            "thread": thread,
            "can_verify": can(request, thread.workspace_id, Role.OPERATOR),
            "last_safe": last_safe.get(thread.pk),
        }
        for thread in page.object_list
    ]
    context = {
        "page": page,
        "rows": rows,
        "unsafe": selectors.unsafe_checkpoints_for_member(user=request.user)[:50],
        "second_results": selectors.second_results_for_member(user=request.user)[:50],
        "page_query": query_without(request, "page"),
    }
    return region(request, "threads/integrity.html", context, "chains")


@login_required
@require_POST
def integrity_verify(request: HtmxHttpRequest, id: str) -> HttpResponse:
    """Recompute the thread's chain from genesis in a task; the page polls its progress."""
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.OPERATOR)
    back = reverse("integrity")
    run = integrity_verify_request(thread=thread, actor=request.user)
    return progress_started(request, run, back)


@login_required
@require_GET
def audit(request: HtmxHttpRequest) -> HttpResponse:
    actor = request.GET.get("actor", "").strip()
    action = request.GET.get("action", "").strip()
    thread = request.GET.get("thread", "").strip()
    entries = selectors.audit_for_member(
        user=request.user, actor=actor, action=action, thread=thread
    )
    context = {
        "page": page_of(entries, request, 50),
        "facets": selectors.audit_facets_for_member(user=request.user),
        "actor": actor,
        "action": action,
        "thread_filter": thread,
        "page_query": query_without(request, "page"),
    }
    return region(request, "threads/audit.html", context, "entries")
