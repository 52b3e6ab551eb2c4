"""Side effects (a tool call that changes the world, with its outcome) and the status checks a
workspace configures for its tools."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from threads.models.events import Event
from threads.models.threads import Thread
from threads.models.workspaces import Workspace


class SideEffectStatus(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"


class SideEffect(models.Model):
    """A side-effecting tool call. Its status is derived from the log (call, result,
    resolutions) and kept here for queries; the log stays the truth."""

    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="side_effects")
    call_event = models.OneToOneField(Event, on_delete=models.PROTECT, related_name="side_effect")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    idempotency_key = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=SideEffectStatus.choices)
    call_seq = models.PositiveBigIntegerField()
    result_seq = models.PositiveBigIntegerField(null=True, blank=True)
    request_id = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=SideEffectStatus.values), name="side_effect_status_valid"
            ),
            # One per call; also the index a result's status update finds its row by.
            models.UniqueConstraint(fields=["thread", "call_seq"], name="side_effect_call_unique"),
            # One per idempotency key of a thread (docs/repairs.md, "Side effects"). The append
            # path's NOT EXISTS guard keeps to it; this makes any other writer keep to it too.
            models.UniqueConstraint(
                fields=["thread", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="side_effect_key_unique",
            ),
        ]
        indexes = [models.Index(fields=["status", "thread"])]

    def __str__(self) -> str:
        return f"{self.tool_name}[{self.idempotency_key}] {self.status}"


class ToolStatusCheck(models.Model):
    """Where to ask a tool's own system whether a side effect happened (docs/repairs.md,
    "Side effects and approvals")."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="status_checks")
    tool_name = models.CharField(max_length=200)
    url_template = models.CharField(max_length=500)  # contains {idempotency_key}

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "tool_name"], name="status_check_unique"),
        ]

    def __str__(self) -> str:
        return self.tool_name
