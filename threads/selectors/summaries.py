"""Summary versions and checkpoints of one thread."""

from __future__ import annotations

from django.db.models import (
    QuerySet,
)

from threads.domain.errors import NotFound
from threads.models import (
    Checkpoint,
    SummaryVersion,
    Thread,
)


def summary_versions_for_thread(*, thread: Thread) -> list[SummaryVersion]:
    return list(
        SummaryVersion.objects.filter(thread=thread)
        .defer("content", "rendered")
        .order_by("-version")
    )


def summary_version_get(*, thread: Thread, version: int) -> SummaryVersion:
    found = SummaryVersion.objects.filter(thread=thread, version=version).first()
    if found is None:
        raise NotFound("summary version not found")
    return found


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


def summary_versions_full(*, thread: Thread) -> QuerySet[SummaryVersion]:
    """Every version of a thread with its content, oldest first (the API's list)."""
    return SummaryVersion.objects.filter(thread=thread).order_by("version")
