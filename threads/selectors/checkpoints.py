"""Checkpoints of one thread, and what a rollback to one of them would do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from threads.domain.errors import NotFound
from threads.models import (
    ApprovalRequest,
    AuditEntry,
    Checkpoint,
    Event,
    EventKind,
    SideEffect,
    SummaryPhase,
    SummaryVersion,
    Thread,
)
from threads.selectors.integrity import checkpoint_is_safe
from threads.selectors.queues import approval_rows, side_effect_rows


def checkpoints_for_thread(*, thread: Thread) -> list[Checkpoint]:
    return list(
        Checkpoint.objects.filter(thread=thread)
        .select_related("summary_version", "created_by")
        .defer("summary_version__content", "summary_version__rendered")
        .order_by("-cursor", "-pk")
    )


def checkpoint_get(*, thread: Thread, id: int) -> Checkpoint:
    found = (
        Checkpoint.objects.filter(thread=thread, pk=id).select_related("summary_version").first()
    )
    if found is None:
        raise NotFound("checkpoint not found")
    return found


def checkpoint_as_audit(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint named in a preview or an audit entry: what it stands on."""
    version = checkpoint.summary_version
    return {
        "id": checkpoint.pk,
        "summary_version": version.version if version is not None else None,
        "cursor": checkpoint.cursor,
        "chain_hash": checkpoint.chain_hash,
        "label": checkpoint.label,
    }


@dataclass(frozen=True)
class StateCheckpoints:
    """An integration that keeps an agent's own state beside the log and lists each state it
    stores as a core checkpoint holding no summary of its own (a graph checkpointer's
    checkpoints). A rollback to such a checkpoint restores the summary that stood at
    its cursor and, in the same transaction, the integration's state (`restore`), so that the
    agent resumes from it. Registered by the integration's AppConfig.ready().

    - `name`: the key its part of a preview, a rollback's answer and its audit entry goes under;
    - `owns(checkpoint)`: whether the checkpoint lists one of its states;
    - `restore(thread=, checkpoint=, reason=, actor=)`: make that state current again, under
      the rollback's lock; answers what the audit entry records;
    - `describe(checkpoint)`: after a rollback, what its answer says of the restored state;
    - `note`: what the rollback preview tells the admin it does besides the summary.
    """

    name: str
    owns: Callable[[Checkpoint], bool]
    restore: Callable[..., dict[str, Any]]
    describe: Callable[[Checkpoint], dict[str, Any] | None]
    note: str


state_checkpoints: list[StateCheckpoints] = []


def checkpoint_state_owner(checkpoint: Checkpoint) -> StateCheckpoints | None:
    """The integration whose state the checkpoint lists, or None (a checkpoint of the core's,
    with its own summary)."""
    return next((owner for owner in state_checkpoints if owner.owns(checkpoint)), None)


def rollback_source(*, thread: Thread, checkpoint: Checkpoint) -> SummaryVersion | None:
    """The summary a rollback to the checkpoint restores: its own, or for a checkpoint listing an
    integration's state (which holds none) the newest committed version covering no event after
    its cursor, i.e. the summary as it stood there (None: there was none yet)."""
    if checkpoint.summary_version is not None or checkpoint_state_owner(checkpoint) is None:
        return checkpoint.summary_version
    return (
        SummaryVersion.objects.filter(
            thread=thread, phase=SummaryPhase.COMMITTED, covered_until__lte=checkpoint.cursor
        )
        .order_by("-version")
        .first()
    )


def summary_versions_replaced(*, thread: Thread, checkpoint: Checkpoint) -> list[SummaryVersion]:
    """Committed versions newer than the summary the rollback restores: what it supersedes."""
    versions = SummaryVersion.objects.filter(thread=thread, phase=SummaryPhase.COMMITTED)
    source = rollback_source(thread=thread, checkpoint=checkpoint)
    if source is not None:
        versions = versions.filter(version__gt=source.version)
    return list(versions.defer("content", "rendered").order_by("version"))


