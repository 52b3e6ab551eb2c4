"""Publishing signed chain heads outside the database (docs/design.md §6.6).

Each publication appends, to the day's `heads-YYYY-MM-DD.jsonl` in CTXADMIN_HEADS_DIR, one
Ed25519-signed line per thread whose head moved since its last publication. A line is never
rewritten: the file is opened for appending and fsynced. Verify then holds the log against the
heads (threads/services/integrity.py), so a tail cut off together with the thread row, or a
chain recomputed without the key, is caught by someone who can change the database but not
these files.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from threads.domain.canonical import canonical_json, format_time
from threads.domain.heads import PublishedHead, head_sign, public_key_id
from threads.keys.chain import ChainKeyUnknown, chain_key, thread_genesis
from threads.keys.heads import PUBLIC_KEY_NAME, heads_dir, heads_signing_key, public_key_pem
from threads.selectors.integrity import chain_walk, thread_heads
from threads.selectors.published_heads import published_heads

logger = logging.getLogger(__name__)

# Lines are appended in batches of this many, so a publication stopped by its time limit (the
# first one walks every chain from genesis) keeps what it signed.
WRITE_EVERY = 200


@dataclass
class Publication:
    file: str = ""
    published: list[PublishedHead] = field(default_factory=list)
    # Threads whose head does not extend their last published one: (thread, reason). Not
    # published, so the heads keep vouching for the log as it was; verify reports them.
    refused: list[tuple[str, str]] = field(default_factory=list)


def chain_heads_publish(*, now: datetime | None = None) -> Publication:
    """Append a signed line for every thread whose head moved since its last publication.

    A head is published only when the chain from the thread's last published head (or its
    genesis) up to it recomputes with the thread's key, so a publication never vouches for a
    log that was cut back or rewritten; those threads are listed as refused instead. Writes
    files only, never the database. Raises ImproperlyConfigured without a signing key.
    """
    key = heads_signing_key(create=True)
    if key is None:
        raise ImproperlyConfigured(
            "no chain heads signing key: set CTXADMIN_HEADS_SIGNING_KEY to an Ed25519 PEM file"
        )
    directory = heads_dir()
    directory.mkdir(parents=True, exist_ok=True)
    _write_public_key(directory, key.public_key())
    now = now or timezone.now()
    published_at = format_time(now)
    index = published_heads()
    result = Publication(file=str(directory / f"heads-{now.date().isoformat()}.jsonl"))
    lines: list[PublishedHead] = []
    for head in thread_heads():
        if len(lines) >= WRITE_EVERY:
            _append(Path(result.file), [canonical_json(h.line()) + b"\n" for h in lines])
            result.published += lines
            lines = []
        thread_id = str(head["id"])
        last = index.latest(thread_id)
        if last is not None and (last.seq, last.chain_head) == (
            head["last_seq"],
            head["chain_head"],
        ):
            continue
        try:
            problem = _extension_problem(head, last)
        except ChainKeyUnknown as unknown:
            problem = unknown.message
        if problem:
            result.refused.append((thread_id, problem))
            logger.warning("chain head of thread %s not published: %s", thread_id, problem)
            continue
        lines.append(
            head_sign(
                key,
                thread=thread_id,
                workspace=head["workspace__name"],
                seq=head["last_seq"],
                chain_head=head["chain_head"],
                algorithm="hmac-sha256" if chain_key(head["chain_key_id"]) else "sha256",
                published_at=published_at,
            )
        )
    if lines:
        _append(Path(result.file), [canonical_json(h.line()) + b"\n" for h in lines])
        result.published += lines
    if not result.published:
        result.file = ""
    return result


def _extension_problem(head: Mapping[str, Any], last: PublishedHead | None) -> str:
    """Why the thread's current head may not be published, or '' when it extends the last."""
    key_id = head["chain_key_id"]
    if last is not None and head["last_seq"] < last.seq:
        return f"the log ends at seq {head['last_seq']}, before the published seq {last.seq}"
    start_seq, start_hash = (
        (last.seq, last.chain_head) if last is not None else (0, thread_genesis(head["id"], key_id))
    )
    verdict = chain_walk(
        thread_id=head["id"],
        start_seq=start_seq,
        start_hash=start_hash,
        until=head["last_seq"],
        key=chain_key(key_id),
    )
    if not verdict.ok:
        return f"the chain breaks at seq {verdict.first_bad_seq}: {verdict.detail}"
    if verdict.head != head["chain_head"]:
        return "the chain does not lead from the last published head to the thread's head"
    return ""


def _write_public_key(directory: Path, public_key: Any) -> None:
    """heads.pub is the current key; heads-<key id>.pub keeps each key that ever signed, so
    lines signed before a change of signing key still verify."""
    pem = public_key_pem(public_key)
    for name in (PUBLIC_KEY_NAME, f"heads-{public_key_id(public_key)}.pub"):
        path = directory / name
        if not path.exists() or path.read_bytes() != pem:
            path.write_bytes(pem)


def _append(path: Path, lines: list[bytes]) -> None:
    """Append whole lines and fsync; concurrent publishers take turns on a lock."""
    created = not path.exists()
    with path.open("ab") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        try:
            out.write(b"".join(lines))
            out.flush()
            os.fsync(out.fileno())
        finally:
            fcntl.flock(out, fcntl.LOCK_UN)
    if created:
        # The new file's name must survive a crash too.
        descriptor = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def publication_summary(publication: Publication) -> dict[str, Any]:
    """A publication as plain JSON values (the task's result, the command's output)."""
    return {
        "file": publication.file,
        "published": [{"thread": h.thread, "seq": h.seq} for h in publication.published],
        "refused": [{"thread": t, "reason": r} for t, r in publication.refused],
    }


__all__ = ["Publication", "chain_heads_publish", "publication_summary"]
