"""A trace import: an uploaded file of recorded conversations and what importing it did."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from threads.models import TaskRun, Workspace


class ImportState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the file could not be read, a limit was reached, or the task died
    CANCELLED = "cancelled"  # an admin stopped it; the conversations before that stay imported


class ImportOutcome(models.TextChoices):
    """What an import did to one conversation of its file (docs/imports.md,
    "Imports of recorded traces")."""

    CREATED = "created"  # a new (or still empty) thread got the conversation's events
    UPDATED = "updated"  # the thread held some of them already: only the new ones appended
    SKIPPED = "skipped"  # imported before: nothing appended
    REFUSED = "refused"  # could not be read, converted or stored; the others still import


class TraceImport(models.Model):
    """An uploaded file of recorded conversations and what importing it did, conversation by
    conversation. The upload's bytes are kept in the row, so a worker on any machine reads
    them from the database."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="imports")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_label = models.CharField(max_length=200)  # username or "api key <name>"
    format = models.CharField(max_length=32)
    file_name = models.CharField(max_length=255, blank=True, default="")
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    content = models.BinaryField()
    side_effect_tools = models.JSONField(null=True, blank=True)  # null: the default tools
    state = models.CharField(
        max_length=16, choices=ImportState.choices, default=ImportState.PENDING
    )
    conversations_total = models.PositiveIntegerField(default=0)
    conversations_done = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    updated_count = models.PositiveIntegerField(default=0)
    skipped_count = models.PositiveIntegerField(default=0)
    refused_count = models.PositiveIntegerField(default=0)
    events_appended = models.PositiveBigIntegerField(default=0)
    # [{"index", "external_id", "thread", "outcome", "events", "appended", "reason"}], in order
    report = models.JSONField(default=list)
    error = models.TextField(blank=True, default="")
    task_run = models.OneToOneField(
        TaskRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="trace_import"
    )
    # Set by an admin's cancel; the running import stops before its next conversation.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "threads_traceimport"
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=ImportState.values), name="trace_import_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(conversations_done__lte=models.F("conversations_total")),
                name="trace_import_done_within_total",
            ),
            # Every conversation done has exactly one outcome in the counts.
            models.CheckConstraint(
                condition=Q(
                    conversations_done=models.F("created_count")
                    + models.F("updated_count")
                    + models.F("skipped_count")
                    + models.F("refused_count")
                ),
                name="trace_import_outcomes_counted",
            ),
        ]
        indexes = [models.Index(fields=["workspace", "-created_at"])]

    def __str__(self) -> str:
        return f"import {self.id} {self.format} {self.state}"
