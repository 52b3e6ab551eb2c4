"""ctxadmin's data and its invariants (docs/event-log.md, "Four kinds of state"), one module per
subject. No logic here: writes live in services/.

Four kinds of state are kept apart: the append-only event log (Event), summaries (SummaryVersion,
never edited; a new version supersedes), checkpoints (references and hashes, never edited, may be
marked unsafe) and the working context (computed, never stored).
"""

from threads.models.approvals import ApprovalRequest, ApprovalStatus
from threads.models.audit import AuditEntry
from threads.models.events import TOOL_CALL_INDEXED, TOOL_CALL_INDEXED_SQL, Event, EventKind
from threads.models.operations import ContextRequestLog, MetricCounter
from threads.models.redactions import Redaction
from threads.models.side_effects import SideEffect, SideEffectStatus, ToolStatusCheck
from threads.models.summaries import Checkpoint, SummaryPhase, SummaryVersion
from threads.models.tasks import TaskRun, TaskState
from threads.models.threads import SummarizerBackend, Thread, ThreadStatus, ThreadTool
from threads.models.tombstones import ThreadTombstone
from threads.models.workspaces import ROLE_RANK, ApiKey, Membership, Role, Workspace

__all__ = [
    "ApiKey",
    "ApprovalRequest",
    "ApprovalStatus",
    "AuditEntry",
    "Checkpoint",
    "ContextRequestLog",
    "Event",
    "EventKind",
    "Membership",
    "MetricCounter",
    "ROLE_RANK",
    "Redaction",
    "Role",
    "SideEffect",
    "SideEffectStatus",
    "SummarizerBackend",
    "SummaryPhase",
    "SummaryVersion",
    "TOOL_CALL_INDEXED",
    "TOOL_CALL_INDEXED_SQL",
    "TaskRun",
    "TaskState",
    "Thread",
    "ThreadStatus",
    "ThreadTombstone",
    "ThreadTool",
    "ToolStatusCheck",
    "Workspace",
]
