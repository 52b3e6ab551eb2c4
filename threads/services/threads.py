"""Creating threads, and locking one for a write."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, models, transaction

from threads.domain.errors import InvalidEvent
from threads.domain.external_ids import external_id_problem
from threads.keys.chain import current_chain_key_id, thread_genesis
from threads.models import Thread, Workspace
from threads.services.audit import audit_record
from threads.summarizers import summarizer_unavailable


def thread_get_or_create(
    *, workspace: Workspace, external_id: str, actor_label: str = "", **settings: Any
) -> tuple[Thread, bool]:
    """Create a thread, or return the existing one with that external_id (created=False).

    A creation is audited (actor_label names an agent's key; empty means the system). An
    external_id that could not name the thread in a URL, or a summarizer this server cannot
    run (llm without an LLM endpoint), is refused (InvalidEvent).
    """
    external_id_require_valid(external_id)
    existing = Thread.objects.filter(workspace=workspace, external_id=external_id).first()
    if existing is not None:
        return existing, False
    external_id_require_unshadowed(workspace.pk, external_id)
    if "summarizer" in settings:
        summarizer_require_available(settings["summarizer"])
    # A new chain starts with the current key and keeps it for life (docs/design.md §2.3).
    thread = Thread(
        workspace=workspace,
        external_id=external_id,
        chain_key_id=current_chain_key_id(),
        **settings,
    )
    thread.chain_head = thread_genesis(thread.id, thread.chain_key_id)
    try:
        with transaction.atomic():
            thread.save(force_insert=True)
            audit_record(
                workspace=workspace,
                actor=None,
                actor_label=actor_label or "system",
                action="thread.create",
                target_type="thread",
                target_id=thread.pk,
                thread=thread,
                after={"external_id": external_id, **_audit_form(settings)},
            )
    except IntegrityError:
        # Another request created it between our read and our insert. Any other integrity
        # error (a check constraint on the settings) is the caller's bug: re-raise it.
        winner = Thread.objects.filter(workspace=workspace, external_id=external_id).first()
        if winner is None:
            raise
        return winner, False
    return thread, True


# The settings an admin may change after creation (docs/api.md §2.5): the budget, the
# watermarks and the summariser. Not the encoding: the stored events were counted in it.
THREAD_SETTINGS = (
    "context_window",
    "reserved_output",
    "reasoning_reserve",
    "safety_margin",
    "fixed_tokens",
    "high_watermark",
    "low_watermark",
    "summarizer",
)


def external_id_require_valid(external_id: str) -> None:
    """Raise InvalidEvent (400 validation_error) unless external_id can name a thread."""
    problem = external_id_problem(external_id)
    if problem is not None:
        raise InvalidEvent(f"invalid external_id: {problem}", fields={"external_id": problem})


def summarizer_require_available(summarizer: str) -> None:
    """Raise InvalidEvent (400 validation_error) when this server could not fold with the
    summarizer (docs/api.md §2.1): a thread created with it would fail every fold."""
    problem = summarizer_unavailable(summarizer)
    if problem is not None:
        raise InvalidEvent(f"invalid summarizer: {problem}", fields={"summarizer": problem})


def external_id_require_unshadowed(workspace_id: int, external_id: str) -> None:
    """Raise InvalidEvent (400 validation_error) when external_id is, as a UUID, the id of
    another thread of the workspace: `{id}` in a URL resolves a UUID to the thread with that id
    first (docs/api.md §2), so the new thread could never be reached by its external_id, and
    writes meant for it would go to the other one."""
    try:
        as_id = uuid.UUID(external_id)
    except ValueError:
        return
    if Thread.objects.filter(workspace_id=workspace_id, pk=as_id).exists():
        problem = "must not be the id of another thread of the workspace"
        raise InvalidEvent(f"invalid external_id: {problem}", fields={"external_id": problem})


def _audit_form(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings as JSON for the audit entry: related rows (a fork's parent) by their key."""
    return {
        name: str(value.pk) if isinstance(value, models.Model) else value
        for name, value in settings.items()
    }


def thread_lock(thread: Thread) -> Thread:
    """The thread's row read again with its workspace and locked (select_for_update) until the
    caller's transaction ends; call it inside `transaction.atomic` before numbering anything."""
    # of=self: lock the thread row only, never the joined workspace row.
    return (
        Thread.objects.select_for_update(of=("self",)).select_related("workspace").get(pk=thread.pk)
    )
