"""Workspaces, people's roles and agents' API keys (docs/access.md, "People and access")."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from threads.domain.errors import InvalidEvent
from threads.models import ApiKey, Membership, Role, Workspace
from threads.services.audit import audit_record

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
    """Create or update a person and their role in a workspace.

    A password is held to AUTH_PASSWORD_VALIDATORS, as Django's own forms hold it: refused,
    it is InvalidEvent naming every failure, and nothing is written. A person created without
    one gets an unusable password: they cannot sign in until one is set (an existing person's
    password stays as it was)."""
    if role not in Role.values:
        raise InvalidEvent(
            f"role must be one of {', '.join(Role.values)}", fields={"role": "unknown role"}
        )
    user_model = get_user_model()
    with transaction.atomic(durable=True):
        user, created = user_model.objects.get_or_create(username=username)
        if password:
            try:
                validate_password(password, user)
            except ValidationError as exc:
                problem = " ".join(exc.messages)
                raise InvalidEvent(
                    f"password refused: {problem}", fields={"password": problem}
                ) from None
            user.set_password(password)
            user.save()
        elif created:
            user.set_unusable_password()
            user.save()
        Membership.objects.update_or_create(workspace=workspace, user=user, defaults={"role": role})
    return user


def workspace_settings_update(
    *,
    workspace: Workspace,
    actor_label: str,
    stall_after_seconds: int | None = None,
    redaction_needs_second_admin: bool | None = None,
    redact_secrets_at_ingest: bool | None = None,
) -> Workspace:
    """Change a workspace's settings, audited (those given; None leaves one as it is):
    `stall_after_seconds`, after how long a thread that waits for its agent is `stalled`
    (docs/dashboard.md, "Run status"); `redaction_needs_second_admin`, whether a redaction
    waits for a second admin's approval (docs/event-log.md, "Redaction");
    `redact_secrets_at_ingest`, whether the secrets found in an event are taken out before it
    is stored (docs/event-log.md, "Secrets redacted at ingest"). Locks the workspace row
    (select_for_update) for the before/after of the audit entry."""
    if stall_after_seconds is not None and stall_after_seconds < 1:
        raise InvalidEvent(
            "stall_after_seconds must be at least 1",
            fields={"stall_after_seconds": "at least 1 second"},
        )
    changes: dict[str, Any] = {
        name: value
        for name, value in (
            ("stall_after_seconds", stall_after_seconds),
            ("redaction_needs_second_admin", redaction_needs_second_admin),
            ("redact_secrets_at_ingest", redact_secrets_at_ingest),
        )
        if value is not None
    }
    return workspace_fields_update(workspace=workspace, actor_label=actor_label, changes=changes)


def workspace_fields_update(
    *, workspace: Workspace, actor_label: str, changes: dict[str, Any]
) -> Workspace:
    """Set these fields of the workspace (already checked) and audit the change
    (`workspace.settings`, before and after), the row locked (select_for_update) for the
    before. No change, no write and no audit entry."""
    with transaction.atomic(durable=True):
        locked = Workspace.objects.select_for_update().get(pk=workspace.pk)
        if not changes:
            return locked
        before = {name: getattr(locked, name) for name in changes}
        for name, value in changes.items():
            setattr(locked, name, value)
        locked.save(update_fields=list(changes))
        audit_record(
            workspace=locked,
            actor=None,
            actor_label=actor_label,
            action="workspace.settings",
            target_type="workspace",
            target_id=locked.pk,
            before=before,
            after=changes,
        )
    return locked
