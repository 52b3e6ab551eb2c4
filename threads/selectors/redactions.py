"""Redaction records read back (docs/event-log.md, "Redaction"): a thread's record chain and the
records the verifier may trust, and who redacted which events of a page."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from threads.domain.canonical import format_time
from threads.domain.redaction import RecordFields, RecordsVerdict, verify_records
from threads.models import Redaction


def record_fields(record: Redaction) -> RecordFields:
    return RecordFields(
        thread=str(record.thread_id),
        number=record.number,
        seq=record.seq,
        by=record.by_label,
        at=format_time(record.at),
        reason=record.reason,
        event_hash=record.event_hash,
        previous_hash=record.previous_hash,
        remains_digest=record.remains_digest,
    )


def thread_redactions(*, thread_id: Any) -> list[Redaction]:
    """A thread's redaction records in the record chain's order (few: a handful per thread)."""
    return list(Redaction.objects.filter(thread_id=thread_id).order_by("number"))


def redaction_verdict(*, thread_id: Any, key: bytes | None) -> RecordsVerdict:
    """The thread's record chain walked: the records the verifier may trust, and the first
    that does not verify."""
    return verify_records(
        ((record_fields(r), r.record_hash) for r in thread_redactions(thread_id=thread_id)),
        thread_uid=str(thread_id),
        key=key,
    )


def last_redaction(*, thread_id: Any) -> Redaction | None:
    return Redaction.objects.filter(thread_id=thread_id).order_by("-number").first()


def redacted_seqs(*, thread_id: Any, seqs: Iterable[int]) -> set[int]:
    wanted = set(seqs)
    if not wanted:
        return set()
    return set(
        Redaction.objects.filter(thread_id=thread_id, seq__in=wanted).values_list("seq", flat=True)
    )


def record_export(record: Redaction) -> dict[str, Any]:
    """A record as an export carries it: its chained fields and its hash."""
    return {**record_fields(record).body(), "record_hash": record.record_hash}
