"""Integrity (chain verdicts, unsafe checkpoints, verify with progress) and the audit log."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from threads import selectors
from threads.models import Role
from threads.services.audit import audit_record
from threads.services.integrity import last_safe_checkpoint
from threads.services.tasks import task_run_start
from threads.tasks import verify_thread_task
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
    rows = [
        {
            "thread": thread,
            "can_verify": can(request, thread.workspace_id, Role.OPERATOR),
            # Where to go back to: only broken chains need it, and they are the exception.
            "last_safe": None if thread.chain_ok else last_safe_checkpoint(thread=thread),
        }
        for thread in page.object_list
    ]
    context = {
        "page": page,
        "rows": rows,
        "unsafe": selectors.unsafe_checkpoints_for_member(user=request.user)[:50],
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
    thread_id = str(thread.pk)
    with transaction.atomic(durable=True):
        run = task_run_start(
            workspace=thread.workspace,
            thread=thread,
            kind="verify",
            send=lambda task_id: verify_thread_task.apply_async((thread_id,), task_id=task_id),
        )
        audit_record(
            workspace=thread.workspace,
            actor=request.user,
            action="verify_requested",
            target_type="thread",
            target_id=thread.pk,
            thread=thread,
            after={"task_id": run.id},
        )
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
