"""Operations: metrics counters and context request samples (docs/operations.md)."""

from __future__ import annotations

from django.db import models

from threads.models.threads import Thread
from threads.models.workspaces import Workspace


class MetricCounter(models.Model):
    """A running total the database keeps for /metrics, added to in the same transaction as
    the write it counts, so it is exact across any number of processes and restarts. A total
    is spread over `shard` rows (by thread) so that writers on different threads do not queue
    on one hot row; /metrics sums them."""

    name = models.CharField(max_length=64)
    labels = models.CharField(max_length=200, blank=True, default="")  # "kind=message"
    shard = models.PositiveSmallIntegerField(default=0)
    value = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["name", "labels", "shard"], name="metric_counter_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}{{{self.labels}}}[{self.shard}] {self.value}"


class ContextRequestLog(models.Model):
    """One working-context request over the API, for the Operations page's overflow rate and
    latency percentiles. Kept CTXADMIN_CONTEXT_LOG_DAYS days."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    latency_ms = models.FloatField()
    used = models.PositiveIntegerField(default=0)
    available = models.IntegerField(default=0)
    overflow = models.BooleanField(default=False)
    needs_fold = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "at"]),
            models.Index(fields=["at"]),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id} @{self.at} {self.latency_ms:.1f} ms"
