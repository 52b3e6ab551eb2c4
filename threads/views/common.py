"""What every dashboard view shares: the typed request, workspace scoping, role gates, the
htmx partial/redirect answer, refusals explained, and task progress regions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event
from django_htmx.middleware import HtmxDetails

from threads import selectors
from threads.access import chosen_workspace_id, has_role
from threads.domain.errors import DomainError, NotFound
from threads.models import Role, TaskRun, TaskState, Thread, Workspace


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
    user: User  # every dashboard view is behind login_required


def roles(request: HttpRequest) -> dict[int, str]:
    """The person's role per workspace, read once per request."""
    cached = getattr(request, "_ctx_roles", None)
    if cached is None:
        cached = selectors.member_roles(request.user)
        request._ctx_roles = cached  # type: ignore[attr-defined]
    return cached


def can(request: HttpRequest, workspace: Workspace | int, needed: Role) -> bool:
    workspace_id = workspace if isinstance(workspace, int) else workspace.pk
    return has_role(roles(request).get(workspace_id), needed)


def require(request: HttpRequest, workspace: Workspace | int, needed: Role) -> None:
    """The server's own gate: a hidden button is a courtesy, this is the rule."""
    if not can(request, workspace, needed):
        raise PermissionDenied(f"this needs the {needed.value} role")


def thread_for(request: HttpRequest, id: str) -> Thread:
    """A thread of the person's workspaces, an external_id in their current one; any other
    thread does not exist (404)."""
    try:
        return selectors.thread_get_for_member(
            user=request.user, id=id, workspace_id=chosen_workspace_id(request)
        )
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def local_url(request: HttpRequest, url: str, default: str = "") -> str:
    """`url` (a `back` or `next` parameter) if it is a path on this site, else `default`.

    Django's own check, not a prefix test: browsers read `/\\host` as `//host`, and strip
    tabs and newlines before they parse a URL.
    """
    if url.startswith("/") and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return url
    return default


def found(getter: Callable[..., Any], **kwargs: Any) -> Any:
    try:
        return getter(**kwargs)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def page_of(items: Any, request: HttpRequest, per_page: int = 50) -> Page:
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def query_without(request: HttpRequest, *names: str) -> str:
    """The current query string minus some parameters (for pagination and sort links)."""
    params = [(k, v) for k, v in request.GET.items() if k not in names and v != ""]
    return urlencode(params)


def region(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    partial: str,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only the named partial when htmx asks for a region."""
    name = f"{template}#{partial}" if request.htmx and not request.htmx.boosted else template
    return render(request, name, context, status=status)


def done(
    request: HtmxHttpRequest,
    url: str,
    template: str | None = None,
    context: dict[str, Any] | None = None,
    partial: str = "",
) -> HttpResponse:
    """After an action: htmx gets the updated region (or a client redirect), a plain form
    post gets a 303 to the page (post/redirect/get)."""
    if request.htmx:
        if template and partial:
            return render(request, f"{template}#{partial}", context or {})
        return HttpResponseClientRedirect(url)
    return redirect(url, permanent=False)


def problem(
    request: HtmxHttpRequest, exc: DomainError, back: str, refreshed: str = ""
) -> HttpResponse:
    """A refused action explained in the page's notice area, with the service's status.
    `refreshed`: out-of-band regions (hx-swap-oob) sent along for htmx, such as the card of an
    approval someone else decided meanwhile, so the page stops offering what was refused."""
    context = {"message": exc.message, "fields": exc.fields, "code": exc.code, "back": back}
    if not request.htmx:
        return render(request, "threads/problem_page.html", context, status=exc.status)
    response = render(request, "threads/_problem.html", context, status=exc.status)
    if refreshed:
        response.content += refreshed.encode()
    response["HX-Retarget"] = "#notice"
    response["HX-Reswap"] = "innerHTML"
    return response


# Sent with a region an action answers: the notice of an earlier refusal goes (out of band).
NOTICE_CLEARED = '<div id="notice" role="status" aria-live="polite" hx-swap-oob="true"></div>'


def with_notice_cleared(request: HtmxHttpRequest, response: HttpResponse) -> HttpResponse:
    """`response` (an action's region for htmx) clearing the page's notice too."""
    if request.htmx and response.status_code == 200:
        response.content += NOTICE_CLEARED.encode()
    return response


def unclaimed(run: TaskRun) -> bool:
    """No worker has taken the task: it has stayed PENDING past CTXADMIN_TASK_PICKUP_WARNING.
    Eager tasks and a live worker leave PENDING at once, so they never show it."""
    waited = (timezone.now() - run.created_at).total_seconds()
    return run.state == TaskState.PENDING and waited > settings.CTXADMIN_TASK_PICKUP_WARNING


def progress_context(run: TaskRun, back: str, reloads: bool = False) -> dict[str, Any]:
    """The progress region's context. `reloads`: the page reloads its own regions when the
    task ends (on the `task-finished` event), so the region offers no "Refresh page"."""
    total = run.total or 0
    return {
        "reloads": reloads,
        "run": run,
        "finished": run.state in (TaskState.SUCCESS, TaskState.FAILURE),
        "unclaimed": unclaimed(run),
        "fraction": (run.done / total) if total else None,
        "back": back,
    }


def progress_started(
    request: HtmxHttpRequest, run: TaskRun, back: str, reloads: bool = False
) -> HttpResponse:
    """After enqueueing a task: htmx gets the progress region, which polls until it ends. A
    task that has already ended (a worker was quick, or tasks run eagerly) fires
    `task-finished` at once, as the region's last poll would."""
    run = selectors.task_run_get_in(workspace_ids=[run.workspace_id], id=run.id)
    context = progress_context(run, back, reloads)
    response = done(request, back, "threads/_task_progress.html", context, "progress")
    if request.htmx and context["finished"]:
        trigger_client_event(response, "task-finished", {"task_id": run.id})
    return response
