"""Forget page (admins of the current workspace; docs/dashboard.md, "The Forget page"): erase
a value from every event that mentions it (docs/repairs.md, "Erasure by subject"), previewed
first, through the same task as the API; and the workspace's retention policy
(docs/operations.md, "Retention"), changed and dry-run here (the dry run a task too: it reads
the whole workspace), never applied here (the beat applies it).

The value typed travels only in the form's POST and the task's message: the page's URLs name
the task run, and the report holds the value's SHA-256 (threads.services.subject_erasure). An
answer that shows the form filled in again is never kept by a browser or proxy cache.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from threads import selectors
from threads.access import chosen_workspace_id
from threads.domain.errors import DomainError
from threads.models import Role, TaskRun, TaskState, Workspace
from threads.services.audit import MAX_REASON
from threads.services.retention import workspace_retention_update
from threads.services.retention_preview import RETENTION_PREVIEW_KIND, retention_preview_start
from threads.services.subject_erasure import (
    MAX_VALUE,
    SUBJECT_ERASURE_KIND,
    subject_erasure_start,
)
from threads.views.common import HtmxHttpRequest, can, found, progress_context, region

TEMPLATE = "threads/forget.html"
# The services name the value `query` (the API's field); the form names it `value`.
FIELD_NAMES = {"query": "value"}


class ErasureForm(forms.Form):
    value = forms.CharField(max_length=MAX_VALUE)
    reason = forms.CharField(max_length=MAX_REASON)


class RetentionForm(forms.Form):
    """Empty: off (keep every thread, every checkpoint)."""

    retention_days = forms.IntegerField(min_value=1, required=False)
    keep_checkpoints = forms.IntegerField(min_value=1, required=False)


def _admin_workspace(request: HtmxHttpRequest) -> Workspace:
    """The person's current workspace, where they must be an admin (any other role is 403)."""
    workspace = selectors.workspace_current_for_member(
        user=request.user, workspace_id=chosen_workspace_id(request)
    )
    if workspace is None or not can(request, workspace, Role.ADMIN):
        raise PermissionDenied("the Forget page needs the admin role in the current workspace")
    return workspace


def _refused(form: forms.Form, exc: DomainError) -> None:
    """The service's refusal on the form: under its field, or above the form."""
    named = [name for name in exc.fields if FIELD_NAMES.get(name, name) in form.fields]
    for name in named:
        form.add_error(FIELD_NAMES.get(name, name), str(exc.fields[name]))
    if not named:
        form.add_error(None, exc.message)


def _retention_form(workspace: Workspace) -> RetentionForm:
    return RetentionForm(
        initial={
            "retention_days": workspace.retention_days,
            "keep_checkpoints": workspace.keep_checkpoints,
        }
    )


def _task_outcome(run: TaskRun, url_name: str) -> tuple[dict[str, Any], Any]:
    """A task's progress region (it reloads the page's region from `url_name` when the task
    ends) and its report: the result of a task that succeeded, else None (a failed one's
    `{"error": ...}` is shown by the progress region)."""
    progress = progress_context(run, reverse(url_name, args=[run.id]), reloads=True)
    succeeded = run.state == TaskState.SUCCESS and isinstance(run.result, dict)
    return progress, run.result if succeeded else None


def _erasure_context(run: TaskRun) -> dict[str, Any]:
    progress, report = _task_outcome(run, "forget-erasure")
    return {"run": run, "progress": progress, "report": report}


def _context(workspace: Workspace, **extra: Any) -> dict[str, Any]:
    return {
        "workspace": workspace,
        "erasure_form": ErasureForm(),
        "retention_form": _retention_form(workspace),
        **extra,
    }


def _no_store(response: HttpResponse) -> HttpResponse:
    # The form may be filled in with the value to erase.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_GET
def forget(request: HtmxHttpRequest) -> HttpResponse:
    workspace = _admin_workspace(request)
    return region(request, TEMPLATE, _context(workspace), "erasure")


