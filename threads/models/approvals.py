"""Approval requests: an action an agent waits on a reviewer for."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from threads.models.events import Event
from threads.models.threads import Thread


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ApprovalRequest(models.Model):
    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="approvals")
    request_event = models.OneToOneField(
        Event, on_delete=models.PROTECT, related_name="approval_request"
    )
    decision_event = models.OneToOneField(
        Event, null=True, blank=True, on_delete=models.PROTECT, related_name="approval_decision"
    )
    action = models.CharField(max_length=300)
    tool_name = models.CharField(max_length=200, blank=True, default="")
    arguments = models.JSONField(default=dict)
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ApprovalStatus.values), name="approval_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status=ApprovalStatus.PENDING) | Q(decided_at__isnull=False),
                name="approval_decided_has_time",
            ),
        ]
        indexes = [models.Index(fields=["status", "thread"])]

    def __str__(self) -> str:
        return f"{self.action} {self.status}"
