"""Tool definitions, repeated content and the fixed input of the budget (docs/pipeline.md,
"Tool definitions and repeated content"). No database."""

from __future__ import annotations

from typing import Any

import pytest

from threads.domain.budget import thread_budget
from threads.domain.errors import InvalidTools, PayloadTooLarge
from threads.domain.repeats import content_hash, find_repeats
from threads.domain.tools import tool_definitions, tool_name


@pytest.mark.parametrize(
    ("definition", "name"),
    [
        ({"type": "function", "function": {"name": "get_order", "parameters": {}}}, "get_order"),
        ({"type": "function", "name": "search", "parameters": {}}, "search"),
        ({"name": "refund", "input_schema": {}}, "refund"),
    ],
)
def test_a_name_in_each_providers_shape(definition: dict[str, Any], name: str) -> None:
    assert tool_name(definition) == name


@pytest.mark.parametrize(
    "definition",
    [
        [],
        "refund",
        {"type": "function"},
        {"type": "function", "function": {"description": "no name"}},
        {"type": "function", "function": "refund"},
        {"name": ""},
        {"name": 7},
        {"name": "x" * 201},
    ],
)
def test_no_recognisable_name(definition: Any) -> None:
    with pytest.raises(ValueError):
        tool_name(definition)


def test_definitions_keep_order_and_hash_canonically() -> None:
    tools = [{"name": "b", "input_schema": {}}, {"input_schema": {}, "name": "a"}]
    stored = tool_definitions(tools, encoding="cl100k_base", max_bytes=1000)
    assert [(d.position, d.name) for d in stored] == [(0, "b"), (1, "a")]
    again = tool_definitions(
        [{"input_schema": {}, "name": "b"}, tools[1]], encoding="cl100k_base", max_bytes=1000
    )
    assert [d.content_hash for d in again] == [d.content_hash for d in stored]
    assert all(d.token_count > 0 for d in stored)


def test_every_bad_index_is_named() -> None:
    with pytest.raises(InvalidTools) as caught:
        tool_definitions(
            [{"name": "a"}, {"name": "a"}, 3, {"name": "b"}],
            encoding="cl100k_base",
            max_bytes=1000,
        )
    assert set(caught.value.fields) == {"tools[1]", "tools[2]"}
    with pytest.raises(PayloadTooLarge) as too_big:
        tool_definitions([{"name": "a", "d": "x" * 50}], encoding="cl100k_base", max_bytes=40)
    assert "tools[0]" in too_big.value.fields


SETTINGS = {
    "context_window": 10000,
    "fixed_tokens": 0,
    "reserved_output": 1000,
    "reasoning_reserve": 0,
    "safety_margin": 100,
}


def test_fixed_input_is_the_tools_unless_fixed_tokens_is_given() -> None:
    assert thread_budget(SETTINGS).fixed == 0
    assert thread_budget({**SETTINGS, "tool_tokens": 700}).fixed == 700
    assert thread_budget({**SETTINGS, "tool_tokens": 700}).available == 10000 - 700 - 1100
    assert thread_budget({**SETTINGS, "fixed_tokens": 50, "tool_tokens": 700}).fixed == 50
    with_tools = {**SETTINGS, "tool_tokens": 700}
    assert thread_budget(with_tools, {"fixed_tokens": 10}).fixed == 10
    assert thread_budget(with_tools, {"fixed_tokens": 0}).fixed == 0
    assert thread_budget(with_tools, {"fixed_tokens": None}).fixed == 700


def _event(seq: int, kind: str, tokens: int = 10, **data: Any) -> tuple[int, str, Any, int]:
    return seq, kind, data, tokens


def test_repeats_name_the_first_occurrence_and_sort_by_waste() -> None:
    events = [
        _event(1, "message", role="user", content="look up order 7"),
        _event(2, "tool_call", tool_name="lookup", tool_call_id="a", arguments={"o": 7}),
        _event(3, "tool_result", 50, tool_call_id="a", status="succeeded", result={"total": 1}),
        _event(4, "message", role="user", content="look up order 7"),
        # The same arguments to another tool are another call.
        _event(5, "tool_call", tool_name="refund", tool_call_id="b", arguments={"o": 7}),
        _event(6, "tool_call", tool_name="lookup", tool_call_id="c", arguments={"o": 7}),
        _event(7, "tool_result", 60, tool_call_id="c", status="succeeded", result={"total": 1}),
        _event(8, "tool_result", 60, tool_call_id="c", status="failed", result={"total": 1}),
        # Empty content never counts.
        _event(9, "message", role="assistant", content=""),
        _event(10, "message", role="assistant", content=""),
        _event(11, "tool_result", tool_call_id="d", status="succeeded"),
        _event(12, "tool_result", tool_call_id="e", status="succeeded"),
        _event(13, "annotation", type="fact", authority="user", payload={"k": 1}),
        _event(14, "annotation", type="fact", authority="user", payload={"k": 1}),
    ]
    repeats = find_repeats(events)
    assert [(r.seq, r.first_seq, r.tokens) for r in repeats] == [
        (7, 3, 60),
        (8, 3, 60),
        (4, 1, 10),
        (6, 2, 10),
    ]


def test_content_is_compared_in_canonical_form() -> None:
    a = content_hash("tool_result", {"result": {"a": 1, "b": [1, 2]}})
    assert a == content_hash("tool_result", {"result": {"b": [1, 2], "a": 1}})
    assert a != content_hash("tool_result", {"result": {"b": [2, 1], "a": 1}})
    # Byte for byte across kinds: a message repeating a result's text repeats it.
    assert content_hash("message", {"content": "done"}) == content_hash(
        "tool_result", {"result": "done"}
    )
