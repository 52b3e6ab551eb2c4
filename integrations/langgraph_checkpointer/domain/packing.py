"""How the LangGraph checkpointer packs its small bookkeeping into a few compressed bytes
(docs/langgraph.md, "Agent frameworks").

A row of its own per small channel value or per pending write costs a tuple header, a key
repeated in a unique index and page slack: about 300 bytes to hold a `branch:to:*` trigger whose
value is empty. So a checkpoint row carries the small values of its channels (`values_pack`)
and the pending writes of its tasks (`tasks_pack`); a task's writes that came before their
checkpoint are one row of their own (`writes_pack`). All are compact JSON, bytes as base64,
zlib-compressed, and unpack to exactly what was packed.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# What a checkpoint row carries of a channel: its type tag and its bytes. The version is the
# checkpoint's own `channel_versions[channel]`, so it is not repeated.
SmallValue = tuple[str, bytes]
# Or None: a version row holds that version (a large value, mirrored messages), so that the next
# checkpoint, which names the same version, knows where it is without a query.
Carried = SmallValue | None


@dataclass(frozen=True)
class PackedWrite:
    """One pending write as a task's row holds it: serialised bytes, or for a write of messages
    to the mirrored channel the seqs of the events carrying them (`data` is then empty)."""

    idx: int
    channel: str
    type: str
    data: bytes
    message_seqs: list[int] | None = None


def _zip(value: object) -> bytes:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return zlib.compress(text.encode("utf-8"), 9)


def _unzip(data: bytes) -> object:
    return json.loads(zlib.decompress(data))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def values_pack(values: Mapping[str, Carried]) -> bytes:
    """A checkpoint's small channel values as stored (0 for "in a version row"); no values, no
    bytes at all."""
    if not values:
        return b""
    return _zip(
        {
            channel: 0 if value is None else [value[0], _b64(value[1])]
            for channel, value in sorted(values.items())
        }
    )


def values_unpack(data: bytes) -> dict[str, Carried]:
    if not data:
        return {}
    loaded = _unzip(data)
    assert isinstance(loaded, dict)
    return {
        str(c): None if value == 0 else (str(value[0]), base64.b64decode(value[1]))
        for c, value in loaded.items()
    }


def writes_pack(writes: Sequence[PackedWrite]) -> bytes:
    """A task's pending writes as stored, in idx order."""
    return _zip([_write_row(w) for w in sorted(writes, key=lambda w: w.idx)])


def writes_unpack(data: bytes) -> list[PackedWrite]:
    loaded = _unzip(data)
    assert isinstance(loaded, list)
    return [_write_of(row) for row in loaded]


@dataclass(frozen=True)
class TaskWrites:
    """A task's pending writes after a checkpoint, as the checkpoint row carries them."""

    task_id: str
    task_path: str
    writes: list[PackedWrite]


def _write_row(w: PackedWrite) -> list[object]:
    row: list[object] = [w.idx, w.channel, w.type, _b64(w.data)]
    if w.message_seqs is not None:
        row.append(w.message_seqs)
    return row


def _write_of(row: list[object]) -> PackedWrite:
    seqs = row[4] if len(row) > 4 else None
    assert seqs is None or isinstance(seqs, list)
    return PackedWrite(
        idx=int(str(row[0])),
        channel=str(row[1]),
        type=str(row[2]),
        data=base64.b64decode(str(row[3])),
        message_seqs=None if seqs is None else [int(seq) for seq in seqs],
    )


def tasks_pack(tasks: Sequence[TaskWrites]) -> bytes:
    """The pending writes of a checkpoint's tasks as stored, each task's in idx order; no
    writes, no bytes at all."""
    if not tasks:
        return b""
    return _zip(
        [
            [t.task_id, t.task_path, [_write_row(w) for w in sorted(t.writes, key=lambda w: w.idx)]]
            for t in tasks
        ]
    )


def tasks_unpack(data: bytes) -> list[TaskWrites]:
    if not data:
        return []
    loaded = _unzip(data)
    assert isinstance(loaded, list)
    return [
        TaskWrites(task_id=str(task), task_path=str(path), writes=[_write_of(r) for r in rows])
        for task, path, rows in loaded
    ]
