"""Reading the published chain heads (docs/repairs.md, "Published chain heads"): the
`heads-YYYY-MM-DD.jsonl` files in CTXADMIN_HEADS_DIR, outside the database. No database here: a read
of files.

Every line's Ed25519 signature is checked with the key it names (threads/keys/heads.py); a line
that does not verify is kept as a problem for its thread (someone edited the file), never as
evidence. The parsed directory is cached until a file in it changes, so a sweep over every
thread reads it once.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from threads.domain.heads import PublishedHead, head_parse
from threads.keys.heads import heads_dir, heads_public_keys

FILE_GLOB = "heads-*.jsonl"


@dataclass
class HeadsIndex:
    # Per thread, every head whose signature verifies, in the order published.
    heads: dict[str, list[PublishedHead]] = field(default_factory=dict)
    # Per thread (or "" when the line names none), lines that do not verify: (where, claimed
    # seq, reason).
    problems: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)

    def latest(self, thread_id: str) -> PublishedHead | None:
        found = self.heads.get(thread_id)
        return found[-1] if found else None


_cache: dict[str, tuple[tuple[object, ...], HeadsIndex]] = {}
_cache_lock = threading.Lock()


def heads_files(directory: Path | None = None) -> list[Path]:
    """The publication files, oldest day first."""
    directory = directory or heads_dir()
    return sorted(directory.glob(FILE_GLOB)) if directory.is_dir() else []


def published_heads() -> HeadsIndex:
    """Every published head, read (again only when a file changed) from the heads directory."""
    directory = heads_dir()
    files = heads_files(directory)
    keys = heads_public_keys()
    signature: tuple[object, ...] = (
        tuple(sorted(keys)),
        *((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files),
    )
    with _cache_lock:
        cached = _cache.get(str(directory))
        if cached is not None and cached[0] == signature:
            return cached[1]
    index = HeadsIndex()
    for path in files:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                where = f"{path.name}:{number}"
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    value = None
                head, reason = head_parse(value, keys, where=where)
                if head is not None:
                    index.heads.setdefault(head.thread, []).append(head)
                    continue
                thread = str(value.get("thread", "")) if isinstance(value, dict) else ""
                seq = value.get("seq") if isinstance(value, dict) else None
                claimed = seq if isinstance(seq, int) and seq > 0 else 1
                index.problems.setdefault(thread, []).append((where, claimed, reason))
    with _cache_lock:
        _cache[str(directory)] = (signature, index)
    return index


def thread_published_heads(
    *, thread_id: object
) -> tuple[list[PublishedHead], list[tuple[str, int, str]]]:
    """A thread's published heads that verify, and the lines naming it that do not."""
    index = published_heads()
    key = str(thread_id)
    return list(index.heads.get(key, [])), list(index.problems.get(key, []))


def thread_last_published_head(*, thread_id: object) -> PublishedHead | None:
    return published_heads().latest(str(thread_id))
