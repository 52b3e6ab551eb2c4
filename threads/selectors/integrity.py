"""Chain integrity: the verdict of a thread, and the threads and checkpoints that need attention."""

from __future__ import annotations

from typing import Any

from django.db.models import (
    Exists,
    F,
    OuterRef,
    QuerySet,
)

from threads.models import (
    Checkpoint,
    Thread,
)
from threads.selectors.threads import member_workspace_ids
from threads.services.integrity import last_safe_checkpoint


def threads_integrity_for_member(*, user: Any) -> QuerySet[Thread]:
    """Broken chains first, then the least recently verified."""
    return (
        Thread.objects.filter(workspace_id__in=member_workspace_ids(user))
        .select_related("workspace")
        .annotate(
            unsafe_checkpoints=Exists(Checkpoint.objects.filter(thread=OuterRef("pk"), safe=False))
        )
        .only(
            "id",
            "external_id",
            "title",
            "workspace__name",
            "chain_ok",
            "first_bad_seq",
            "verified_until",
            "verified_at",
            "last_seq",
        )
        .order_by("chain_ok", F("verified_at").asc(nulls_first=True), "pk")
    )


def unsafe_checkpoints_for_member(*, user: Any) -> QuerySet[Checkpoint]:
    return (
        Checkpoint.objects.filter(thread__workspace_id__in=member_workspace_ids(user), safe=False)
        .select_related("thread")
        .only("id", "cursor", "unsafe_reason", "created_at", "thread__external_id", "thread__id")
        .order_by("-created_at")
    )


def thread_integrity(*, thread: Thread) -> dict[str, Any]:
    """CONTRACT's integrity answer, from the verdict the last check recorded on the thread.

    `last_safe_checkpoint` is the checkpoint a rollback can use: the highest cursor that is
    still safe (its checksum recomputes and the chain up to its cursor verifies)."""
    checkpoint = last_safe_checkpoint(thread=thread)
    return {
        "chain_ok": thread.chain_ok,
        "first_bad_seq": thread.first_bad_seq,
        "verified_until": thread.verified_until,
        "verified_at": thread.verified_at.isoformat() if thread.verified_at else None,
        "last_seq": thread.last_seq,
        "last_safe_checkpoint": None
        if checkpoint is None
        else {
            "id": checkpoint.pk,
            "summary_version": (
                checkpoint.summary_version.version if checkpoint.summary_version else None
            ),
            "cursor": checkpoint.cursor,
            "chain_hash": checkpoint.chain_hash,
            "summary_checksum": checkpoint.summary_checksum,
            "safe": checkpoint.safe,
            "created_at": checkpoint.created_at.isoformat(),
            "label": checkpoint.label,
        },
    }


# --- Working context and summaries (helper E1) ---------------------------------------------------
