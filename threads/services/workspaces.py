"""Workspaces, people's roles and agents' API keys (docs/design.md §8)."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from threads.domain.errors import InvalidEvent
from threads.models import ApiKey, Membership, Role, Workspace

API_KEY_PREFIX = "ctx_"


def api_key_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def workspace_create(*, name: str) -> tuple[Workspace, str]:
    """Create a workspace and its first API key; return the key's secret (shown once)."""
    with transaction.atomic(durable=True):
        workspace = Workspace.objects.create(name=name)
        secret = _api_key_create(workspace=workspace, name="default")
    return workspace, secret


def api_key_create(*, workspace: Workspace, name: str) -> str:
    with transaction.atomic(durable=True):
        return _api_key_create(workspace=workspace, name=name)


def _api_key_create(*, workspace: Workspace, name: str) -> str:
    secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
    ApiKey.objects.create(
        workspace=workspace, name=name, prefix=secret[:12], key_hash=api_key_digest(secret)
    )
    return secret


def member_add(
    *, workspace: Workspace, username: str, role: str, password: str | None = None
) -> AbstractBaseUser:
    """Create or update a person and their role in a workspace."""
    if role not in Role.values:
        raise InvalidEvent(
            f"role must be one of {', '.join(Role.values)}", fields={"role": "unknown role"}
        )
    user_model = get_user_model()
    with transaction.atomic(durable=True):
        user, _ = user_model.objects.get_or_create(username=username)
        if password:
            user.set_password(password)
            user.save()
        Membership.objects.update_or_create(workspace=workspace, user=user, defaults={"role": role})
    return user
