"""A redacted event's content leaves every store beside the event (docs/repairs.md, "Redaction
beside the event").

The redaction of an event (the event row, the chain, the Redaction record) calls
`content_scrub` inside its own transaction, under the thread's lock; this module removes the
same content from every other row of the thread that copied it: its title, its summary
versions (content, rendered text, trigger, verification report; then checksum and tokens
recomputed and every checkpoint that names the old checksum re-pointed and re-checksummed),
checkpoints' pending work, approval requests, side effects, audit entries and task results.
An integration that stores copies of its own appends its scrubber to `content_scrubbers` in
`AppConfig.ready()` (the LangGraph checkpointer: channel values, pending writes, the mirrored
messages' digests; trace imports: the uploads that imported the event).

This is the one place that writes to a stored summary version or checkpoint after it is stored
("Never write to an event, a summary version or a checkpoint after it is stored", but for
forgetting on request): the rows keep their numbers, ranges, chain hashes and citations, and
only lose the redacted text, so every rollback, preview and restore that trusted them still
verifies them; then a fold is requested, so the head is folded again from the redacted log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction

from threads.domain import tokens
from threads.domain.scrub import Needles, content_needles, scrub_json, summary_scrub
from threads.domain.summary_render import render_summary
from threads.models import (
    TOOL_CALL_INDEXED,
    ApprovalRequest,
    AuditEntry,
    Checkpoint,
    Event,
    EventKind,
    SideEffect,
    SummaryVersion,
    TaskRun,
    Thread,
    ThreadTool,
)
from threads.services.fold_requests import ThreadPinned, fold_request
from threads.services.integrity import checkpoint_checksum, summary_checksum

# What an integration adds: called with thread, seq, needles (the content needles, longest
# first) and placeholder, inside the redaction's transaction; answers {store: rows changed}.
content_scrubbers: list[Callable[..., dict[str, int]]] = []

REFOLD_TRIGGER = {"kind": "redaction", "reason": "an event was redacted"}


def content_scrub(
    *, thread: Thread, seq: int, needles: Sequence[str], placeholder: str
) -> dict[str, int]:
    """In the caller's transaction: remove every needle (and whatever cites `seq`) from every
    stored copy beside the event; answer counts by store, e.g. {"summary_versions": 2,
    "langgraph_values": 1}: the rows each store changed.

    The caller holds the thread's lock (the redaction numbers nothing, but it must not race a
    fold's commit). A needle that is structure, not content (a role, a status, the event's tool
    call id, its tool's name, its side effect's idempotency key) is left alone
    (threads.domain.scrub.content_needles). A fold of the thread is requested after commit
    when a summary changed (not on a pinned thread: its restored head stays, scrubbed)."""
    found = Needles(
        content_needles(needles, structure=_structure_of(thread, seq, needles)), placeholder
    )
    with transaction.atomic():
        counts = {
            # A title is often the first user words (an import names a thread so).
            "threads": _rows_scrub(
                Thread.objects.filter(pk=thread.pk), ("title", "pin_reason"), found
            ),
        }
        counts["summary_versions"], renamed = _summaries_scrub(thread, seq, found)
        counts["checkpoints"] = _checkpoints_scrub(thread, found, renamed)
        counts["approvals"] = _rows_scrub(
            ApprovalRequest.objects.filter(thread=thread),
            ("action", "tool_name", "arguments", "reason"),
            found,
        )
        counts["side_effects"] = _rows_scrub(
            SideEffect.objects.filter(thread=thread),
            ("tool_name", "idempotency_key", "request_id"),
            found,
        )
        counts["audit_entries"] = _rows_scrub(
            AuditEntry.objects.filter(thread=thread), ("before", "after"), found
        )
        counts["task_runs"] = _rows_scrub(TaskRun.objects.filter(thread=thread), ("result",), found)
        for scrubber in content_scrubbers:
            added = scrubber(
                thread=thread, seq=seq, needles=list(found.texts), placeholder=placeholder
            )
            for store, changed in added.items():
                counts[store] = counts.get(store, 0) + changed
        if counts["summary_versions"]:
            try:
                fold_request(thread=thread, trigger=REFOLD_TRIGGER)
            except ThreadPinned:
                pass  # the pin keeps the restored head; it is scrubbed already
    return counts


def _structure_of(thread: Thread, seq: int, needles: Sequence[str]) -> list[str]:
    """The ids and names the redacted event keeps or other rows key on: its own columns, its
    side effect's, its approval's tool, the thread's tool names, and any needle that is a tool
    call id, a tool name or a client_event_id of the thread's log (a mirrored AI message's
    metadata holds its calls' ids and tools). Read from the rows beside the event too, since
    the event's data may be gone already when this runs."""
    candidates = sorted({n for n in needles if isinstance(n, str) and 0 < len(n) <= 200})
    words: list[str] = []
    for start in range(0, len(candidates), ID_BATCH):
        words += _ids_among(thread, candidates[start : start + ID_BATCH])
    for row in Event.objects.filter(thread=thread, seq=seq).values(
        "client_event_id",
        "tool_call_id",
        "role",
        "kind",
        "data__tool_name",
        "data__idempotency_key",
    ):
        words += [str(v) for v in row.values() if isinstance(v, str)]
    for effect in SideEffect.objects.filter(thread=thread, call_seq=seq).values(
        "tool_call_id", "tool_name", "idempotency_key"
    ):
        words += [str(v) for v in effect.values()]
    words += list(
        ApprovalRequest.objects.filter(thread=thread, request_event__seq=seq).values_list(
            "tool_name", flat=True
        )
    )
    words += list(ThreadTool.objects.filter(thread=thread).values_list("name", flat=True))
    return words


