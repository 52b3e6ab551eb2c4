"""Agent authentication: `Authorization: Bearer <workspace api key>`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from threads.access import chosen_workspace_id
from threads.models import ApiKey, Thread, Workspace
from threads.selectors import api_key_get_active, thread_get_for_member, thread_get_for_workspace
from threads.services.run_status import agent_read_record
from threads.services.workspaces import api_key_digest


@dataclass(frozen=True)
class AgentPrincipal:
    """The identity of a request made with an API key: a workspace, never a person."""

    workspace: Workspace
    key: ApiKey

    is_authenticated = True
    is_active = True

    @property
    def label(self) -> str:
        return f"api key {self.key.name}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[AgentPrincipal, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        # The scheme's name is case-insensitive (RFC 9110, section 11.1): "bearer" is "Bearer".
        if scheme.lower() != self.keyword.lower() or not secret.strip():
            raise exceptions.AuthenticationFailed("use Authorization: Bearer <api key>")
        key = api_key_get_active(digest=api_key_digest(secret.strip()))
        if key is None:
            raise exceptions.AuthenticationFailed("unknown or revoked API key")
        if key.last_used_at is None or (timezone.now() - key.last_used_at).total_seconds() > 60:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
        return AgentPrincipal(workspace=key.workspace, key=key), key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def is_agent(user: Any) -> bool:
    return isinstance(user, AgentPrincipal)


def agent_of(request: Request) -> AgentPrincipal | None:
    """The agent behind an API-key request, or None for a person's session."""
    user: Any = request.user
    return user if isinstance(user, AgentPrincipal) else None


def require_agent(request: Request, action: str) -> AgentPrincipal:
    """Only agents (API keys) may do this; people are refused with 403."""
    agent = agent_of(request)
    if agent is None:
        raise exceptions.PermissionDenied(f"only agents (API keys) may {action}")
    return agent


def thread_for_request(request: Request, id: str) -> Thread:
    """The thread by UUID or external_id as the caller may see it: an agent within its workspace,
    a person within their workspaces (an external_id in their current one, as on the
    dashboard). Anything else is 404, never 403 (docs/access.md, "People and access")."""
    agent = agent_of(request)
    if agent is not None:
        return thread_get_for_workspace(workspace=agent.workspace, id=id)
    return thread_get_for_member(
        user=request.user, id=id, workspace_id=chosen_workspace_id(request)
    )


def agent_read_mark(request: Request, thread: Thread | None) -> None:
    """An agent (an API key, never a person) read its thread's context, approvals or saved graph
    state: it has picked up what the thread row owed it when the request read that row, before
    the answer (run status, docs/dashboard.md, "Dashboard"). A person's read marks nothing."""
    if thread is not None and agent_of(request) is not None:
        agent_read_record(thread=thread)


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """Documents the agents' bearer key in the OpenAPI schema."""

    target_class = "threads.api.auth.ApiKeyAuthentication"
    name = "apiKeyAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A workspace API key: `Authorization: Bearer <key>` (agents).",
        }
