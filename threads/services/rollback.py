"""Rollback (docs/design.md §6): make a safe checkpoint's summary the head again, as a new version.

Rollback never rewinds anything: it writes a new head version (versions only increase) whose
content is the checkpoint's summary, and the events after the cursor become delta again, so the
agent still sees every side effect that happened after the checkpoint.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.access import require_rollback_role
from threads.domain.errors import Conflict
from threads.models import Checkpoint, SummaryPhase, SummaryVersion, Thread
from threads.services.audit import audit_record, reason_clean
from threads.services.checkpoints import (
    _require_own,
    checkpoint_record,
    checkpoint_require_safe,
    restored_version_save,
    summary_versions_replaced,
)
from threads.services.threads import thread_lock


class CheckpointHasNoSummary(Conflict):
    code = "checkpoint_has_no_summary"


class HeadMoved(Conflict):
    code = "head_moved"


def checkpoint_rollback(
    *, thread: Thread, checkpoint: Checkpoint, actor: Any, reason: str
) -> SummaryVersion:
    """Make the checkpoint's summary the head again, as a new version. Admin only.

    Locks the thread row (select_for_update), re-checks that the checkpoint is safe (checksum,
    chain up to the cursor, verified summary), writes version last_version+1 with the
    checkpoint's content and covered_until = cursor, compare-and-swaps the head, marks the
    versions it supersedes rolled_back, checkpoints the new head and audits it, all in one
    transaction. Events are untouched.
    """
    require_rollback_role(actor, thread.workspace)
    reason = reason_clean(reason)
    _require_own(thread, checkpoint)
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        checkpoint = Checkpoint.objects.select_related("summary_version", "thread").get(
            pk=checkpoint.pk
        )
        checkpoint_require_safe(checkpoint, "roll back to")
        source = checkpoint.summary_version
        if source is None:
            raise CheckpointHasNoSummary(
                f"checkpoint {checkpoint.pk} holds no summary: fork from it instead, or roll "
                "back to a checkpoint with a summary",
                fields={"checkpoint": "holds no summary version"},
            )
        replaced = summary_versions_replaced(thread=locked, checkpoint=checkpoint)
        before = {"head_version": locked.head_version, "covered_until": locked.covered_until}
        now = timezone.now()
        version = restored_version_save(
            thread=locked,
            number=locked.last_version + 1,
            base_version=locked.head_version,
            checkpoint=checkpoint,
            chain_hash=checkpoint.chain_hash,
            trigger={
                "kind": "rollback",
                "reason": reason,
                "checkpoint": checkpoint.pk,
                "restores_version": source.version,
            },
            detail=f"checkpoint {checkpoint.pk} re-checked at rollback: checksum, chain up to "
            f"seq {checkpoint.cursor} and summary v{source.version}",
            now=now,
        )
        # The head moves by compare-and-swap even under the lock, so the invariant "the head
        # only changes from the value it was read as" holds on every backend.
        swapped = Thread.objects.filter(pk=locked.pk, head_version=locked.head_version).update(
            head_version=version.version,
            last_version=version.version,
            covered_until=checkpoint.cursor,
            updated_at=now,
        )
        if swapped != 1:
            raise HeadMoved("the thread's head changed during the rollback; try again")
        SummaryVersion.objects.filter(pk__in=[v.pk for v in replaced]).update(
            phase=SummaryPhase.ROLLED_BACK
        )
        locked.head_version = locked.last_version = version.version
        locked.covered_until = checkpoint.cursor
        checkpoint_record(
            thread=locked,
            version=version,
            cursor=checkpoint.cursor,
            chain_hash=checkpoint.chain_hash,
            summary_checksum=version.checksum,
            label=f"rollback to checkpoint {checkpoint.pk}",
            created_by=actor,
        )
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="thread.rollback",
            target_type="thread",
            target_id=locked.pk,
            thread=locked,
            before=before,
            after={
                "head_version": version.version,
                "covered_until": checkpoint.cursor,
                "checkpoint": checkpoint.pk,
                "restores_version": source.version,
                "versions_rolled_back": [v.version for v in replaced],
                "reason": reason,
            },
        )
    thread.head_version = thread.last_version = version.version
    thread.covered_until = checkpoint.cursor
    return version