# How many needles one lookup of the log's ids takes (a parameter each).
ID_BATCH = 500


def _ids_among(thread: Thread, candidates: list[str]) -> list[str]:
    """The candidates that are a tool call id, a client_event_id or a tool name of the log."""
    events = Event.objects.filter(thread=thread)
    calls = events.filter(TOOL_CALL_INDEXED)
    found = set(calls.filter(tool_call_id__in=candidates).values_list("tool_call_id", flat=True))
    found.update(
        str(key)
        for key in events.filter(client_event_id__in=candidates).values_list(
            "client_event_id", flat=True
        )
    )
    found.update(
        str(name)
        for name in calls.filter(
            kind=EventKind.TOOL_CALL, data__tool_name__in=candidates
        ).values_list("data__tool_name", flat=True)
    )
    return [str(word) for word in found if word]


def _rows_scrub(rows: Any, fields: Sequence[str], found: Needles) -> int:
    """Replace the needles inside `fields` (text or JSON) of each row; the rows changed."""
    if not found:
        return 0
    changed = 0
    for row in rows.only("pk", *fields).order_by("pk"):
        updates = {}
        for name in fields:
            value = getattr(row, name)
            new = scrub_json(value, found)
            if new is not value:
                updates[name] = new
        if updates:
            type(row).objects.filter(pk=row.pk).update(**updates)
            changed += 1
    return changed


def _summaries_scrub(thread: Thread, seq: int, found: Needles) -> tuple[int, dict[str, str]]:
    """Every summary version of the thread without the redacted content: how many changed, and
    {old checksum: new checksum} of those whose checksum changed."""
    changed = 0
    renamed: dict[str, str] = {}
    versions = SummaryVersion.objects.filter(thread=thread).select_related("thread")
    for version in versions.order_by("version"):
        content = summary_scrub(version.content, seq=seq, needles=found)
        trigger = scrub_json(version.trigger, found)
        verification = scrub_json(version.verification, found)
        if content is version.content and trigger is version.trigger:
            if verification is version.verification and not found.found_in(version.rendered):
                continue
        old_checksum = version.checksum
        # The text the agent reads is the content's rendering; a version whose text was made
        # another way (none today) keeps its text, scrubbed.
        if content is not version.content and version.rendered == render_summary(version.content):
            rendered = render_summary(content)
        else:
            rendered = found.sub(version.rendered)
        version.content, version.trigger, version.verification = content, trigger, verification
        version.rendered = rendered
        version.tokens = tokens.count_text(rendered, thread.encoding)
        version.checksum = summary_checksum(version, thread)
        SummaryVersion.objects.filter(pk=version.pk).update(
            content=content,
            trigger=trigger,
            verification=verification,
            rendered=rendered,
            tokens=version.tokens,
            checksum=version.checksum,
        )
        changed += 1
        if version.checksum != old_checksum:
            renamed[old_checksum] = version.checksum
    return changed, renamed


def _checkpoints_scrub(thread: Thread, found: Needles, renamed: dict[str, str]) -> int:
    """Every checkpoint of the thread re-pointed at its summary's new checksum and without the
    redacted content in its pending work and texts, then checksummed again (a checkpoint whose
    checksum did not recompute before stays untrusted: it is not re-signed)."""
    changed = 0
    rows = Checkpoint.objects.filter(thread=thread).select_related("summary_version", "thread")
    for checkpoint in rows.order_by("pk"):
        trusted = checkpoint.checksum == checkpoint_checksum(checkpoint)
        summary = renamed.get(checkpoint.summary_checksum, checkpoint.summary_checksum)
        pending = scrub_json(checkpoint.pending, found)
        label = found.sub(checkpoint.label)
        reason = found.sub(checkpoint.unsafe_reason)
        if (summary, label, reason) == (
            checkpoint.summary_checksum,
            checkpoint.label,
            checkpoint.unsafe_reason,
        ) and pending is checkpoint.pending:
            continue
        checkpoint.summary_checksum, checkpoint.pending = summary, pending
        if trusted:
            checkpoint.checksum = checkpoint_checksum(checkpoint)
        Checkpoint.objects.filter(pk=checkpoint.pk).update(
            summary_checksum=summary,
            pending=pending,
            label=label,
            unsafe_reason=reason,
            checksum=checkpoint.checksum,
        )
        changed += 1
    return changed
