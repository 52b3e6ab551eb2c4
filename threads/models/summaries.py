"""Summary versions (never edited: a new version supersedes) and checkpoints (references and
hashes, never edited, may be marked unsafe)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from threads.models.threads import SummarizerBackend, Thread


class SummaryPhase(models.TextChoices):
    PREPARED = "prepared"
    COMMITTED = "committed"
    REJECTED = "rejected"
    ROLLED_BACK = "rolled_back"
    DISCARDED = "discarded"


class SummaryVersion(models.Model):
    """A candidate or committed fold of events covered_from..covered_until. Never edited but
    for its phase, which moves prepared → committed | rejected | discarded, committed →
    rolled_back."""

    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="versions")
    version = models.PositiveIntegerField()
    base_version = models.PositiveIntegerField(default=0)  # the head it was folded on
    phase = models.CharField(max_length=16, choices=SummaryPhase.choices)
    covered_from = models.PositiveBigIntegerField()
    covered_until = models.PositiveBigIntegerField()
    chain_hash = models.CharField(max_length=64)  # the chain's hash at covered_until
    trigger = models.JSONField(default=dict)  # {"kind", "reason"}
    backend = models.CharField(max_length=16, choices=SummarizerBackend.choices)
    checksum = models.CharField(max_length=64)
    content = models.JSONField()
    rendered = models.TextField()
    tokens = models.PositiveIntegerField(default=0)
    tokens_replaced = models.PositiveBigIntegerField(default=0)
    verification = models.JSONField(default=dict)  # {"ok", "checks": [...]}
    restored_from = models.ForeignKey(
        "Checkpoint", null=True, blank=True, on_delete=models.PROTECT, related_name="restorations"
    )
    task_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "version"], name="summary_version_unique"),
            models.CheckConstraint(
                condition=Q(phase__in=SummaryPhase.values), name="summary_phase_valid"
            ),
            models.CheckConstraint(
                condition=Q(covered_from__lte=models.F("covered_until") + 1),
                name="summary_range_ordered",
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="summary_version_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id} v{self.version} {self.phase}"


class Checkpoint(models.Model):
    """A restorable point: references and hashes, never copies (docs/repairs.md,
    "Checkpoints, rollback, fork")."""

    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="checkpoints")
    summary_version = models.ForeignKey(
        SummaryVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="checkpoints"
    )
    cursor = models.PositiveBigIntegerField()  # events 1..cursor are what it stands on
    chain_hash = models.CharField(max_length=64)
    summary_checksum = models.CharField(max_length=64, blank=True, default="")
    pending = models.JSONField(default=list)  # open side effects and approvals at the cursor
    checksum = models.CharField(max_length=64)  # over every field above
    safe = models.BooleanField(default=True)
    unsafe_reason = models.CharField(max_length=300, blank=True, default="")
    label = models.CharField(max_length=200, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["thread", "-cursor"])]

    def __str__(self) -> str:
        return f"checkpoint {self.pk} @{self.cursor}"
