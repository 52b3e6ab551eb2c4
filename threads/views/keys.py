"""API keys page (admins; docs/api.md, "Dashboard URLs"): the workspace's agent keys, issuing one
(its secret shown once, in the answer to the form post and never again), revoking and expiring
them."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, date, datetime, time
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from threads import selectors
from threads.domain.errors import DomainError, InvalidEvent
from threads.models import Role
from threads.services.api_keys import api_key_expiry_set, api_key_issue, api_key_revoke
from threads.views.common import HtmxHttpRequest, found, page_of, problem, require, roles

TEMPLATE = "threads/api_keys.html"
# The new-key form's one-time token as _page makes it (a form without one issues its key
# without the check: ApiKey.form_token).
FORM_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,43}")


def _admin_workspace_ids(request: HtmxHttpRequest) -> list[int]:
    ids = [pk for pk, role in roles(request).items() if role == Role.ADMIN]
    if not ids:
        raise PermissionDenied("API keys need the admin role")
    return ids


def _expiry(text: str) -> datetime | None:
    """A date from the form: the key works until that day begins (UTC); empty: never expires."""
    text = text.strip()
    if not text:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise InvalidEvent("the expiry is a date, YYYY-MM-DD", fields={"expires": text}) from None
    return datetime.combine(day, time.min, tzinfo=UTC)


def _page(request: HtmxHttpRequest, **extra: Any) -> HttpResponse:
    admin_of = _admin_workspace_ids(request)
    context = {
        "page": page_of(selectors.api_keys_for_workspaces(workspace_ids=admin_of), request, 50),
        "workspaces": [w for w in selectors.workspaces_for_user(request.user) if w.pk in admin_of],
        # Each rendering of the new-key form gets its own token.
        "form_token": secrets.token_urlsafe(16),
        **extra,
    }
    response = render(request, TEMPLATE, context, status=201 if "secret" in extra else 200)
    if "secret" in extra:
        # The one answer that carries a secret: never kept by a browser or proxy cache.
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_GET
def api_key_list(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request)


@login_required
@require_POST
def api_key_new(request: HtmxHttpRequest) -> HttpResponse:
    admin_of = _admin_workspace_ids(request)
    back = reverse("api-key-list")
    try:
        workspace_id = int(request.POST.get("workspace", ""))
    except ValueError:
        raise Http404("no such workspace") from None
    if workspace_id not in roles(request):
        raise Http404("no such workspace")
    if workspace_id not in admin_of:
        raise PermissionDenied("API keys need the admin role")
    workspace = next(w for w in selectors.workspaces_for_user(request.user) if w.pk == workspace_id)
    token = request.POST.get("form_token", "")
    try:
        key, secret = api_key_issue(
            workspace=workspace,
            actor=request.user,
            name=request.POST.get("name", ""),
            expires_at=_expiry(request.POST.get("expires", "")),
            # Scoped to the person: another's token names no form of theirs.
            form_token=f"{request.user.pk}:{token}" if FORM_TOKEN.fullmatch(token) else None,
        )
    except DomainError as exc:
        return problem(request, exc, back)
    return _page(request, secret=secret, new_key=key)


def _key_of(request: HtmxHttpRequest, pk: int) -> Any:
    """A key of the person's workspaces (another workspace's is 404), for an admin there
    (any other role is 403)."""
    key = found(selectors.api_key_get_in, workspace_ids=list(roles(request)), id=pk)
    require(request, key.workspace_id, Role.ADMIN)
    return key


@login_required
@require_POST
def api_key_revoke_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    key = _key_of(request, pk)
    try:
        api_key_revoke(key=key, actor=request.user)
    except DomainError as exc:
        return problem(request, exc, reverse("api-key-list"))
    return redirect("api-key-list")


@login_required
@require_POST
def api_key_expiry_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    key = _key_of(request, pk)
    try:
        api_key_expiry_set(
            key=key, actor=request.user, expires_at=_expiry(request.POST.get("expires", ""))
        )
    except DomainError as exc:
        return problem(request, exc, reverse("api-key-list"))
    return redirect("api-key-list")
