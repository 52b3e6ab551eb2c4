"""The audit trail: every repair and every decision, by whom and why."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from threads.models.threads import Thread
from threads.models.workspaces import Workspace


class AuditEntry(models.Model):
    """Every mutating action: who, what, on what, before/after, when."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="audit")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_label = models.CharField(max_length=200)  # username or "api key <name>"
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    thread = models.ForeignKey(
        Thread, null=True, blank=True, on_delete=models.PROTECT, related_name="audit"
    )
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["workspace", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.target_type}:{self.target_id}"
