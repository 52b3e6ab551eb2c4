"""Imports page (admins): upload a file of recorded conversations, follow its progress, read
its per-conversation report (docs/api.md, "Dashboard URLs" and "Imports — `/api/v1/imports/`",
docs/imports.md, "Imports of recorded traces").

The upload only stores the file and queues the import; the page then polls the task run
through the shared progress region, and the report region reloads when that region announces
the end (the `task-finished` event of the task progress view). An admin may cancel a pending
or running import here, and let the workspace's agent keys import (off by default).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import trigger_client_event

from integrations.trace_imports.models import ImportOutcome, ImportState, TraceImport
from integrations.trace_imports.readers import (
    FILE_FORMATS,
    FORMATS,
    upload_side_effect_tools,
)
from integrations.trace_imports.selectors import (
    trace_import_get_for_member,
    trace_imports_for_member,
)
from integrations.trace_imports.services.uploads import (
    FINISHED,
    UPLOAD_FORM_OVERHEAD,
    import_cancel,
    import_start,
    workspace_agents_may_import_set,
)
from threads import selectors
from threads.domain.errors import DomainError, InvalidEvent, NotFound, PayloadTooLarge
from threads.models import Role
from threads.views.common import (
    HtmxHttpRequest,
    found,
    page_of,
    problem,
    progress_context,
    query_without,
    region,
    require,
    roles,
)

REPORT_PAGE = 250


def _admin_workspace_ids(request: HtmxHttpRequest) -> list[int]:
    """The workspaces where the person may import; none at all is a 403 for the whole page."""
    ids = [pk for pk, role in roles(request).items() if role == Role.ADMIN]
    if not ids:
        raise PermissionDenied("imports need the admin role")
    return ids


def _import_context(request: HtmxHttpRequest, trace_import: TraceImport) -> dict[str, Any]:
    outcome = request.GET.get("outcome", "")
    lines = trace_import.report
    if outcome in ImportOutcome.values:
        lines = [line for line in lines if line["outcome"] == outcome]
    url = reverse("import-detail", args=[trace_import.pk])
    context: dict[str, Any] = {
        "ti": trace_import,
        "finished": trace_import.state in FINISHED,
        "lines": page_of(lines, request, REPORT_PAGE),
        "outcome": outcome,
        "outcomes": ImportOutcome.values,
        "page_query": query_without(request, "page"),
        "detail_url": url,
    }
    if trace_import.task_run is not None:
        context["progress"] = progress_context(trace_import.task_run, url)
    return context


@login_required
@require_GET
def import_list(request: HtmxHttpRequest) -> HttpResponse:
    admin_of = _admin_workspace_ids(request)
    workspaces = [w for w in selectors.workspaces_for_user(request.user) if w.pk in admin_of]
    imports = trace_imports_for_member(user=request.user, workspace_ids=admin_of)
    context = {
        "page": page_of(imports, request, 25),
        "page_query": query_without(request, "page"),
        "workspaces": workspaces,
        "formats": FILE_FORMATS,
        "other_formats": [name for name in FORMATS if name not in FILE_FORMATS],
        "max_bytes": settings.CTXADMIN_MAX_IMPORT_BYTES,
        "max_conversations": settings.CTXADMIN_MAX_IMPORT_CONVERSATIONS,
        "max_events": settings.CTXADMIN_MAX_IMPORT_EVENTS,
        "running_states": (ImportState.PENDING, ImportState.RUNNING),
    }
    return region(request, "threads/import_list.html", context, "imports")


@login_required
@require_http_methods(["GET", "POST"])
def import_upload(request: HtmxHttpRequest) -> HttpResponse:
    """Store the upload and queue its import; htmx gets the import's region (progress, then
    the report), a plain form post a 303 to the import's page. A GET (a link, a reload of the
    form's address) goes to the page that holds the form."""
    admin_of = _admin_workspace_ids(request)
    if request.method == "GET":
        return redirect(reverse("import-list") + "#import-form", permanent=False)
    back = reverse("import-list")
    limit = settings.CTXADMIN_MAX_IMPORT_BYTES
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit + UPLOAD_FORM_OVERHEAD:
            raise PayloadTooLarge(
                f"the file is larger than {limit} bytes (CTXADMIN_MAX_IMPORT_BYTES)",
                fields={"limit": limit},
            )
        upload = request.FILES.get("file")
        if upload is None:
            raise InvalidEvent("choose a file to import", fields={"file": "required"})
        workspace_id = request.POST.get("workspace") or (admin_of[0] if len(admin_of) == 1 else "")
        workspace = next(
            (
                w
                for w in selectors.workspaces_for_user(request.user)
                if str(w.pk) == str(workspace_id)
            ),
            None,
        )
        if workspace is None and workspace_id:
            raise NotFound("no such workspace")  # another workspace is not there (404)
        if workspace is None:
            raise InvalidEvent("choose a workspace", fields={"workspace": "required"})
        require(request, workspace, Role.ADMIN)
        trace_import = import_start(
            workspace=workspace,
            actor=request.user,
            fmt=request.POST.get("format", ""),
            file_name=upload.name or "",
            content=upload.read(),
            side_effect_tools=upload_side_effect_tools(request.POST.get("side_effect_tools")),
        )
    except DomainError as exc:
        return problem(request, exc, back)
    url = reverse("import-detail", args=[trace_import.pk])
    if not request.htmx:
        return redirect(url, permanent=False)
    trace_import = trace_import_get_for_member(user=request.user, id=trace_import.pk)
    context = _import_context(request, trace_import)
    response = render(request, "threads/import_detail.html#import_status", context)
    # The page's list of recent imports reloads to show this one.
    return trigger_client_event(response, "import-started", {"import_id": str(trace_import.pk)})


@login_required
@require_GET
def import_detail(request: HtmxHttpRequest, id: str) -> HttpResponse:
    trace_import = found(trace_import_get_for_member, user=request.user, id=id)
    require(request, trace_import.workspace_id, Role.ADMIN)
    if request.htmx and request.GET.get("part") == "progress":
        return render(
            request,
            "threads/import_detail.html#import_progress",
            _import_context(request, trace_import),
        )
    return region(
        request,
        "threads/import_detail.html",
        _import_context(request, trace_import),
        "import_status",
    )


@login_required
@require_POST
def import_cancel_view(request: HtmxHttpRequest, id: str) -> HttpResponse:
    """Cancel a pending or running import; back to its page."""
    trace_import = found(trace_import_get_for_member, user=request.user, id=id)
    url = reverse("import-detail", args=[trace_import.pk])
    try:
        import_cancel(trace_import=trace_import, actor=request.user)
    except DomainError as exc:
        return problem(request, exc, url)
    return redirect(url, permanent=False)


@login_required
@require_POST
def import_agents_view(request: HtmxHttpRequest) -> HttpResponse:
    """Let a workspace's agent keys import, or stop them (admins)."""
    back = reverse("import-list")
    workspace = next(
        (
            w
            for w in selectors.workspaces_for_user(request.user)
            if str(w.pk) == request.POST.get("workspace", "")
        ),
        None,
    )
    try:
        if workspace is None:
            raise NotFound("no such workspace")
        workspace_agents_may_import_set(
            workspace=workspace, actor=request.user, allowed=request.POST.get("allowed") == "1"
        )
    except DomainError as exc:
        return problem(request, exc, back)
    return redirect(back, permanent=False)
