"""The pieces every trace format builds its events from."""

from __future__ import annotations

from integrations.trace_imports.readers.common import Converted, tool_result


def test_an_output_opens_with_the_system_message_when_there_is_one() -> None:
    assert Converted.with_system(None).events == []
    assert Converted.with_system("  ").events == []
    assert Converted.with_system("Be brief.").events == [
        {"kind": "message", "role": "system", "content": "Be brief."}
    ]


def test_a_tool_result_keeps_only_what_the_provider_sent() -> None:
    assert tool_result("c1", None, "succeeded", name=None) == {
        "kind": "tool_result",
        "tool_call_id": "c1",
        "status": "succeeded",
    }
    assert tool_result("c1", "", "failed", name="lookup", legacy=False) == {
        "kind": "tool_result",
        "tool_call_id": "c1",
        "status": "failed",
        "result": "",
        "metadata": {"name": "lookup"},
    }
