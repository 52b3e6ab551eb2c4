"""Workspaces, their people and their agents' API keys (docs/access.md, "People and access")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    OPERATOR = "operator"
    REVIEWER = "reviewer"
    ADMIN = "admin"


ROLE_RANK = {Role.OPERATOR: 1, Role.REVIEWER: 2, Role.ADMIN: 3}


class Workspace(models.Model):
    name = models.CharField(max_length=100, unique=True)
    # Run status (docs/dashboard.md, "Run status"): a thread that waits for its agent longer
    # than this is `stalled`.
    stall_after_seconds = models.PositiveIntegerField(default=15 * 60)
    created_at = models.DateTimeField(auto_now_add=True)
    # Whether the workspace's agent keys may upload trace imports (people with the admin role
    # always may): an import is heavy work, so it is opted into (docs/api.md,
    # "Imports — `/api/v1/imports/`").
    agents_may_import = models.BooleanField(default=False)
    # A redaction asked for by one admin happens only when a second admin approves it through
    # the approval queue (docs/event-log.md, "Redaction").
    redaction_needs_second_admin = models.BooleanField(default=False)
    # Retention (docs/operations.md, "Retention"): threads with no append and no repair for this
    # many days are deleted, leaving a signed tombstone (None: kept forever); and checkpoints
    # beyond the latest this many per thread are deleted, never one something still needs
    # (None: every checkpoint is kept).
    retention_days = models.PositiveIntegerField(null=True, blank=True)
    keep_checkpoints = models.PositiveIntegerField(null=True, blank=True)
    # Whether an event's secrets found at ingest are taken out before it is stored, so that
    # neither the log nor the agent's context ever holds them (docs/event-log.md, "Secrets
    # redacted at ingest"); off: they are flagged and kept, for an admin to redact.
    redact_secrets_at_ingest = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="membership_unique"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.workspace_id}:{self.role}"


class ApiKey(models.Model):
    """A workspace key for agents. Only a SHA-256 of the secret is stored; it is shown once."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Refused from this moment on, like a revoked key (None: never expires).
    expires_at = models.DateTimeField(null=True, blank=True)
    # The one-time token of the dashboard form that issued it ("": issued otherwise). Unique,
    # so a form sent twice at once issues one key: the second insert is refused.
    form_token = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["form_token"],
                condition=~models.Q(form_token=""),
                name="api_key_form_token_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
