"""Erasure by subject (docs/repairs.md, "Erasure by subject"): an admin names a value (an e-mail
address, a customer id) and a reason; every event of the workspace that mentions it, found
through the search index (threads.selectors.subjects), is redacted (threads.services.redaction),
the value itself scrubbed from the stores beside each event, in one audited batch with a report
of the threads, events, summary versions and stored LangGraph values touched.

The value is never stored: the task carries it, the report and the audit entry hold only its
SHA-256 and the counts. A dry run does the whole batch in one transaction and rolls it back, so
its report counts exactly what the run would touch.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from threads.access import require_role
from threads.domain.errors import DomainError, InvalidEvent
from threads.domain.search import search_terms
from threads.models import Role, TaskRun, Thread, Workspace
from threads.selectors.subjects import SubjectEvent, subject_events
from threads.services.audit import audit_record
from threads.services.enqueue import SUBJECT_ERASURE, task_run_enqueue
from threads.services.redaction import (
    SecondAdminRequired,
    event_redact,
    redaction_reason_clean,
)

MAX_VALUE = 200
# The stores content_scrub reports whose rows the report sums under its own names.
SUMMARY_STORES = ("summary_versions",)
LANGGRAPH_PREFIX = "langgraph"
# The kind of its task runs: the dashboard shows a report only for a run of this kind.
SUBJECT_ERASURE_KIND = "subject_erasure"


class _DryRun(Exception):
    """Rolls a dry run's transaction back."""


def subject_value_clean(value: Any) -> str:
    value = (value if isinstance(value, str) else "").strip()
    if not value:
        raise InvalidEvent("a query is required", fields={"query": "this field is required"})
    if len(value) > MAX_VALUE:
        raise InvalidEvent("query is too long", fields={"query": f"at most {MAX_VALUE} characters"})
    if not search_terms(value):
        raise InvalidEvent(
            "the query holds no word to search for",
            fields={"query": "needs letters or digits (an e-mail address, a customer id)"},
        )
    return value


def value_digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def subject_erasure_start(
    *, workspace: Workspace, actor: Any, query: Any, reason: Any, dry_run: bool
) -> TaskRun:
    """Check and start an erasure by subject (admins); answers its task run."""
    require_role(actor, workspace, Role.ADMIN)
    value = subject_value_clean(query)
    reason = redaction_reason_clean(reason)
    if not dry_run:
        _second_admin_check(workspace)
    with transaction.atomic():
        return task_run_enqueue(
            workspace=workspace,
            kind=SUBJECT_ERASURE_KIND,
            task_name=SUBJECT_ERASURE,
            args=[workspace.pk, actor.pk, value, reason, bool(dry_run)],
        )


def subject_erase(
    *,
    workspace_id: int,
    actor_id: int,
    value: str,
    reason: str,
    dry_run: bool,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> dict[str, Any]:
    """Redact every event of the workspace that mentions `value`; answer the report. Each
    thread in its own transaction (a thread that refuses, e.g. one whose chain no longer
    matches, is reported and the others go on); a dry run in one, rolled back."""
    workspace = Workspace.objects.get(pk=workspace_id)
    actor = get_user_model().objects.get(pk=actor_id)
    require_role(actor, workspace, Role.ADMIN)
    if not dry_run:
        _second_admin_check(workspace)  # the setting may have been turned on since the start
    found = subject_events(workspace_id=workspace.pk, value=value)
    by_thread: dict[Any, list[SubjectEvent]] = {}
    for event in found:
        by_thread.setdefault(event.thread_id, []).append(event)
    report = _Report(dry_run=dry_run, digest=value_digest(value))
    progress(0, len(found))
    if dry_run:
        try:
            with transaction.atomic():
                for events in by_thread.values():
                    report.add(events, _thread_erase(events, actor, value, reason))
                raise _DryRun
        except _DryRun:
            pass
        # Outside the rolled back transaction, which would take it back too.
        progress(report.done, len(found))
    else:
        for events in by_thread.values():
            try:
                with transaction.atomic():
                    scrubbed = _thread_erase(events, actor, value, reason)
            except DomainError as exc:
                report.refuse(events, str(exc))
            else:
                report.add(events, scrubbed)
            progress(report.done, len(found))
        audit_record(
            workspace=workspace,
            actor=actor,
            actor_label=actor.get_username(),
            action="subject_erased",
            target_type="workspace",
            target_id=str(workspace.pk),
            after={**report.counts(), "value_sha256": report.digest, "reason": reason},
        )
    return report.answer()


def _second_admin_check(workspace: Workspace) -> None:
    """A workspace that requires a second admin for every redaction refuses an erasure by
    subject: the batch cannot wait for another admin's approval without keeping the value
    until then, which erasure never stores (docs/repairs.md, "Erasure by subject"). A dry run
    is still answered."""
    if workspace.redaction_needs_second_admin:
        raise SecondAdminRequired(
            "this workspace requires a second admin for every redaction "
            "(redaction_needs_second_admin): erasure by subject cannot wait for one; redact "
            "the events one by one, each approved by another admin, or turn the setting off"
        )


def _thread_erase(events: list[SubjectEvent], actor: Any, value: str, reason: str) -> Counter[str]:
    thread = Thread.objects.select_related("workspace").get(pk=events[0].thread_id)
    scrubbed: Counter[str] = Counter()
    for event in events:
        record = event_redact(
            thread=thread, seq=event.seq, actor=actor, reason=reason, extra_needles=[value]
        )
        scrubbed.update(getattr(record, "scrubbed", {}) or {})
    return scrubbed


class _Report:
    def __init__(self, *, dry_run: bool, digest: str) -> None:
        self.dry_run = dry_run
        self.digest = digest
        self.threads: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.stores: Counter[str] = Counter()
        self.done = 0

    def add(self, events: list[SubjectEvent], scrubbed: Counter[str]) -> None:
        self.threads.append(_thread_entry(events))
        self.stores.update(scrubbed)
        self.done += len(events)

    def refuse(self, events: list[SubjectEvent], why: str) -> None:
        self.refused.append({**_thread_entry(events), "error": why})
        self.done += len(events)

    def counts(self) -> dict[str, Any]:
        return {
            "threads": len(self.threads),
            "events": sum(len(t["seqs"]) for t in self.threads),
            "summary_versions": sum(self.stores[name] for name in SUMMARY_STORES),
            "langgraph_values": sum(
                n for name, n in self.stores.items() if name.startswith(LANGGRAPH_PREFIX)
            ),
            "refused_threads": len(self.refused),
        }

    def answer(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "value_sha256": self.digest,
            **self.counts(),
            "stores": dict(sorted(self.stores.items())),
            "thread_list": self.threads,
            "refused": self.refused,
        }


def _thread_entry(events: list[SubjectEvent]) -> dict[str, Any]:
    return {
        "id": str(events[0].thread_id),
        "external_id": events[0].external_id,
        "seqs": [event.seq for event in events],
    }
