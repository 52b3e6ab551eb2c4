"""A thread: one agent conversation, its lineage, its head and its run status; its tools."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from threads.models.workspaces import Workspace


class ThreadStatus(models.TextChoices):
    ACTIVE = "active"
    ARCHIVED = "archived"


class SummarizerBackend(models.TextChoices):
    STRUCTURED = "structured"
    LLM = "llm"


class Thread(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="threads")
    external_id = models.CharField(max_length=200)
    title = models.CharField(max_length=300, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=ThreadStatus.choices, default=ThreadStatus.ACTIVE
    )
    # Budget settings (docs/pipeline.md, "Budget and triggers"): B = W − I − O − R − M.
    context_window = models.PositiveIntegerField(default=16000)
    reserved_output = models.PositiveIntegerField(default=2000)
    reasoning_reserve = models.PositiveIntegerField(default=0)
    safety_margin = models.PositiveIntegerField(default=500)
    fixed_tokens = models.PositiveIntegerField(default=0)
    # Tokens of the thread's tool definitions (ThreadTool), written with them under the row
    # lock; the fixed input when fixed_tokens is 0 (docs/pipeline.md,
    # "Tool definitions and repeated content").
    tool_tokens = models.PositiveIntegerField(default=0)
    encoding = models.CharField(max_length=32, default="cl100k_base")
    high_watermark = models.FloatField(default=0.8)
    low_watermark = models.FloatField(default=0.5)
    summarizer = models.CharField(
        max_length=16, choices=SummarizerBackend.choices, default=SummarizerBackend.STRUCTURED
    )
    # The log's head: written only under the thread's row lock, with the events.
    last_seq = models.PositiveBigIntegerField(default=0)
    chain_head = models.CharField(max_length=64)
    # The id of the chain key this thread's chain was started with, for its whole life ('' =
    # made before keys had ids: k0 when configured, else plain SHA-256; threads/keys/chain.py).
    chain_key_id = models.CharField(max_length=32, blank=True, default="")
    token_total = models.PositiveBigIntegerField(default=0)
    # The summary head: changed only by compare-and-swap on head_version.
    head_version = models.PositiveIntegerField(default=0)
    covered_until = models.PositiveBigIntegerField(default=0)
    last_version = models.PositiveIntegerField(default=0)  # numbering of every version row
    fold_task_id = models.CharField(max_length=64, blank=True, default="")
    fold_requested_at = models.DateTimeField(null=True, blank=True)
    # How many of the thread's side effects are unknown: kept by triggers on the side-effect
    # table (threads/database/unknown_counts.py), for the thread list's filter and count.
    unknown_side_effects = models.PositiveIntegerField(default=0)
    # How many of the thread's events hold a secret (docs/event-log.md, "Secrets at ingest"):
    # moved by the append, under the row lock, with the events it counts.
    events_with_secrets = models.PositiveIntegerField(default=0)
    # Integrity sweep results (derived from the log; recomputable at any time).
    chain_ok = models.BooleanField(default=True)
    first_bad_seq = models.PositiveBigIntegerField(null=True, blank=True)
    verified_until = models.PositiveBigIntegerField(default=0)
    verified_hash = models.CharField(max_length=64, blank=True, default="")
    verified_at = models.DateTimeField(null=True, blank=True)
    # When a check last walked the whole chain from genesis (the sweep does so for every thread
    # within CTXADMIN_FULL_VERIFY_PERIOD): only such a walk sees an edit below verified_until.
    fully_verified_at = models.DateTimeField(null=True, blank=True)
    # A pin (docs/repairs.md, "Rollback"): set by a rollback that asks for it, cleared by a release.
    # While pinned_at is set no fold starts or commits, so the restored summary stays the head.
    pinned_at = models.DateTimeField(null=True, blank=True)
    pinned_by = models.CharField(max_length=200, blank=True, default="")  # the admin's name
    pin_reason = models.TextField(blank=True, default="")
    # Run status (docs/dashboard.md, "Run status"), kept so the list filters it in SQL:
    # - agent_appended_at: when the agent last appended (moved with last_seq; the events
    #   ctxadmin writes itself, decisions and resolutions, leave it);
    # - agent_read_at: when the agent last read its context, approvals or its saved graph state
    #   (recorded at most every few seconds unless something waits for it);
    # - agent_owed_at: when a person last made a decision, resolution or rollback the agent
    #   has to pick up (under the thread's lock, with the change);
    # - agent_owed_since: set while the agent has not picked one up: the oldest such change
    #   after its last pickup; cleared by the read that picks them all up.
    agent_appended_at = models.DateTimeField(null=True, blank=True)
    agent_read_at = models.DateTimeField(null=True, blank=True)
    agent_owed_at = models.DateTimeField(null=True, blank=True)
    agent_owed_since = models.DateTimeField(null=True, blank=True)
    # Lineage of a fork: it names its parent and never writes to it.
    parent_thread = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="forks"
    )
    parent_checkpoint = models.ForeignKey(
        "Checkpoint", null=True, blank=True, on_delete=models.PROTECT, related_name="forks"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "external_id"], name="thread_external_id_unique"
            ),
            models.CheckConstraint(
                condition=Q(covered_until__lte=models.F("last_seq")),
                name="thread_covered_within_log",
            ),
            models.CheckConstraint(
                condition=Q(head_version__lte=models.F("last_version")),
                name="thread_head_version_numbered",
            ),
            models.CheckConstraint(
                condition=Q(low_watermark__gt=0)
                & Q(low_watermark__lt=models.F("high_watermark"))
                & Q(high_watermark__lte=1),
                name="thread_watermarks_ordered",
            ),
        ]
        indexes = [
            # The thread list's default order, the key last so that a page is read off the
            # index in order (selectors.threads.threads_in; docs/scale.md,
            # "What one database holds").
            models.Index(fields=["workspace", "-updated_at", "id"], name="thread_list_order"),
            # The same order, of the threads with an unknown side effect: the list's filter.
            models.Index(
                fields=["workspace", "-updated_at", "id"],
                condition=Q(unknown_side_effects__gt=0),
                name="thread_list_unknown",
            ),
            # And of the threads with an event that holds a secret: the `has_secrets` filter.
            models.Index(
                fields=["workspace", "-updated_at", "id"],
                condition=Q(events_with_secrets__gt=0),
                name="thread_list_secrets",
            ),
            # The threads waiting for their agent (run status waiting_for_agent or stalled):
            # few, found without reading the others.
            models.Index(
                fields=["workspace", "agent_owed_since"],
                condition=Q(agent_owed_since__isnull=False),
                name="thread_waiting_for_agent",
            ),
        ]

    def __str__(self) -> str:
        return self.external_id


class ThreadTool(models.Model):
    """One of a thread's tool definitions, as the agent sent it (docs/pipeline.md,
    "Tool definitions and repeated content"). The set is replaced whole; `position` is its place in
    the list sent."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="tools")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    definition = models.JSONField()
    token_count = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)  # SHA-256 of the canonical JSON

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "position"], name="thread_tool_position"),
            models.UniqueConstraint(fields=["thread", "name"], name="thread_tool_name_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}:{self.name}"
