"""Agents' API keys managed by a workspace's admins from the dashboard (docs/access.md,
"People and access"): issue (the secret is returned once and only its hash is stored), revoke, set
an expiry. Each writes its audit entry in the same transaction. The agent's request is refused the
moment a key is revoked or past its expiry: the authentication lookup reads both on every request
(threads.selectors.api_key_get_active)."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain.errors import FormSentAlready, InvalidEvent
from threads.models import ApiKey, Role, Workspace
from threads.services.audit import audit_record
from threads.services.workspaces import API_KEY_PREFIX, api_key_digest

KEY_ROLE = Role.ADMIN


def _key_state(key: ApiKey) -> dict[str, Any]:
    """What the audit log keeps of a key: never its secret or hash."""
    return {
        "name": key.name,
        "prefix": key.prefix,
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


def api_key_issue(
    *,
    workspace: Workspace,
    actor: AbstractBaseUser,
    name: str,
    expires_at: datetime | None = None,
    form_token: str | None = None,
) -> tuple[ApiKey, str]:
    """Create a key for the workspace's agents; return it and its secret, which is shown once
    and never stored. `form_token`: the issuing form's one-time token; a second key for the
    same token is refused (FormSentAlready), even when both requests arrive at once."""
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidEvent("a key needs a name of 1 to 100 characters", fields={"name": "required"})
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidEvent("the expiry must be in the future", fields={"expires_at": "past"})
    require_role(actor, workspace, KEY_ROLE)
    secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        try:
            with transaction.atomic():
                key = ApiKey.objects.create(
                    workspace=workspace,
                    name=name,
                    prefix=secret[:12],
                    key_hash=api_key_digest(secret),
                    expires_at=expires_at,
                    form_token=form_token or "",
                )
        except IntegrityError:
            if form_token and ApiKey.objects.filter(form_token=form_token).exists():
                raise FormSentAlready(
                    "this form created its key already; its secret was shown once. If it is "
                    "lost, revoke that key and create another",
                    fields={"form_token": "sent already"},
                ) from None
            raise
        audit_record(
            workspace=workspace,
            actor=actor,
            action="api_key.create",
            target_type="api_key",
            target_id=key.pk,
            after=_key_state(key),
        )
    return key, secret


def api_key_revoke(*, key: ApiKey, actor: AbstractBaseUser) -> ApiKey:
    """Revoke a key: every request carrying it is refused from now on. Revoking a revoked key
    changes nothing and records nothing."""
    require_role(actor, key.workspace, KEY_ROLE)
    with transaction.atomic(durable=True):
        locked = (
            ApiKey.objects.select_for_update(of=("self",))
            .select_related("workspace")
            .get(pk=key.pk)
        )
        if locked.revoked_at is not None:
            return locked
        before = _key_state(locked)
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="api_key.revoke",
            target_type="api_key",
            target_id=locked.pk,
            before=before,
            after=_key_state(locked),
        )
    return locked


def api_key_expiry_set(
    *, key: ApiKey, actor: AbstractBaseUser, expires_at: datetime | None
) -> ApiKey:
    """Set (or clear, with None) when a key stops working. A time in the past expires it now."""
    require_role(actor, key.workspace, KEY_ROLE)
    with transaction.atomic(durable=True):
        locked = (
            ApiKey.objects.select_for_update(of=("self",))
            .select_related("workspace")
            .get(pk=key.pk)
        )
        before = _key_state(locked)
        locked.expires_at = expires_at
        locked.save(update_fields=["expires_at"])
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="api_key.expire",
            target_type="api_key",
            target_id=locked.pk,
            before=before,
            after=_key_state(locked),
        )
    return locked
