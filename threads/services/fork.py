"""Fork (docs/design.md §6): a new thread standing on a safe checkpoint of another; the parent is
never written to."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain.errors import Conflict
from threads.domain.events import NewEvent
from threads.domain.ledger import call_status_after
from threads.keys.chain import current_chain_key_id, thread_genesis
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    Checkpoint,
    Event,
    EventKind,
    Role,
    SideEffect,
    SummaryVersion,
    Thread,
)
from threads.services.audit import audit_record
from threads.services.checkpoints import (
    _require_own,
    checkpoint_record,
    checkpoint_require_safe,
    restored_version_save,
)
from threads.services.events import event_append_batch
from threads.services.threads import external_id_require_unshadowed, external_id_require_valid

FORK_CHUNK = 1000  # events copied per append batch (the API's batch limit)


class ExternalIdTaken(Conflict):
    code = "external_id_taken"


def _copy_events(source: Iterable[Event]) -> list[NewEvent]:
    return [
        NewEvent(
            kind=event.kind,
            data=event.data,
            metadata=event.metadata,
            client_event_id=event.client_event_id,
            created_at=event.created_at,
            digest=event.request_digest,
        )
        for event in source
    ]


def _replay_outcomes(fork: Thread, parent: Thread, cursor: int) -> None:
    """Give the fork's side-effect and approval rows the status the log gives them at the
    cursor: resolutions and decisions are server events that the append path records as
    events only."""
    final: dict[int, str] = {}
    rows = (
        Event.objects.filter(
            thread=fork,
            kind__in=(EventKind.TOOL_RESULT, EventKind.SIDE_EFFECT_RESOLUTION),
        )
        .order_by("seq")
        .values_list("kind", "data")
    )
    resolved: set[int] = set()
    for kind, data in rows:
        final[data["call_seq"]] = call_status_after(kind, data["status"])
        if kind == EventKind.SIDE_EFFECT_RESOLUTION:
            resolved.add(data["call_seq"])
    for effect in SideEffect.objects.filter(thread=fork, call_seq__in=resolved):
        effect.status = final[effect.call_seq]
        effect.save(update_fields=["status", "updated_at"])
    decisions = Event.objects.filter(thread=fork, kind=EventKind.APPROVAL_DECISION).order_by("seq")
    if not decisions.exists():
        return
    deciders = dict(
        ApprovalRequest.objects.filter(thread=parent, request_event__seq__lte=cursor).values_list(
            "request_event__seq", "decided_by_id"
        )
    )
    for decision in decisions:
        seq = decision.data["approval_seq"]
        ApprovalRequest.objects.filter(thread=fork, request_event__seq=seq).update(
            status=ApprovalStatus.APPROVED
            if decision.data["decision"] == "approve"
            else ApprovalStatus.REJECTED,
            decision_event=decision,
            decided_at=decision.created_at,
            decided_by_id=deciders.get(seq),
            reason=decision.data.get("reason", ""),
        )


def thread_fork(*, thread: Thread, checkpoint: Checkpoint, external_id: str, actor: Any) -> Thread:
    """A new thread in the same workspace standing on `checkpoint`. Reviewer or higher.

    Copies events 1..cursor (same seq, kind, time, ids, metadata and data) re-chained under the
    new thread's own genesis, so the fork's chain verifies on its own; gives it a committed
    version 1 with the checkpoint's summary and a checkpoint of its own. Reads the parent and
    never writes to it: its events are immutable, so no lock on the parent is needed. The fork
    is locked (select_for_update, inside event_append_batch) while its log is numbered.
    """
    require_role(actor, thread.workspace, Role.REVIEWER)
    _require_own(thread, checkpoint)
    external_id = (external_id or "").strip()
    external_id_require_valid(external_id)
    checkpoint = Checkpoint.objects.select_related("summary_version", "thread").get(
        pk=checkpoint.pk
    )
    checkpoint_require_safe(checkpoint, "fork from")
    if Thread.objects.filter(workspace_id=thread.workspace_id, external_id=external_id).exists():
        raise ExternalIdTaken(
            f"a thread with external_id {external_id!r} already exists in this workspace",
            fields={"external_id": "already taken"},
        )
    external_id_require_unshadowed(thread.workspace_id, external_id)
    cursor = checkpoint.cursor
    with transaction.atomic(durable=True):
        fork = Thread(
            workspace_id=thread.workspace_id,
            external_id=external_id,
            title=thread.title,
            context_window=thread.context_window,
            reserved_output=thread.reserved_output,
            reasoning_reserve=thread.reasoning_reserve,
            safety_margin=thread.safety_margin,
            fixed_tokens=thread.fixed_tokens,
            encoding=thread.encoding,
            high_watermark=thread.high_watermark,
            low_watermark=thread.low_watermark,
            summarizer=thread.summarizer,
            parent_thread=thread,
            parent_checkpoint=checkpoint,
            # Re-chained under its own genesis, so with the current key.
            chain_key_id=current_chain_key_id(),
        )
        fork.chain_head = thread_genesis(fork.id, fork.chain_key_id)
        fork.save(force_insert=True)
        source = Event.objects.filter(thread=thread, seq__lte=cursor).order_by("seq")
        for start in range(0, cursor, FORK_CHUNK):
            chunk = list(source.filter(seq__gt=start, seq__lte=start + FORK_CHUNK))
            event_append_batch(thread=fork, new_events=_copy_events(chunk), lock=False)
        _replay_outcomes(fork, thread, cursor)
        fork_version = None
        if checkpoint.summary_version is not None:
            fork_version = _fork_version(fork, checkpoint)
            Thread.objects.filter(pk=fork.pk, head_version=0).update(
                head_version=1, last_version=1, covered_until=cursor
            )
            fork.head_version = fork.last_version = 1
            fork.covered_until = cursor
        checkpoint_record(
            thread=fork,
            version=fork_version,
            cursor=cursor,
            chain_hash=fork.chain_head,
            summary_checksum=fork_version.checksum if fork_version is not None else "",
            label=f"fork of {thread.external_id} at checkpoint {checkpoint.pk}",
            created_by=actor,
        )
        audit_record(
            workspace=thread.workspace,
            actor=actor,
            action="thread.fork",
            target_type="thread",
            target_id=fork.pk,
            thread=fork,
            after={
                "external_id": external_id,
                "parent_thread": str(thread.pk),
                "parent_external_id": thread.external_id,
                "checkpoint": checkpoint.pk,
                "cursor": cursor,
                "summary_version": fork_version.version if fork_version else None,
            },
        )
    return Thread.objects.select_related("workspace").get(pk=fork.pk)


def _fork_version(fork: Thread, checkpoint: Checkpoint) -> SummaryVersion:
    source = checkpoint.summary_version
    assert source is not None
    return restored_version_save(
        thread=fork,
        number=1,
        base_version=0,
        checkpoint=checkpoint,
        chain_hash=fork.chain_head,
        trigger={
            "kind": "fork",
            "reason": f"forked from thread {checkpoint.thread.external_id} "
            f"at checkpoint {checkpoint.pk}",
            "parent_thread": str(checkpoint.thread_id),
            "checkpoint": checkpoint.pk,
            "restores_version": source.version,
        },
        detail=f"parent checkpoint {checkpoint.pk} re-checked at fork; events "
        f"1..{checkpoint.cursor} re-chained under this thread's genesis",
        now=timezone.now(),
    )
