"""ctxadmin's data and its invariants (docs/design.md §1). No logic here: writes live in services/.

Four kinds of state are kept apart: the append-only event log (Event), summaries (SummaryVersion,
never edited; a new version supersedes), checkpoints (references and hashes, never edited, may be
marked unsafe) and the working context (computed, never stored).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    OPERATOR = "operator"
    REVIEWER = "reviewer"
    ADMIN = "admin"


ROLE_RANK = {Role.OPERATOR: 1, Role.REVIEWER: 2, Role.ADMIN: 3}


class Workspace(models.Model):
    name = models.CharField(max_length=100, unique=True)
    # Run status (docs/design.md §9, "Run status"): a thread that waits for its agent longer
    # than this is `stalled`.
    stall_after_seconds = models.PositiveIntegerField(default=15 * 60)
    created_at = models.DateTimeField(auto_now_add=True)
    # Whether the workspace's agent keys may upload trace imports (people with the admin role
    # always may): an import is heavy work, so it is opted into (docs/api.md, Imports).
    agents_may_import = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="membership_unique"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.workspace_id}:{self.role}"


class ApiKey(models.Model):
    """A workspace key for agents. Only a SHA-256 of the secret is stored; it is shown once."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Refused from this moment on, like a revoked key (None: never expires).
    expires_at = models.DateTimeField(null=True, blank=True)
    # The one-time token of the dashboard form that issued it ("": issued otherwise). Unique,
    # so a form sent twice at once issues one key: the second insert is refused.
    form_token = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["form_token"],
                condition=~models.Q(form_token=""),
                name="api_key_form_token_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


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
    # Budget settings (docs/design.md §4): B = W − I − O − R − M.
    context_window = models.PositiveIntegerField(default=16000)
    reserved_output = models.PositiveIntegerField(default=2000)
    reasoning_reserve = models.PositiveIntegerField(default=0)
    safety_margin = models.PositiveIntegerField(default=500)
    fixed_tokens = models.PositiveIntegerField(default=0)
    # Tokens of the thread's tool definitions (ThreadTool), written with them under the row
    # lock; the fixed input when fixed_tokens is 0 (docs/design.md §4.4).
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
    # made before keys had ids: k0 when configured, else plain SHA-256; threads/chainkey.py).
    chain_key_id = models.CharField(max_length=32, blank=True, default="")
    token_total = models.PositiveBigIntegerField(default=0)
    # The summary head: changed only by compare-and-swap on head_version.
    head_version = models.PositiveIntegerField(default=0)
    covered_until = models.PositiveBigIntegerField(default=0)
    last_version = models.PositiveIntegerField(default=0)  # numbering of every version row
    fold_task_id = models.CharField(max_length=64, blank=True, default="")
    fold_requested_at = models.DateTimeField(null=True, blank=True)
    # How many of the thread's side effects are unknown: kept by triggers on the side-effect
    # table (threads/unknown_counts.py), for the thread list's filter and count.
    unknown_side_effects = models.PositiveIntegerField(default=0)
    # Integrity sweep results (derived from the log; recomputable at any time).
    chain_ok = models.BooleanField(default=True)
    first_bad_seq = models.PositiveBigIntegerField(null=True, blank=True)
    verified_until = models.PositiveBigIntegerField(default=0)
    verified_hash = models.CharField(max_length=64, blank=True, default="")
    verified_at = models.DateTimeField(null=True, blank=True)
    # When a check last walked the whole chain from genesis (the sweep does so for every thread
    # within CTXADMIN_FULL_VERIFY_PERIOD): only such a walk sees an edit below verified_until.
    fully_verified_at = models.DateTimeField(null=True, blank=True)
    # A pin (docs/design.md §6.3): set by a rollback that asks for it, cleared by a release.
    # While pinned_at is set no fold starts or commits, so the restored summary stays the head.
    pinned_at = models.DateTimeField(null=True, blank=True)
    pinned_by = models.CharField(max_length=200, blank=True, default="")  # the admin's name
    pin_reason = models.TextField(blank=True, default="")
    # Run status (docs/design.md §9, "Run status"), kept so the list filters it in SQL:
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
            # index in order (selectors.threads.threads_in; docs/design.md §14.1).
            models.Index(fields=["workspace", "-updated_at", "id"], name="thread_list_order"),
            # The same order, of the threads with an unknown side effect: the list's filter.
            models.Index(
                fields=["workspace", "-updated_at", "id"],
                condition=Q(unknown_side_effects__gt=0),
                name="thread_list_unknown",
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
    """One of a thread's tool definitions, as the agent sent it (docs/design.md §4.4). The set
    is replaced whole; `position` is its place in the list sent."""

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
# the partial index only if its WHERE holds this condition as written (docs/design.md §14.1).
TOOL_CALL_INDEXED = ~Q(tool_call_id="")
TOOL_CALL_INDEXED_SQL = "NOT (tool_call_id = '')"


class Event(models.Model):
    """One entry of a thread's append-only, hash-chained log.

    `data` holds the kind's own fields exactly as stored; the chain covers seq, kind, created_at,
    client_event_id, metadata and data. `role`, `tool_call_id` and `request_digest` are derived
    copies kept for lookups. Nothing updates or deletes a row: database triggers refuse it.
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
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.kind}"


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
    """A restorable point: references and hashes, never copies (docs/design.md §6)."""

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
            # One per idempotency key of a thread (docs/design.md §7.1). The append path's
            # NOT EXISTS guard keeps to it; this makes any other writer keep to it too.
            models.UniqueConstraint(
                fields=["thread", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="side_effect_key_unique",
            ),
        ]
        indexes = [models.Index(fields=["status", "thread"])]

    def __str__(self) -> str:
        return f"{self.tool_name}[{self.idempotency_key}] {self.status}"


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


class ToolStatusCheck(models.Model):
    """Where to ask a tool's own system whether a side effect happened (docs/design.md §7)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="status_checks")
    tool_name = models.CharField(max_length=200)
    url_template = models.CharField(max_length=500)  # contains {idempotency_key}

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "tool_name"], name="status_check_unique"),
        ]

    def __str__(self) -> str:
        return self.tool_name


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


# --- operations: metrics and context request samples (docs/operations.md) -----------------------


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