def side_effects_after(*, thread: Thread, cursor: int) -> QuerySet[SideEffect]:
    """Side effects whose call, result or resolution came after the cursor, by call: what a
    rollback to a checkpoint at `cursor` must not let the agent forget."""
    resolved_after = _seqs_named_after(thread, cursor, EventKind.SIDE_EFFECT_RESOLUTION, "call_seq")
    return (
        SideEffect.objects.filter(thread=thread)
        .filter(Q(call_seq__gt=cursor) | Q(result_seq__gt=cursor) | Q(call_seq__in=resolved_after))
        .select_related("thread", "call_event")
        .order_by("call_seq")
    )


def _seqs_named_after(thread: Thread, cursor: int, kind: str, key: str) -> list[Any]:
    """The seqs that the `kind` events after the cursor name under `key` (the call a
    resolution resolves, the request a decision decides)."""
    # Read as Python values: a JSON key compared with an integer column does not type-check
    # on PostgreSQL inside a subquery.
    return [
        data.get(key)
        for data in Event.objects.filter(thread=thread, kind=kind, seq__gt=cursor).values_list(
            "data", flat=True
        )
    ]


def last_rollback_id(thread: Thread) -> int:
    """The audit entry of the thread's latest rollback (0 when none): what a preview stood on."""
    latest = (
        AuditEntry.objects.filter(thread=thread, action="thread.rollback")
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    return latest or 0


def rollback_preview(*, thread: Thread, checkpoint: Checkpoint) -> dict[str, Any]:
    """What a rollback to `checkpoint` would do: the side effects and approvals that happened
    after its cursor (they stay in the log and become delta again), the versions it would mark
    rolled_back, and whether the checkpoint is safe now. Plain values: the API answers them,
    the dashboard shows them."""
    if checkpoint.thread_id != thread.pk:
        raise NotFound("checkpoint not found")
    cursor = checkpoint.cursor
    safe, reason = checkpoint_is_safe(checkpoint)
    effects = side_effects_after(thread=thread, cursor=cursor)
    decided_after = _seqs_named_after(thread, cursor, EventKind.APPROVAL_DECISION, "approval_seq")
    approvals = (
        ApprovalRequest.objects.filter(thread=thread)
        .filter(Q(request_event__seq__gt=cursor) | Q(request_event__seq__in=decided_after))
        .select_related("thread", "request_event", "decision_event", "decided_by")
        .order_by("request_event__seq")
    )
    version = rollback_source(thread=thread, checkpoint=checkpoint)
    replaced = summary_versions_replaced(thread=thread, checkpoint=checkpoint)
    owner = checkpoint_state_owner(checkpoint)
    # What the rollback does to the summary head (threads.services.rollback): a new version
    # with the restored summary, or (an integration's state checkpoint with no summary at its
    # cursor) the head back to no summary, or (one whose summary still stands) nothing.
    writes_version = version is not None and (owner is None or bool(replaced))
    return {
        "checkpoint": {
            **checkpoint_as_audit(checkpoint),
            "safe": safe,
            "unsafe_reason": reason,
        },
        "safe": safe,
        "unsafe_reason": reason,
        "new_version": thread.last_version + 1 if writes_version else None,
        "clears_summary": version is None and bool(replaced),
        # The rollback form sends it back: a second rollback from the same preview (a double
        # click, another admin first) is refused instead of applied twice.
        "after_rollback": last_rollback_id(thread),
        # And one written by a fold since (its versions are what the preview names).
        "after_version": thread.last_version,
        "restores_version": version.version if version is not None else None,
        "events_after_cursor": max(thread.last_seq - cursor, 0),
        # Whether the rollback also restores an integration's state, per integration (a graph
        # checkpointer writes a new head), and what the
        # preview says of it.
        **{o.name: o is owner for o in state_checkpoints},
        "state_note": owner.note if owner is not None else "",
        "side_effects": side_effect_rows(effects),
        "approvals": approval_rows(approvals),
        "versions_replaced": [
            {
                "version": v.version,
                "covered_until": v.covered_until,
                "trigger": v.trigger,
                "created_at": v.created_at,
            }
            for v in replaced
        ],
    }
