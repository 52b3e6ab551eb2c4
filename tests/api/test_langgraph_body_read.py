"""The LangGraph put's and write's fast body readers
(integrations/langgraph_checkpointer/api/bodies.py) against the
views' serializers: whatever a reader accepts, the serializer accepts with the same validated
data; what it is unsure of, it leaves to the serializer. No database."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from integrations.langgraph_checkpointer.api.bodies import (
    ENTRY_KEYS,
    INTERRUPT_KEYS,
    MESSAGES_KEYS,
    PUT_KEYS,
    VALUE_KEYS,
    WRITE_KEYS,
    WRITES_KEYS,
    put_body_read,
    writes_body_read,
)
from integrations.langgraph_checkpointer.api.views import (
    ThreadLanggraphCheckpointsApi,
    ThreadLanggraphWritesApi,
)

DIGEST = "a" * 64
B64 = base64.b64encode(b"\x00\x01 bytes").decode()
MESSAGE = {"type": "ai", "data": {"content": "héllo", "id": "m2", "tool_calls": []}}

PUT: dict[str, Any] = {
    "checkpoint_ns": "",
    "checkpoint_id": "1f0c-0001",
    "parent_checkpoint_id": "1f0c-0000",
    "checkpoint": {"v": 4, "id": "1f0c-0001", "channel_versions": {"messages": "00.1"}},
    "metadata": {"source": "loop", "step": 3, "run_id": "r-1"},
    "values": [{"channel": "branch:to:tools", "version": "00.1", "type": "null", "data": ""}],
    "messages": {
        "channel": "messages",
        "version": "00.2",
        "entries": [
            {"id": "m1", "digest": DIGEST},
            {"id": "m2", "digest": "b" * 64, "message": MESSAGE},
        ],
        "side_effect_tools": ["send_mail"],
        "base_version": "00.1",
        "base_count": 4,
    },
}

WRITES: dict[str, Any] = {
    "checkpoint_ns": "",
    "checkpoint_id": "1f0c-0001",
    "task_id": "task-1",
    "task_path": "~__pregel_pull, agent",
    "writes": [
        {
            "idx": 0,
            "channel": "messages",
            "messages": [{"id": "m3", "digest": DIGEST, "message": MESSAGE}],
        },
        {"idx": 1, "channel": "branch:to:tools", "type": "null", "data": B64},
        {"idx": -3, "channel": "__interrupt__", "type": "msgpack", "data": B64},
    ],
    "interrupts": [{"id": "i-1", "value": {"question": "go?"}}],
    "side_effect_tools": [],
}


def _plain(value: Any) -> Any:
    """Validated data as plain dicts and lists (DRF gives OrderedDicts and ReturnLists)."""
    return json.loads(json.dumps(value, default=lambda b: ["bytes", base64.b64encode(b).decode()]))


def _variants(body: dict[str, Any], paths: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The body with, at each path, each of a set of awkward values (or the key removed)."""
    awkward: list[Any] = [
        None,
        "",
        " padded ",
        "tab\tinside",
        "naïve",
        "\x00",
        "\ud800",
        0,
        True,
        1.0,
        "7",
        -1,
        2**31,
        [],
        {},
        "x" * 300,
        "not base64!",
        "A" * 64,
        "0" * 63,
    ]
    out = []
    for path in paths:
        for value in [*awkward, KeyError]:
            varied = copy.deepcopy(body)
            target = varied
            for key in path[:-1]:
                target = target[key]
            if value is KeyError:
                if isinstance(target, dict):
                    target.pop(path[-1], None)
                else:
                    continue
            else:
                target[path[-1]] = value
            out.append(varied)
    return out


PUT_PATHS: list[tuple[Any, ...]] = [
    ("checkpoint_ns",),
    ("checkpoint_id",),
    ("parent_checkpoint_id",),
    ("checkpoint",),
    ("metadata",),
    ("values",),
    ("values", 0, "channel"),
    ("values", 0, "version"),
    ("values", 0, "type"),
    ("values", 0, "data"),
    ("messages",),
    ("messages", "channel"),
    ("messages", "entries"),
    ("messages", "entries", 0, "id"),
    ("messages", "entries", 0, "digest"),
    ("messages", "entries", 1, "message"),
    ("messages", "side_effect_tools"),
    ("messages", "side_effect_tools", 0),
    ("messages", "base_version"),
    ("messages", "base_count"),
    # keys no serializer declares, at each level
    ("colour",),
    ("values", 0, "colour"),
    ("messages", "colour"),
    ("messages", "entries", 0, "colour"),
]
WRITE_PATHS: list[tuple[Any, ...]] = [
    ("checkpoint_ns",),
    ("checkpoint_id",),
    ("task_id",),
    ("task_path",),
    ("writes",),
    ("writes", 0, "idx"),
    ("writes", 0, "channel"),
    ("writes", 0, "messages"),
    ("writes", 0, "messages", 0, "message"),
    ("writes", 0, "type"),
    ("writes", 1, "idx"),
    ("writes", 1, "type"),
    ("writes", 1, "data"),
    ("writes", 1, "messages"),
    ("interrupts",),
    ("interrupts", 0, "id"),
    ("interrupts", 0, "value"),
    ("side_effect_tools",),
    ("colour",),
    ("writes", 0, "colour"),
    ("writes", 1, "colour"),
    ("writes", 0, "messages", 0, "colour"),
    ("interrupts", 0, "colour"),
]


