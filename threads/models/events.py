"""The append-only, hash-chained event log (docs/event-log.md, "Event log")."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from threads.models.threads import Thread


class EventKind(models.TextChoices):
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    ANNOTATION = "annotation"
    APPROVAL_REQUEST = "approval_request"
    APPROVAL_DECISION = "approval_decision"
    SIDE_EFFECT_RESOLUTION = "side_effect_resolution"
    RETRACTION = "retraction"
    RESET = "reset"


# The events the (thread, tool_call_id, seq) index holds: those with a tool call id (calls,
# results, resolutions), not the messages between them, about half of a log. A query reaches
# the partial index only if its WHERE holds this condition as written (docs/scale.md,
# "What one database holds").
TOOL_CALL_INDEXED = ~Q(tool_call_id="")
TOOL_CALL_INDEXED_SQL = "NOT (tool_call_id = '')"


class Event(models.Model):
    """One entry of a thread's append-only, hash-chained log.

    `data` holds the kind's own fields exactly as stored; the chain covers seq, kind, created_at,
    client_event_id, metadata and data. `role`, `tool_call_id` and `request_digest` are derived
    copies kept for lookups; `secrets` is derived too, at insert, and outside the chain. Nothing
    updates or deletes a row: database triggers refuse it.
    """

    # No index of its own: the (thread, seq) constraint's leads with the thread.
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, related_name="events", db_index=False
    )
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    created_at = models.DateTimeField()
    # NULL, not "": absent ids must not collide in the (thread, client_event_id) constraint.
    client_event_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    metadata = models.JSONField(default=dict)
    data = models.JSONField(default=dict)
    role = models.CharField(max_length=16, blank=True, default="")
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    request_digest = models.CharField(max_length=64, blank=True, default="")
    token_count = models.PositiveIntegerField(default=0)
    hash = models.CharField(max_length=64)
    # The secrets found in its text at ingest, [{"type", "field"}], never the secret itself
    # (docs/event-log.md, "Secrets at ingest"); NULL when none was found (or detection was off):
    # nothing more to store for an event without one. Written in the INSERT, never after.
    secrets = models.JSONField(null=True, blank=True)
    # Chain v2 (docs/event-log.md, "Hash chain and canonical JSON"): a random salt (hex) and
    # SHA-256(salt ‖ canonical content); the link commits to the digest. NULL digest: a v1
    # event, stored before salted digests. NULL salt with a digest: redacted
    # (docs/event-log.md, "Redaction").
    content_salt = models.CharField(max_length=32, null=True, blank=True)  # noqa: DJ001
    content_digest = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="event_seq_unique"),
            models.UniqueConstraint(
                fields=["thread", "client_event_id"],
                condition=Q(client_event_id__isnull=False),
                name="event_client_id_unique",
            ),
            models.CheckConstraint(condition=Q(seq__gte=1), name="event_seq_positive"),
            models.CheckConstraint(condition=Q(kind__in=EventKind.values), name="event_kind_valid"),
        ]
        indexes = [
            models.Index(
                fields=["thread", "tool_call_id", "seq"],
                condition=TOOL_CALL_INDEXED,
                name="event_tool_call",
            ),
            # Retractions are few: the timeline finds those after a page without reading the
            # rest of the log after it (selectors.events.retractions_by_target).
            models.Index(
                fields=["thread", "seq"],
                condition=Q(kind="retraction"),
                name="event_retraction",
            ),
            # The flagged events are few: the Operations page counts those of a window without
            # reading the others (selectors.metrics.secret_event_times).
            models.Index(
                fields=["created_at"],
                condition=Q(secrets__isnull=False),
                name="event_secrets",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.kind}"
