"""Five real tau-bench conversations (GPT-4o airline, MIT): every result bound to its call,
repeated tool_call_ids included."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from integrations.trace_imports.readers import DEFAULT_SIDE_EFFECT_TOOLS, read_conversations
from integrations.trace_imports.services.conversations import conversations_import
from threads.models import Event, SideEffect, Workspace

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parent.parent / "data" / "tau-bench-gpt-4o-airline.json.gz"


def _expected_bindings(traj: list[dict[str, Any]]) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """From the source alone: seq of each call and the seq of the call each result answers
    (the latest open call with that id), numbering events the way the import emits them."""
    seq = 0
    open_calls: dict[str, list[int]] = {}
    calls: list[dict[str, Any]] = []
    bindings: dict[int, int] = {}
    for message in traj:
        if message["role"] == "tool":
            seq += 1
            bindings[seq] = open_calls[message["tool_call_id"]].pop()
            continue
        if message.get("content") or message["role"] != "assistant":
            seq += 1
        for call in message.get("tool_calls") or []:
            seq += 1
            open_calls.setdefault(call["id"], []).append(seq)
            calls.append(
                {
                    "seq": seq,
                    "name": call["function"]["name"],
                    "arguments": json.loads(call["function"]["arguments"]),
                }
            )
    return bindings, calls


def test_five_real_conversations(workspace: Workspace) -> None:
    conversations = read_conversations(str(DATA), "openai-chat")[:5]
    repeated = [
        c
        for c in conversations
        if max(
            Counter(t["id"] for m in c["traj"] for t in m.get("tool_calls") or []).values(),
            default=0,
        )
        > 1
    ]
    assert repeated, "the sample must contain a reused tool_call_id"

    results = conversations_import(
        workspace=workspace, conversations=conversations, fmt="openai-chat"
    )

    for conversation, result in zip(conversations, results, strict=True):
        assert result.skipped == []
        bindings, calls = _expected_bindings(conversation["traj"])
        rows = {e.seq: e for e in Event.objects.filter(thread=result.thread)}
        assert len(rows) == result.total == result.thread.last_seq
        got = {seq: e.data["call_seq"] for seq, e in rows.items() if e.kind == "tool_result"}
        assert got == bindings
        for call in calls:
            row = rows[call["seq"]]
            assert (row.kind, row.data["tool_name"], row.data["arguments"]) == (
                "tool_call",
                call["name"],
                call["arguments"],
            )
            assert row.data["side_effect"] is (call["name"] in DEFAULT_SIDE_EFFECT_TOOLS)
        assert all(e.token_count > 0 for e in rows.values())
    effects = SideEffect.objects.filter(thread__workspace=workspace)
    assert effects.exists()
    keys = list(effects.values_list("thread_id", "idempotency_key"))
    assert len(keys) == len(set(keys))  # reused call ids still get distinct keys
    assert all(e.result_seq is not None for e in effects)


def test_reimport_appends_nothing(workspace: Workspace) -> None:
    conversations = read_conversations(str(DATA), "openai-chat")[:2]
    conversations_import(workspace=workspace, conversations=conversations, fmt="openai-chat")
    count = Event.objects.count()
    again = conversations_import(
        workspace=workspace, conversations=conversations, fmt="openai-chat"
    )
    assert [r.created for r in again] == [0, 0] and Event.objects.count() == count