def _agree(read: Any, serializer_class: Any, body: Any) -> bool:
    """The reader's answer agrees with the serializer's; True when the reader took it."""
    fast = read(body)
    serializer = serializer_class(data=body)
    valid = serializer.is_valid()
    if fast is None:
        return False
    assert valid, (body, serializer.errors)
    assert _plain(fast) == _plain(serializer.validated_data), body
    return True


def test_the_saver_s_bodies_are_read_fast_and_as_the_serializers_read_them() -> None:
    assert _agree(put_body_read, ThreadLanggraphCheckpointsApi.InputSerializer, PUT)
    assert _agree(writes_body_read, ThreadLanggraphWritesApi.InputSerializer, WRITES)
    bare_put = {"checkpoint_id": "c", "checkpoint": {}}
    assert _agree(put_body_read, ThreadLanggraphCheckpointsApi.InputSerializer, bare_put)
    bare_write = {"checkpoint_id": "c", "task_id": "t", "writes": []}
    assert _agree(writes_body_read, ThreadLanggraphWritesApi.InputSerializer, bare_write)


@pytest.mark.parametrize("body", _variants(PUT, PUT_PATHS))
def test_a_put_body_the_reader_accepts_the_serializer_accepts_alike(body: Any) -> None:
    _agree(put_body_read, ThreadLanggraphCheckpointsApi.InputSerializer, body)


@pytest.mark.parametrize("body", _variants(WRITES, WRITE_PATHS))
def test_a_writes_body_the_reader_accepts_the_serializer_accepts_alike(body: Any) -> None:
    _agree(writes_body_read, ThreadLanggraphWritesApi.InputSerializer, body)


def test_what_the_serializer_refuses_the_reader_leaves_to_it() -> None:
    """Every variant the serializer answers 400 for goes to the serializer."""
    refused = 0
    for read, serializer_class, bodies in (
        (put_body_read, ThreadLanggraphCheckpointsApi.InputSerializer, _variants(PUT, PUT_PATHS)),
        (
            writes_body_read,
            ThreadLanggraphWritesApi.InputSerializer,
            _variants(WRITES, WRITE_PATHS),
        ),
    ):
        for body in bodies:
            if not serializer_class(data=body).is_valid():
                refused += 1
                assert read(body) is None, body
    assert refused > 100  # the variants do exercise the rules


def test_an_unknown_key_at_any_level_is_refused_and_left_to_the_serializer() -> None:
    for read, serializer_class, body, path in (
        (put_body_read, ThreadLanggraphCheckpointsApi.InputSerializer, PUT, ("values", 0)),
        (put_body_read, ThreadLanggraphCheckpointsApi.InputSerializer, PUT, ("messages",)),
        (writes_body_read, ThreadLanggraphWritesApi.InputSerializer, WRITES, ("writes", 1)),
        (writes_body_read, ThreadLanggraphWritesApi.InputSerializer, WRITES, ()),
    ):
        varied = copy.deepcopy(body)
        target: Any = varied
        for key in path:
            target = target[key]
        target["colour"] = "red"
        assert read(varied) is None
        serializer = serializer_class(data=varied)
        assert not serializer.is_valid()
        assert "unknown field" in json.dumps(serializer.errors)


def test_the_readers_key_sets_are_the_serializers_fields() -> None:
    put: Any = ThreadLanggraphCheckpointsApi.InputSerializer()
    writes: Any = ThreadLanggraphWritesApi.InputSerializer()
    pairs = [
        (PUT_KEYS, put),
        (VALUE_KEYS, put.fields["values"].child),
        (MESSAGES_KEYS, put.fields["messages"]),
        (ENTRY_KEYS, put.fields["messages"].fields["entries"].child),
        (WRITES_KEYS, writes),
        (WRITE_KEYS, writes.fields["writes"].child),
        (INTERRUPT_KEYS, writes.fields["interrupts"].child),
    ]
    for keys, serializer in pairs:
        assert keys == set(serializer.fields), type(serializer).__name__
