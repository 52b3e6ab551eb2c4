"""Summary versions of one thread."""

from __future__ import annotations

from django.db.models import (
    QuerySet,
)

from threads.domain.errors import NotFound
from threads.models import (
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


def summary_versions_full(*, thread: Thread, phase: str = "") -> QuerySet[SummaryVersion]:
    """Every version of a thread with its content, oldest first (the API's list); with
    `phase`, those in that phase only (`rejected`: the candidates verification refused)."""
    versions = SummaryVersion.objects.filter(thread=thread)
    if phase:
        versions = versions.filter(phase=phase)
    return versions.order_by("version")
