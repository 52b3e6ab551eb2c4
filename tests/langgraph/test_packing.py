"""The packed LangGraph rows (docs/langgraph.md, "Agent frameworks"): a checkpoint row carries the
small values of its channels and its tasks' pending writes; what it carries reads back exactly as it
was put, whichever checkpoint first stored it."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.langgraph_checkpointer.domain.packing import (
    PackedWrite,
    TaskWrites,
    tasks_pack,
    tasks_unpack,
    values_pack,
    values_unpack,
    writes_pack,
    writes_unpack,
)
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    langgraph_checkpoint_get,
    langgraph_tuple,
)
from integrations.langgraph_checkpointer.services.checkpoint_put import (
    ValueIn,
    langgraph_checkpoint_put,
)
from integrations.langgraph_checkpointer.services.writes import WriteIn, langgraph_writes_put
from tests import factories
from threads.models import Thread

BIG = bytes(range(256)) * 2


def test_packing_round_trips() -> None:
    values = {"a": ("null", b""), "é": ("bytes", b"\x00\xff"), "big": None}
    assert values_unpack(values_pack(values)) == values
    assert values_pack({}) == b"" and values_unpack(b"") == {}
    writes = [PackedWrite(1, "b", "json", b"2"), PackedWrite(-3, "__interrupt__", "t", b"\x01")]
    assert writes_unpack(writes_pack(writes)) == sorted(writes, key=lambda w: w.idx)
    tasks = [TaskWrites("t1", "~p", [PackedWrite(0, "messages", "", b"", [4, 9])])]
    assert tasks_unpack(tasks_pack(tasks)) == tasks and tasks_unpack(b"") == []


def _put(
    workspace: Any, checkpoint_id: str, parent: str, versions: dict[str, str], **kw: Any
) -> Any:
    return langgraph_checkpoint_put(
        workspace=workspace,
        external_id="pack-1",
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=parent,
        checkpoint={"v": 4, "id": checkpoint_id, "channel_versions": versions},
        metadata={"source": "loop", "step": 0},
        actor_label="api key test",
        **kw,
    )


def _values(row: Any) -> dict[str, tuple[str, bytes]]:
    return {channel: (kind, data) for channel, kind, data in langgraph_tuple(row).values}


@pytest.mark.django_db(transaction=True)
def test_unchanged_small_values_are_carried_from_the_parent() -> None:
    workspace, _ = factories.make_workspace("acme")
    _put(
        workspace,
        "cp-1",
        "",
        {"a": "1", "b": "1", "big": "1"},
        values=[
            ValueIn("a", "1", "json", b"1"),
            ValueIn("b", "1", "null", b""),
            ValueIn("big", "1", "bytes", BIG),
        ],
    )
    # Only `a` changed: `b` comes from the parent's row, `big` from its version row.
    two = _put(
        workspace,
        "cp-2",
        "cp-1",
        {"a": "2", "b": "1", "big": "1"},
        values=[ValueIn("a", "2", "json", b"2")],
    )
    assert _values(two) == {"a": ("json", b"2"), "b": ("null", b""), "big": ("bytes", BIG)}
    # The small ones have no version row; the large one has one, shared.
    assert list(LanggraphChannelVersion.objects.values_list("channel", flat=True)) == ["big"]
    # A put of a version the checkpoint does not name keeps it in a version row, and a later
    # checkpoint that names it finds it there even though its parent does not carry it.
    _put(
        workspace,
        "cp-3",
        "cp-2",
        {"a": "2", "b": "1", "big": "1"},
        values=[ValueIn("c", "7", "json", b"7")],
    )
    four = _put(workspace, "cp-4", "cp-3", {"c": "7", "b": "1"})
    assert _values(four) == {"c": ("json", b"7"), "b": ("null", b"")}
    # A checkpoint naming a version only an older, non-parent checkpoint carries finds it.
    five = _put(workspace, "cp-5", "cp-4", {"a": "1"})
    assert _values(five) == {"a": ("json", b"1")}
    # The first bytes stored for a version stand.
    six = _put(workspace, "cp-6", "cp-5", {"a": "1"}, values=[ValueIn("a", "1", "json", b"9")])
    assert _values(six) == {"a": ("json", b"1")}


def _write(workspace: Any, checkpoint_id: str, task_id: str, *writes: WriteIn) -> None:
    langgraph_writes_put(
        workspace=workspace,
        external_id="pack-1",
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        task_id=task_id,
        task_path=f"~path {task_id}",
        writes=list(writes),
        actor_label="api key test",
    )


def _pending(workspace: Any, checkpoint_id: str) -> list[tuple[str, int, str, bytes]]:
    thread = Thread.objects.get(workspace=workspace, external_id="pack-1")
    row = langgraph_checkpoint_get(thread=thread, checkpoint_ns="", checkpoint_id=checkpoint_id)
    assert row is not None
    return [(w.task_id, w.idx, w.channel, w.data) for w in langgraph_tuple(row).writes]


@pytest.mark.django_db(transaction=True)
def test_writes_before_and_after_their_checkpoint_read_back_in_order() -> None:
    workspace, _ = factories.make_workspace("acme")
    _put(workspace, "cp-0", "", {})
    # Written before its checkpoint is stored: a row for the task.
    _write(workspace, "cp-1", "t-b", WriteIn(0, "x", "json", b"b0"))
    _put(workspace, "cp-1", "cp-0", {})
    assert LanggraphWrite.objects.count() == 1
    # The same task's later writes join its row; another task's go into the checkpoint's row.
    _write(workspace, "cp-1", "t-b", WriteIn(0, "x", "json", b"again"), WriteIn(1, "y", "j", b"b1"))
    _write(workspace, "cp-1", "t-a", WriteIn(1, "y", "json", b"a1"), WriteIn(0, "x", "json", b"a0"))
    _write(workspace, "cp-1", "t-a", WriteIn(0, "x", "json", b"ignored"))
    _write(workspace, "cp-1", "t-a", WriteIn(-1, "__error__", "json", b"e1"))
    _write(workspace, "cp-1", "t-a", WriteIn(-1, "__error__", "json", b"e2"))  # replaces
    assert LanggraphWrite.objects.count() == 1
    (carried,) = LanggraphCheckpoint.objects.get(checkpoint_id="cp-1").task_writes
    assert carried.task_id == "t-a"
    assert _pending(workspace, "cp-1") == [
        ("t-a", -1, "__error__", b"e2"),
        ("t-a", 0, "x", b"a0"),
        ("t-a", 1, "y", b"a1"),
        ("t-b", 0, "x", b"b0"),
        ("t-b", 1, "y", b"b1"),
    ]
    assert _pending(workspace, "cp-0") == []
