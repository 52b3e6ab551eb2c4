"""Builders for test data. They go through the services, so test data obeys the invariants."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from threads.database.guard import log_seal_opened
from threads.domain import chain
from threads.domain.events import normalize_event
from threads.keys.chain import thread_genesis
from threads.models import AuditEntry, Event, Thread, Workspace
from threads.selectors.integrity import stored_events
from threads.services.events import event_append_batch
from threads.services.threads import thread_get_or_create
from threads.services.workspaces import member_add, workspace_create

PASSWORD = "correct-horse-battery"


def make_workspace(name: str = "acme") -> tuple[Workspace, str]:
    return workspace_create(name=name)


def make_person(workspace: Workspace, username: str, role: str) -> Any:
    return member_add(workspace=workspace, username=username, role=role, password=PASSWORD)


def make_thread(workspace: Workspace, external_id: str = "t-1", **settings: Any) -> Thread:
    return thread_get_or_create(workspace=workspace, external_id=external_id, **settings)[0]


def append(thread: Thread, *bodies: dict[str, Any]) -> list[Event]:
    """Append events given as the agent would post them; return the stored rows."""
    new = [normalize_event(b, max_bytes=1 << 20) for b in bodies]
    return [a.event for a in event_append_batch(thread=thread, new_events=new)]


def user(text: str) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"kind": "message", "role": "assistant", "content": text}


def call(
    call_id: str,
    tool: str,
    arguments: dict[str, Any] | None = None,
    side_effect_key: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "tool_call",
        "tool_call_id": call_id,
        "tool_name": tool,
        "arguments": arguments or {},
    }
    if side_effect_key:
        body.update(side_effect=True, idempotency_key=side_effect_key)
    return body


def result(
    call_id: str, status: str = "succeeded", value: Any = None, **extra: Any
) -> dict[str, Any]:
    body = {"kind": "tool_result", "tool_call_id": call_id, "status": status, **extra}
    if value is not None:
        body["result"] = value
    return body


def annotation(type_: str, authority: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "annotation", "type": type_, "authority": authority, "payload": payload}


@contextlib.contextmanager
def log_unsealed() -> Iterator[None]:
    """Test-only: lift the append-only triggers for the statements inside, to simulate someone
    tampering with the database. SQLite: the per-connection seal; PostgreSQL:
    session_replication_role=replica for this transaction, restored afterwards."""
    with transaction.atomic():
        if connection.vendor != "postgresql":
            with log_seal_opened():
                yield
            return
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
        yield
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")


def age(thread: Thread, days: int) -> None:
    """Make the thread's last append and every audited action on it `days` old: what
    retention reads as its inactivity."""
    then = timezone.now() - timedelta(days=days)
    Thread.objects.filter(pk=thread.pk).update(updated_at=then)
    AuditEntry.objects.filter(thread=thread).update(created_at=then)


def tamper(event: Event, **data_changes: Any) -> None:
    """Change a stored event's data behind the application's back, as someone with database
    access could: the append-only triggers are lifted for this one statement only."""
    # By (thread, seq): the append service does not read keys back for every row it writes.
    row = Event.objects.filter(thread_id=event.thread_id, seq=event.seq)
    with log_unsealed():
        changed = row.update(data={**event.data, **data_changes})
    assert changed == 1


def as_chain_v1(thread: Thread) -> None:
    """Rewrite a thread's log as it was stored before salted digests (chain v1, docs/event-log.md,
    "Hash chain and canonical JSON"): no salt, no digest, each link over the event's stored form,
    and the thread's head to match. Plain SHA-256: for threads without a chain key."""
    previous = thread_genesis(thread.id, thread.chain_key_id)
    rows = []
    for event in stored_events(thread_id=thread.pk):
        event.pop("content_salt", None), event.pop("content_digest", None)
        previous = chain.link_hash(previous, chain.event_canonical(event))
        rows.append((event["seq"], previous))
    with log_unsealed():
        for seq, value in rows:
            Event.objects.filter(thread=thread, seq=seq).update(
                hash=value, content_salt=None, content_digest=None
            )
        Thread.objects.filter(pk=thread.pk).update(chain_head=previous)
