"""Shared set-up for the published-heads tests: a heads directory and signing key of the test's
own, and the tamperings someone with full database access could do behind the application."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import factories as f
from threads.domain import chain
from threads.keys.heads import signing_key_generate
from threads.models import Event, Thread
from threads.selectors.integrity import stored_events


@pytest.fixture
def heads_dir(settings: Any, tmp_path: Path) -> Path:
    """CTXADMIN_HEADS_DIR and CTXADMIN_HEADS_SIGNING_KEY under the test's tmp_path."""
    key = tmp_path / "signing-key.pem"
    signing_key_generate(key)
    settings.CTXADMIN_HEADS_DIR = tmp_path / "chain-heads"
    settings.CTXADMIN_HEADS_SIGNING_KEY = str(key)
    return tmp_path / "chain-heads"


def fill(thread: Thread, events: int) -> None:
    f.append(thread, *(f.user(f"message {n}") for n in range(1, events + 1)))


def truncate(thread: Thread, *, keep: int) -> None:
    """Delete every event after `keep` and set the thread's head back to match, as a database
    administrator covering their tracks would."""
    head = Event.objects.get(thread=thread, seq=keep).hash
    with f.log_unsealed():
        Event.objects.filter(thread=thread, seq__gt=keep).delete()
        Thread.objects.filter(pk=thread.pk).update(last_seq=keep, chain_head=head)


def rehash_from(thread: Thread, seq: int, *, key: bytes | None = None, **changes: Any) -> None:
    """Change event `seq`'s data and recompute every hash from it on (plain SHA-256 unless a
    key is given, from the stored hash before `seq`), then set the thread's head to match: a
    consistent forged chain."""
    event = Event.objects.get(thread=thread, seq=seq)
    if changes:
        f.tamper(event, **changes)
    previous = (
        chain.genesis_hash(str(thread.pk), key)
        if seq == 1
        else Event.objects.get(thread=thread, seq=seq - 1).hash
    )
    forged = []
    for stored in stored_events(thread_id=thread.pk, after=seq - 1):
        if stored.get("content_digest") is None:
            form = chain.event_canonical(stored)
        else:  # chain v2: a new digest of the changed content, then the link over it
            stored["content_digest"] = chain.event_digest(stored)
            form = chain.event_v2_canonical(stored)
        previous = chain.link_hash(previous, form, key)
        forged.append((stored["seq"], previous, stored.get("content_digest")))
    with f.log_unsealed():
        for number, value, digest in forged:
            Event.objects.filter(thread=thread, seq=number).update(
                hash=value, content_digest=digest
            )
        Thread.objects.filter(pk=thread.pk).update(chain_head=previous)
