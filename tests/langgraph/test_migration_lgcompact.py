"""Migration 0014 packs the LangGraph rows already stored — small channel values and pending
writes into the checkpoint rows they belong to, the writes of a checkpoint not stored into one
row per task — and unpacks them again going back: the same version rows and write rows,
nothing LangGraph sent lost on the way."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from integrations.langgraph_checkpointer.domain.messages import checkpoint_pack
from integrations.langgraph_checkpointer.domain.packing import (
    PackedWrite,
    TaskWrites,
    tasks_unpack,
    values_unpack,
    writes_unpack,
)

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("threads", "0013_event_search")]
AFTER = [("threads", "0014_lgcompact")]
VERSIONS = {"messages": "0000000002.aa", "branch:to:agent": "0000000002.bb", "big": "0000000001.cc"}
BIG = b"x" * 500
VERSION_ROWS = [
    # channel, version, type, data, content, messages_until_seq
    ("branch:to:agent", "0000000001.ab", "empty", b"", None, None),  # named by no checkpoint
    ("branch:to:agent", "0000000002.bb", "null", b"", None, None),
    ("big", "0000000001.cc", "bytes", None, "c" * 64, None),
    ("messages", "0000000002.aa", "", None, None, 7),
]
WRITE_ROWS = [
    # checkpoint_id, task_id, idx, channel, type, data, message_seqs
    ("cp-1", "task-a", 0, "messages", "", b"", [3, 5]),
    ("cp-1", "task-a", 1, "branch:to:agent", "null", b"", None),
    ("cp-1", "task-a", -1, "__error__", "bytes", b"\x00boom\xff", None),
    ("cp-1", "task-b", 0, "é", "json", b'{"a": 1}', None),
    ("cp-0", "task-a", 0, "x", "json", b"1", None),
    ("cp-9", "task-c", 0, "x", "json", b"2", None),  # its checkpoint is not stored
    ("cp-9", "task-c", 1, "y", "json", b"3", None),
]
PATH = "~__pregel_pull, agent"


def _migrate(target: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def _version_rows(apps: Any) -> set[tuple[Any, ...]]:
    return {
        (
            v.channel,
            v.version,
            v.type,
            None if v.data is None else bytes(v.data),
            v.content_id,
            v.messages_until_seq,
        )
        for v in apps.get_model("threads", "LanggraphChannelVersion").objects.all()
    }


def _write_rows(apps: Any) -> set[tuple[Any, ...]]:
    return {
        (
            w.checkpoint_id,
            w.task_id,
            w.idx,
            w.channel,
            w.type,
            bytes(w.data),
            None if w.message_seqs is None else tuple(w.message_seqs),
        )
        for w in apps.get_model("threads", "LanggraphWrite").objects.all()
    }


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(str(part) for part in row)


def test_stored_values_and_writes_are_packed_and_unpacked_exactly() -> None:
    apps = _migrate(BEFORE)
    workspace = apps.get_model("threads", "Workspace").objects.create(name="acme")
    thread = apps.get_model("threads", "Thread").objects.create(
        workspace=workspace, external_id="old-1", chain_head="0" * 64
    )
    apps.get_model("threads", "LanggraphContent").objects.create(
        sha256="c" * 64, data=BIG, size=500
    )
    for checkpoint_id in ("cp-0", "cp-1"):
        ctxadmin = apps.get_model("threads", "Checkpoint").objects.create(
            thread=thread, cursor=0, chain_hash="0" * 64, checksum="0" * 64
        )
        apps.get_model("threads", "LanggraphCheckpoint").objects.create(
            thread=thread,
            checkpoint_id=checkpoint_id,
            checkpoint_z=checkpoint_pack({"id": checkpoint_id, "channel_versions": VERSIONS}),
            ctxadmin_checkpoint=ctxadmin,
        )
    for channel, version, kind, data, content, until in VERSION_ROWS:
        apps.get_model("threads", "LanggraphChannelVersion").objects.create(
            thread=thread,
            channel=channel,
            version=version,
            type=kind,
            data=data,
            content_id=content,
            messages_until_seq=until,
            message_count=None if until is None else 2,
        )
    for checkpoint_id, task_id, idx, channel, kind, data, seqs in WRITE_ROWS:
        apps.get_model("threads", "LanggraphWrite").objects.create(
            thread=thread,
            checkpoint_id=checkpoint_id,
            task_id=task_id,
            task_path=PATH,
            idx=idx,
            channel=channel,
            type=kind,
            data=data,
            message_seqs=seqs,
        )
    versions_before, writes_before = _version_rows(apps), _write_rows(apps)

    apps = _migrate(AFTER)
    for row in apps.get_model("threads", "LanggraphCheckpoint").objects.all():
        assert values_unpack(bytes(row.values_z)) == {
            "branch:to:agent": ("null", b""),
            "big": None,
            "messages": None,
        }
    # The carried version's row is gone; the one no checkpoint names stays, as do the others.
    assert {(c, v) for c, v, *_ in _version_rows(apps)} == {
        ("branch:to:agent", "0000000001.ab"),
        ("big", "0000000001.cc"),
        ("messages", "0000000002.aa"),
    }
    carried = {
        row.checkpoint_id: tasks_unpack(bytes(row.writes_z))
        for row in apps.get_model("threads", "LanggraphCheckpoint").objects.all()
    }
    assert carried == {
        "cp-1": [
            TaskWrites(
                "task-a",
                PATH,
                [
                    PackedWrite(-1, "__error__", "bytes", b"\x00boom\xff"),
                    PackedWrite(0, "messages", "", b"", [3, 5]),
                    PackedWrite(1, "branch:to:agent", "null", b""),
                ],
            ),
            TaskWrites("task-b", PATH, [PackedWrite(0, "é", "json", b'{"a": 1}')]),
        ],
        "cp-0": [TaskWrites("task-a", PATH, [PackedWrite(0, "x", "json", b"1")])],
    }
    (alone,) = apps.get_model("threads", "LanggraphWrite").objects.all()
    assert (alone.checkpoint_id, alone.task_id, alone.task_path) == ("cp-9", "task-c", PATH)
    assert writes_unpack(bytes(alone.writes_z)) == [
        PackedWrite(0, "x", "json", b"2"),
        PackedWrite(1, "y", "json", b"3"),
    ]

    apps = _migrate(BEFORE)
    assert sorted(map(_key, _version_rows(apps))) == sorted(map(_key, versions_before))
    assert sorted(map(_key, _write_rows(apps))) == sorted(map(_key, writes_before))
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
