"""A thread's repair controls in its page header (docs/repairs.md, "Rollback"): an admin changes the
summariser and fold settings, pauses the thread's folds, or releases a pause or a rollback's
pin. Each answers the header's region
(`thread_base.html#thread_repair`) to htmx, and a 303 to the thread's page otherwise. And on
an event's card: an admin redacts the event (docs/event-log.md, "Redaction"), then sees the
card again with its placeholder."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from threads.domain.budget import MAX_TOKENS
from threads.domain.errors import DomainError, InvalidEvent
from threads.models import Role, SummarizerBackend, Thread
from threads.services.pins import thread_unpin
from threads.services.redaction import event_redact_request
from threads.services.thread_update import thread_update
from threads.views.common import (
    HtmxHttpRequest,
    done,
    problem,
    require,
    thread_for,
    with_notice_cleared,
)
from threads.views.threads import thread_tabs


class ThreadSettingsForm(forms.Form):
    """The settings the API's PATCH takes (docs/api.md, "Settings — `PATCH /api/v1/threads/{id}/`"),
    each required: the form always shows the thread's current values."""

    summarizer = forms.ChoiceField(choices=SummarizerBackend.choices)
    context_window = forms.IntegerField(min_value=0, max_value=MAX_TOKENS)
    reserved_output = forms.IntegerField(min_value=0, max_value=MAX_TOKENS)
    reasoning_reserve = forms.IntegerField(min_value=0, max_value=MAX_TOKENS)
    safety_margin = forms.IntegerField(min_value=0, max_value=MAX_TOKENS)
    fixed_tokens = forms.IntegerField(min_value=0, max_value=MAX_TOKENS)
    high_watermark = forms.FloatField(min_value=0, max_value=1)
    low_watermark = forms.FloatField(min_value=0, max_value=1)


def _answer(request: HtmxHttpRequest, thread: Thread) -> HttpResponse:
    back = reverse("thread-timeline", args=[thread.pk])
    if not request.htmx:
        return done(request, back)
    context: dict[str, Any] = thread_tabs(request, thread, "")
    response = render(request, "threads/thread_base.html#thread_repair", context)
    return with_notice_cleared(request, response)


@login_required
@require_POST
def thread_settings(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.ADMIN)
    back = reverse("thread-timeline", args=[thread.pk])
    form = ThreadSettingsForm(request.POST)
    try:
        if not form.is_valid():
            fields = {name: " ".join(map(str, errors)) for name, errors in form.errors.items()}
            raise InvalidEvent(f"invalid settings: {', '.join(fields)}", fields=fields)
        updated = thread_update(thread=thread, actor=request.user, **form.cleaned_data)
    except DomainError as exc:
        return problem(request, exc, back)
    return _answer(request, updated)


@login_required
@require_POST
def thread_unpin_view(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.ADMIN)
    back = reverse("thread-timeline", args=[thread.pk])
    try:
        released = thread_unpin(
            thread=thread, actor=request.user, reason=request.POST.get("reason", "")
        )
    except DomainError as exc:
        return problem(request, exc, back)
    return _answer(request, released)


@login_required
@require_POST
def thread_pause_view(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.ADMIN)
    back = reverse("thread-timeline", args=[thread.pk])
    try:
        paused = thread_update(
            thread=thread,
            actor=request.user,
            folds_paused=True,
            pause_reason=request.POST.get("reason", ""),
        )
    except DomainError as exc:
        return problem(request, exc, back)
    return _answer(request, paused)


@login_required
@require_POST
def event_redact_view(request: HtmxHttpRequest, id: str, seq: int) -> HttpResponse:
    """The Redact form of an event's card, and the one-click redaction of its secret badge
    (docs/event-log.md, "Redaction"): a reason and the confirmation are required."""
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.ADMIN)
    back = reverse("thread-timeline", args=[thread.pk]) + f"?seq={seq}"
    try:
        if not request.POST.get("confirm"):
            raise InvalidEvent(
                "confirm the redaction: the content leaves the database for good",
                fields={"confirm": "this field is required"},
            )
        event_redact_request(
            thread=thread, seq=seq, actor=request.user, reason=request.POST.get("reason", "")
        )
    except DomainError as exc:
        return problem(request, exc, back)
    return done(request, back)
