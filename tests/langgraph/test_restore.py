"""A restore's fast path (PostgreSQL: the message forms read by one prepared statement and
orjson; every database: the answer written by orjson) answers what the plain path (the ORM's
read, DRF's JSONRenderer) answers, for a thread with messages, tool calls, tool results,
non-ASCII text, large integers and floats, pending writes of messages and several checkpoints."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from ctxadmin_client.langgraph import CtxadminSaver
from django.db import connection
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from rest_framework.renderers import JSONRenderer

import integrations.langgraph_checkpointer.selectors.checkpoints as selectors
import integrations.langgraph_checkpointer.selectors.statements as statements
from integrations.langgraph_checkpointer.api import views as api
from tests.langgraph.conftest import Server
from tests.langgraph.steps import put_steps

VIEWS = (
    api.ThreadLanggraphCheckpointApi,
    api.ThreadLanggraphCheckpointsApi,
    api.LanggraphCheckpointsApi,
)


def _thread(saver: CtxadminSaver, thread_id: str, metadata_extra: dict[str, Any]) -> None:
    messages: list[Any] = [HumanMessage("退款 order 7 — ünïcode \u2028 \U0001f600", id="h1")]
    steps: list[list[Any]] = [
        [],
        [
            AIMessage(
                "checking é",
                id="a1",
                tool_calls=[
                    {"name": "refund", "args": {"order": 2**70, "x": 0.1}, "id": "c1"},
                    {"name": "lookup", "args": {"q": "ß"}, "id": "c2"},
                ],
                response_metadata={"tokens": 12345678901234567890123, "p": 1e-7, "q": 2.5e20},
            )
        ],
        [
            # A string that JSON escapes (quotes, backslash, controls): answered as text.
            ToolMessage('refunded ✓ "q" \\ \n\t\x01 ' * 50, tool_call_id="c1", id="t1"),
            ToolMessage(
                [{"type": "text", "text": "n = 10**25"}, {"type": "json", "n": 10**25}],
                tool_call_id="c2",
                id="t2",
                status="error",
            ),
        ],
        [
            AIMessage(
                '["a string that reads as JSON", null]',  # a string still, never a list
                id="a2",
                usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            )
        ],
    ]

    def pending(stored: RunnableConfig, step: int) -> None:
        saver.put_writes(
            stored, [("messages", [AIMessage(f"pending {step} ü", id=f"p{step}")])], f"w-{step}"
        )

    put_steps(
        saver,
        thread_id,
        messages,
        steps,
        metadata_for=lambda step: metadata_extra,
        after_put=pending,
    )


def _answers(server: Server, thread_id: str) -> list[bytes]:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    base = f"{server.url}/api/v1/threads/{thread_id}/langgraph/checkpoints/"
    found = []
    for url, params in (
        (f"{base}latest/", {"checkpoint_ns": ""}),
        (base, {"limit": "10"}),
        (f"{server.url}/api/v1/langgraph/checkpoints/", {"limit": "10"}),
    ):
        answer = httpx.get(url, params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        found.append(answer.content)
    return found


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selectors, "postgres_for", lambda model: None)
    for view in VIEWS:
        monkeypatch.setattr(view, "renderer_classes", [JSONRenderer])


@pytest.mark.parametrize(
    "extra",
    [{"run_id": "r1"}, {"run_id": "r1", "big": 2**70, "f": 1e-7, "g": -0.0, "h": 1e300}],
    ids=["plain-numbers", "large-and-small-numbers"],
)
def test_the_fast_restore_answers_what_the_plain_one_does(
    server: Server, saver: CtxadminSaver, monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any]
) -> None:
    _thread(saver, "order-7", extra)
    fast_reads: list[int] = []
    read = statements.forms_at

    def counted(*args: Any) -> Any:
        fast_reads.append(1)
        return read(*args)

    monkeypatch.setattr(statements, "forms_at", counted)
    fast = _answers(server, "order-7")
    assert bool(fast_reads) == (connection.vendor == "postgresql")
    with monkeypatch.context() as plain:
        _plain(plain)
        slow = _answers(server, "order-7")
    for fast_body, slow_body in zip(fast, slow, strict=True):
        assert json.loads(fast_body) == json.loads(slow_body)
        if "f" not in extra:  # no float the standard library writes with an exponent
            assert fast_body == slow_body
    latest = json.loads(fast[0])
    assert [m["data"]["id"] for m in latest["messages"]["messages"]] == [
        "h1",
        "a1",
        "t1",
        "t2",
        "a2",
    ]
    assert latest["messages"]["messages"][1]["data"]["tool_calls"][0]["args"]["order"] == 2**70
    assert latest["messages"]["messages"][3]["data"]["content"][1]["n"] == 10**25
    assert any("messages" in write for write in latest["writes"])
    # The saver reads the fast answer back into the messages it put.
    restored = saver.get_tuple({"configurable": {"thread_id": "order-7", "checkpoint_ns": ""}})
    assert restored is not None
    assert restored.checkpoint["channel_values"]["messages"][1].tool_calls[0]["args"] == {
        "order": 2**70,
        "x": 0.1,
    }


def test_an_indented_answer_is_written_by_drf(server: Server, saver: CtxadminSaver) -> None:
    _thread(saver, "order-8", {})
    answer = httpx.get(
        f"{server.url}/api/v1/threads/order-8/langgraph/checkpoints/latest/",
        headers={
            "Authorization": f"Bearer {server.api_key}",
            "Accept": "application/json; indent=2",
        },
    )
    assert answer.status_code == 200
    assert answer.text.startswith('{\n  "thread_id": "order-8"')


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("by_id", [False, True], ids=["latest", "by_id"])
def test_a_restore_reads_its_checkpoint_off_the_index_without_sorting(by_id: bool) -> None:
    """The newest checkpoint (or the one named) comes off the end of `lg_checkpoint_unique`,
    never from a sort of every checkpoint of the thread, which grew with the thread: asked with
    sequential scans and sorts priced out, the plan has no Sort where the index gives the order."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plan (SQLite reads through the ORM)")
    from tests.views.test_thread_list_indexes import plan

    sql, _ = statements._find_sql(connection.alias, by_id)
    params: list[Any] = [1, "thread-1", ""] + (["1f0-checkpoint"] if by_id else [])
    found = plan(sql, "seqscan", "sort", params=params)
    assert "lg_checkpoint_unique" in found
    assert '"Node Type": "Sort"' not in found


@pytest.mark.postgres
def test_a_restore_of_a_thread_without_side_effects_asks_the_ledger_nothing(
    server: Server, saver: CtxadminSaver
) -> None:
    """The find statement counts the thread's side effects for the validator; with none, the
    ledger answers None without a query of its own (the ORM's find, on SQLite, counts none and
    the ledger looks)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's find statement (SQLite reads through the ORM)")
    from django.test.utils import CaptureQueriesContext

    from integrations.langgraph_checkpointer.selectors.ledger import langgraph_ledger
    from threads.models import SideEffect

    _thread(saver, "order-9", {})
    row = selectors.langgraph_checkpoint_find(
        workspace=server.workspace, external_id="order-9", checkpoint_ns="", checkpoint_id=None
    )
    assert row is not None
    found = selectors.langgraph_tuple(row)
    with CaptureQueriesContext(connection) as asked:
        assert langgraph_ledger(found) is None
    assert asked.captured_queries == []
    assert not SideEffect.objects.filter(thread=row.thread).exists()
