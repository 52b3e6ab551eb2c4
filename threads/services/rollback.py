"""Rollback (docs/repairs.md, "Checkpoints, rollback, fork"): make a safe checkpoint's summary the
head again, as a new version; for a checkpoint listing an integration's state, also make
that state current again, through the integration (threads.selectors.checkpoints.StateCheckpoints).

Rollback never rewinds anything: it writes a new head version (versions only increase) whose
content is the checkpoint's summary, and the events after the cursor become delta again, so the
agent still sees every side effect that happened after the checkpoint.

A rollback may pin the thread (docs/repairs.md, "Rollback"): folds pause until someone releases the
pin (threads.services.pins), so the summary the rollback restored stays the head.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.access import require_rollback_role
from threads.domain.errors import Conflict
from threads.models import Checkpoint, SummaryPhase, SummaryVersion, Thread
from threads.selectors.checkpoints import checkpoint_state_owner, last_rollback_id, rollback_source
from threads.services.audit import audit_record, reason_clean
from threads.services.checkpoints import (
    _require_own,
    checkpoint_record,
    checkpoint_require_safe,
    restored_version_save,
    summary_versions_replaced,
)
from threads.services.pins import pin_locked
from threads.services.run_status import agent_owed_locked
from threads.services.threads import thread_lock


class CheckpointHasNoSummary(Conflict):
    code = "checkpoint_has_no_summary"


class HeadMoved(Conflict):
    code = "head_moved"


class FoldedSincePreview(Conflict):
    """A summary version was written after the preview this rollback was confirmed from (a
    fold committed or was prepared): the versions the preview named are no longer the ones
    the rollback would replace."""

    code = "folded_since_preview"


class RolledBackSincePreview(Conflict):
    """Another rollback of the thread committed after the preview this one was confirmed from
    (a second click, or another admin): the preview no longer says what would happen."""

    code = "rolled_back_since_preview"


def checkpoint_rollback(
    *,
    thread: Thread,
    checkpoint: Checkpoint,
    actor: Any,
    reason: str,
    after_rollback: int | None = None,
    after_version: int | None = None,
    pin: bool = False,
) -> SummaryVersion | None:
    """Make the checkpoint's summary the head again, as a new version. Admin only.

    Locks the thread row (select_for_update), re-checks that the checkpoint is safe (checksum,
    chain up to the cursor, verified summary), writes version last_version+1 with the
    checkpoint's content and covered_until = cursor, compare-and-swaps the head, marks the
    versions it supersedes rolled_back, checkpoints the new head and audits it, all in one
    transaction. Events are untouched.

    A checkpoint that lists an integration's state (a state checkpoint,
    StateCheckpoints) holds no summary: the summary restored is the one that stood at its
    cursor (`rollback_source`), and in the same transaction the integration makes that state
    current again (its `restore`), so the agent's
    next run resumes from it. Returns the new head
    version, or None when the summary head had nothing to undo (no summary at or before the
    cursor, none after it either).

    `after_rollback` is the preview's (`rollback_preview`): when another rollback of the thread
    has committed since, this one is refused (RolledBackSincePreview) rather than applied on
    top of it. `after_version`, the preview's too, is the thread's last summary version then:
    when a fold wrote another since, the rollback is refused (FoldedSincePreview), since the
    versions it would replace are no longer the ones the preview showed.

    `pin`: pin the thread in the same transaction (pinned_by the actor, pinned_at now,
    pin_reason the rollback's reason), so that no fold replaces the restored summary until
    the pin is released. A rollback without it leaves a pin already there as it is.
    """
    require_rollback_role(actor, thread.workspace)
    reason = reason_clean(reason)
    _require_own(thread, checkpoint)
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        latest = last_rollback_id(locked)
        if after_rollback is not None and latest != after_rollback:
            raise RolledBackSincePreview(
                f"the thread was rolled back again after this preview (audit entry {latest}): "
                "preview the rollback again",
                fields={"after_rollback": f"the latest rollback is {latest}"},
            )
        if after_version is not None and locked.last_version != after_version:
            raise FoldedSincePreview(
                f"summary version {locked.last_version} was written after this preview (it "
                f"showed v{after_version} as the last): preview the rollback again",
                fields={"after_version": f"the last version is {locked.last_version}"},
            )
        checkpoint = Checkpoint.objects.select_related("summary_version", "thread").get(
            pk=checkpoint.pk
        )
        checkpoint_require_safe(checkpoint, "roll back to")
        owner = checkpoint_state_owner(checkpoint)
        source = rollback_source(thread=locked, checkpoint=checkpoint)
        if source is None and owner is None:
            raise CheckpointHasNoSummary(
                f"checkpoint {checkpoint.pk} holds no summary: fork from it instead, or roll "
                "back to a checkpoint with a summary",
                fields={"checkpoint": "holds no summary version"},
            )
        replaced = summary_versions_replaced(thread=locked, checkpoint=checkpoint)
        before = {"head_version": locked.head_version, "covered_until": locked.covered_until}
        version = None
        if owner is None or replaced:
            version = _head_restore(locked, checkpoint, source, replaced, reason, actor)
        after: dict[str, Any] = {
            "head_version": locked.head_version,
            "covered_until": locked.covered_until,
            "checkpoint": checkpoint.pk,
            "restores_version": source.version if source is not None else None,
            "versions_rolled_back": [v.version for v in replaced],
            "reason": reason,
        }
        if pin:
            after["pinned"] = pin_locked(locked, actor, reason)
        if owner is not None:
            after[owner.name] = owner.restore(
                thread=locked, checkpoint=checkpoint, reason=reason, actor=actor
            )
        # The agent owes a pickup of what it will read now (run status).
        agent_owed_locked(locked, now=timezone.now())
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="thread.rollback",
            target_type="thread",
            target_id=locked.pk,
            thread=locked,
            before=before,
            after=after,
        )
    thread.head_version, thread.last_version = locked.head_version, locked.last_version
    thread.covered_until = locked.covered_until
    thread.pinned_at, thread.pinned_by = locked.pinned_at, locked.pinned_by
    thread.pin_reason = locked.pin_reason
    return version


def _head_restore(
    locked: Thread,
    checkpoint: Checkpoint,
    source: SummaryVersion | None,
    replaced: list[SummaryVersion],
    reason: str,
    actor: Any,
) -> SummaryVersion | None:
    """Move the summary head back to `source` (a new version with its content), or to no
    summary at all when there is none, by compare-and-swap; mark `replaced` rolled_back and
    checkpoint the new head. Runs under the caller's lock."""
    now = timezone.now()
    version = None
    covered_until, head = 0, 0
    if source is not None:
        # A checkpoint with its own summary covers up to its cursor; an integration's state
        # checkpoint restores the summary that stood at its cursor, covering what it did then.
        own = checkpoint.summary_version is not None
        version = restored_version_save(
            thread=locked,
            number=locked.last_version + 1,
            base_version=locked.head_version,
            checkpoint=checkpoint,
            source=source,
            covered_until=checkpoint.cursor if own else source.covered_until,
            chain_hash=checkpoint.chain_hash if own else source.chain_hash,
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
        covered_until, head = version.covered_until, version.version
    # The head moves by compare-and-swap even under the lock, so the invariant "the head
    # only changes from the value it was read as" holds on every backend.
    swapped = Thread.objects.filter(pk=locked.pk, head_version=locked.head_version).update(
        head_version=head,
        last_version=max(head, locked.last_version),
        covered_until=covered_until,
        updated_at=now,
    )
    if swapped != 1:
        raise HeadMoved("the thread's head changed during the rollback; try again")
    SummaryVersion.objects.filter(pk__in=[v.pk for v in replaced]).update(
        phase=SummaryPhase.ROLLED_BACK
    )
    locked.head_version, locked.last_version = head, max(head, locked.last_version)
    locked.covered_until = covered_until
    if version is not None:
        checkpoint_record(
            thread=locked,
            version=version,
            cursor=covered_until,
            chain_hash=version.chain_hash,
            summary_checksum=version.checksum,
            label=f"rollback to checkpoint {checkpoint.pk}",
            created_by=actor,
        )
    return version
