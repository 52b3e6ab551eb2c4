"""Redaction records (docs/event-log.md, "Redaction"): who removed which event's content, when and
why, chained per thread so that the verifier can tell a redaction from a tamper."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from threads.models.threads import Thread


class Redaction(models.Model):
    """One redacted event. `record_hash` = H(the thread's previous record's hash ‖ canonical(
    thread, number, seq, by, at, reason, event_hash, previous_hash, remains_digest)), H keyed
    like the thread's chain. Written once, in the redaction's transaction."""

    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="redactions")
    number = models.PositiveIntegerField()  # 1, 2, 3 ... per thread: the record chain's order
    seq = models.PositiveBigIntegerField()
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    by_label = models.CharField(max_length=200)  # the username the record is chained with
    at = models.DateTimeField()
    reason = models.TextField()
    event_hash = models.CharField(max_length=64)
    previous_hash = models.CharField(max_length=64)  # the chain hash before the event
    remains_digest = models.CharField(max_length=64)  # of what the event holds after it
    record_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="redaction_seq_unique"),
            models.UniqueConstraint(fields=["thread", "number"], name="redaction_number_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} redacted by {self.by_label}"
