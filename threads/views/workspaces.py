"""The workspace switcher: the person's current workspace, where an external_id resolves
(docs/access.md, "People and access")."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from threads.access import CURRENT_WORKSPACE_SESSION_KEY
from threads.views.common import HtmxHttpRequest, local_url, roles


@login_required
@require_POST
def workspace_switch(request: HtmxHttpRequest) -> HttpResponse:
    """Make one of the person's workspaces their current one; another workspace is 404."""
    try:
        workspace_id = int(request.POST.get("workspace", ""))
    except ValueError:
        raise Http404("no such workspace") from None
    if workspace_id not in roles(request):
        raise Http404("no such workspace")
    request.session[CURRENT_WORKSPACE_SESSION_KEY] = workspace_id
    return redirect(local_url(request, request.POST.get("next", ""), reverse("thread-list")))