@login_required
@require_POST
def forget_erase(request: HtmxHttpRequest) -> HttpResponse:
    """Preview (`action=preview`, the default) or run an erasure by subject: queues its task.
    htmx gets the erasure region (the form, then the task's progress and its report); a plain
    form post a redirect to the run's report."""
    workspace = _admin_workspace(request)
    form = ErasureForm(request.POST)
    dry_run = request.POST.get("action") != "erase"
    run = None
    if form.is_valid():
        try:
            run = subject_erasure_start(
                workspace=workspace,
                actor=request.user,
                query=form.cleaned_data["value"],
                reason=form.cleaned_data["reason"],
                dry_run=dry_run,
            )
        except DomainError as exc:
            _refused(form, exc)
    if run is None:
        context = _context(workspace, erasure_form=form)
        return _no_store(region(request, TEMPLATE, context, "erasure", status=400))
    if not request.htmx:
        return redirect("forget-erasure", task_id=run.id)
    run = selectors.task_run_get_in(workspace_ids=[workspace.pk], id=run.id)
    # After a preview the form stays filled in, for "Erase" to follow; after a run it empties.
    context = _context(workspace, **_erasure_context(run))
    if dry_run:
        context["erasure_form"] = form
    return _no_store(region(request, TEMPLATE, context, "erasure"))


@login_required
@require_GET
def forget_erasure(request: HtmxHttpRequest, task_id: str) -> HttpResponse:
    """An erasure's progress, then its report: the report region for htmx (it reloads when the
    progress region announces the end), the page otherwise."""
    workspace = _admin_workspace(request)
    # Like everything on the page, of the current workspace: another's run is not there (404).
    run = found(selectors.task_run_get_in, workspace_ids=[workspace.pk], id=task_id)
    if run.kind != SUBJECT_ERASURE_KIND:
        raise Http404("no such erasure")
    context = _context(workspace, **_erasure_context(run))
    return region(request, TEMPLATE, context, "erasure_report")


@login_required
@require_POST
def forget_retention(request: HtmxHttpRequest) -> HttpResponse:
    """Change the workspace's retention policy (audited `workspace.settings`, as the command's
    change is); an empty field turns that part off."""
    workspace = _admin_workspace(request)
    form = RetentionForm(request.POST)
    if form.is_valid():
        try:
            workspace = workspace_retention_update(
                workspace=workspace,
                actor_label=request.user.get_username(),
                retention_days=form.cleaned_data["retention_days"],
                keep_checkpoints=form.cleaned_data["keep_checkpoints"],
            )
        except DomainError as exc:
            _refused(form, exc)
    if form.errors:
        context = _context(workspace, retention_form=form)
        return region(request, TEMPLATE, context, "retention", status=400)
    if not request.htmx:
        return redirect("forget")
    context = _context(workspace, retention_saved=True)
    return region(request, TEMPLATE, context, "retention")


def _retention_context(run: TaskRun) -> dict[str, Any]:
    progress, report = _task_outcome(run, "forget-retention-report")
    return {"retention_run": run, "retention_progress": progress, "retention_report": report}


@login_required
@require_POST
def forget_retention_preview(request: HtmxHttpRequest) -> HttpResponse:
    """Queue a dry run of the retention policy (nothing is deleted or audited): htmx gets the
    preview region (the task's progress, then its report), a plain form post a redirect to
    the run's report."""
    workspace = _admin_workspace(request)
    run = retention_preview_start(workspace=workspace, actor=request.user)
    if not request.htmx:
        return redirect("forget-retention-report", task_id=run.id)
    run = selectors.task_run_get_in(workspace_ids=[workspace.pk], id=run.id)
    context = _context(workspace, **_retention_context(run))
    return region(request, TEMPLATE, context, "retention_preview")


@login_required
@require_GET
def forget_retention_report(request: HtmxHttpRequest, task_id: str) -> HttpResponse:
    """A dry run's progress, then its report: the preview region for htmx (it reloads when the
    progress announces the end), the page otherwise."""
    workspace = _admin_workspace(request)
    run = found(selectors.task_run_get_in, workspace_ids=[workspace.pk], id=task_id)
    if run.kind != RETENTION_PREVIEW_KIND:
        raise Http404("no such dry run")
    context = _context(workspace, **_retention_context(run))
    return region(request, TEMPLATE, context, "retention_preview")
