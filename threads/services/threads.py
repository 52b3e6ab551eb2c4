"""Creating threads."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from threads.domain import chain
from threads.models import Thread, Workspace
from threads.services.chainkey import chain_key


def thread_get_or_create(
    *, workspace: Workspace, external_id: str, **settings: Any
) -> tuple[Thread, bool]:
    """Create a thread, or return the existing one with that external_id (created=False)."""
    existing = Thread.objects.filter(workspace=workspace, external_id=external_id).first()
    if existing is not None:
        return existing, False
    thread = Thread(workspace=workspace, external_id=external_id, **settings)
    thread.chain_head = chain.genesis_hash(str(thread.id), chain_key())
    try:
        with transaction.atomic():
            thread.save(force_insert=True)
    except IntegrityError:
        # Another request created it between our read and our insert.
        return Thread.objects.get(workspace=workspace, external_id=external_id), False
    return thread, True
