"""Checkpoints tab: safe or not and why, an on-demand checkpoint, rollback behind a preview
and a required reason (admins), and fork."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from threads import selectors
from threads.access import ROLLBACK_ROLE
from threads.domain.errors import DomainError, InvalidEvent
from threads.models import Checkpoint, Role, Thread
from threads.services.checkpoints import checkpoint_create
from threads.services.fork import thread_fork
from threads.services.rollback import checkpoint_rollback
from threads.views.common import (
    HtmxHttpRequest,
    done,
    found,
    problem,
    require,
    thread_for,
)
from threads.views.threads import thread_tabs

# Checkpoints listed (newest cursor first), and the chain length the page may re-walk itself.
SHOWN = 100
WALK_LIMIT = 5000


def _posted_checkpoint(request: HtmxHttpRequest, thread: Thread) -> Checkpoint:
    """The thread's checkpoint that the form names (404 for none, or another thread's)."""
    try:
        checkpoint_id = int(request.POST.get("checkpoint", ""))
    except (TypeError, ValueError):
        checkpoint_id = 0
    return found(selectors.checkpoint_get, thread=thread, id=checkpoint_id)


def _preview_token(request: HtmxHttpRequest, name: str) -> int | None:
    """One of the rollback form's preview tokens (None when the form has none); one that is
    not a whole number is refused, never ignored: the check it carries would go with it."""
    value = request.POST.get(name)
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()):
        raise InvalidEvent(
            f"{name} must be the preview's whole number", fields={name: "not a whole number"}
        )
    return int(value)


@login_required
@require_GET
def checkpoint_list(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    rows = []
    checkpoints = selectors.checkpoints_for_thread(thread=thread)
    for checkpoint in checkpoints[:SHOWN]:
        checkpoint.thread = thread  # the same row: no query per checkpoint
        if checkpoint.cursor <= max(thread.verified_until, WALK_LIMIT):
            # Recomputed for display: a checkpoint can become unsafe before the sweep marks it
            # (its summary failed verification, or its checksum no longer recomputes).
            safe, reason = selectors.checkpoint_is_safe(checkpoint)
            unverified = False
        else:
            # Recomputing would walk an unverified chain from genesis on every page view;
            # show the recorded state and let the rollback (which re-walks) decide.
            safe, reason, unverified = checkpoint.safe, checkpoint.unsafe_reason, True
        rows.append(
            {"checkpoint": checkpoint, "safe": safe, "reason": reason, "unverified": unverified}
        )
    context = {
        **thread_tabs(request, thread, "checkpoints"),
        "rows": rows,
        "hidden": max(len(checkpoints) - SHOWN, 0),
    }
    return render(request, "threads/checkpoint_list.html", context)


@login_required
@require_POST
def checkpoint_new(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.OPERATOR)
    back = reverse("checkpoint-list", args=[thread.pk])
    try:
        checkpoint_create(thread=thread, label=request.POST.get("label", ""), actor=request.user)
    except DomainError as exc:
        return problem(request, exc, back)
    return done(request, back)


@login_required
@require_GET
def rollback_preview_view(request: HtmxHttpRequest, id: str, checkpoint: int) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, ROLLBACK_ROLE)
    target = found(selectors.checkpoint_get, thread=thread, id=checkpoint)
    try:
        preview = selectors.rollback_preview(thread=thread, checkpoint=target)
    except DomainError as exc:
        return problem(request, exc, reverse("checkpoint-list", args=[thread.pk]))
    context = {"thread": thread, "checkpoint": target, "preview": preview}
    return render(request, "threads/_rollback_preview.html", context)


@login_required
@require_POST
def rollback(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, ROLLBACK_ROLE)
    back = reverse("checkpoint-list", args=[thread.pk])
    target = _posted_checkpoint(request, thread)
    try:
        version = checkpoint_rollback(
            thread=thread,
            checkpoint=target,
            actor=request.user,
            reason=request.POST.get("reason", ""),
            after_rollback=_preview_token(request, "after_rollback"),
            after_version=_preview_token(request, "after_version"),
            pin=request.POST.get("pin") == "1",
        )
    except DomainError as exc:
        return problem(request, exc, back)
    if version is None:  # a state checkpoint with no summary to restore
        return done(request, back)
    return done(request, reverse("summary-detail", args=[thread.pk, version.version]))


@login_required
@require_POST
def fork(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.REVIEWER)
    back = reverse("checkpoint-list", args=[thread.pk])
    target = _posted_checkpoint(request, thread)
    try:
        child = thread_fork(
            thread=thread,
            checkpoint=target,
            external_id=request.POST.get("external_id", ""),
            actor=request.user,
        )
    except DomainError as exc:
        return problem(request, exc, back)
    return done(request, reverse("thread-timeline", args=[child.pk]))
