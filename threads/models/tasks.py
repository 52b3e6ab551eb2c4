"""Task runs: what a Celery task was asked to do and how it ended."""

from __future__ import annotations

from django.db import models

from threads.models.threads import Thread
from threads.models.workspaces import Workspace


class TaskState(models.TextChoices):
    PENDING = "PENDING"
    STARTED = "STARTED"
    PROGRESS = "PROGRESS"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"


class TaskRun(models.Model):
    """State of one Celery task (fold, verify, import, status check), written by the task
    itself, so it reads the same with any broker and no result backend."""

    id = models.CharField(primary_key=True, max_length=64)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="task_runs")
    thread = models.ForeignKey(
        Thread, null=True, blank=True, on_delete=models.CASCADE, related_name="task_runs"
    )
    kind = models.CharField(max_length=32)
    state = models.CharField(max_length=16, choices=TaskState.choices, default=TaskState.PENDING)
    done = models.PositiveBigIntegerField(default=0)
    total = models.PositiveBigIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.id} {self.state}"
