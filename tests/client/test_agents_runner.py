"""The Agents SDK's real Runner over CtxadminSession and a live server: 40 turns, each calling a
real function tool whose ~300-token answers outgrow a 4,000-token window many times over. The
working context stays within the budget after every turn, and so does every model input; folds
happen; a popped item is gone from the next model input and kept in the log and on the timeline;
a cleared session starts empty; the chain verifies."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import agents
import httpx
import pytest
from agents import Agent, Runner, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.memory import OpenAIResponsesCompactionArgs
from agents.models.interface import Model
from agents.usage import Usage
from ctxadmin_client import AsyncClient
from ctxadmin_client.agents import CtxadminSession, item_to_event
from django.db import connection
from django.test import Client as BrowserClient
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ctxadmin.celery import app as celery_app
from tests import factories
from tests.client.conftest import Server
from threads.domain.render import render_event
from threads.domain.tokens import MESSAGE_OVERHEAD_TOKENS, count_text

TURNS = 40
BUDGET: dict[str, Any] = {
    "context_window": 4000,
    "reserved_output": 300,
    "reasoning_reserve": 0,
    "safety_margin": 100,
    # The instructions, the tool definition and the current turn (a user message, a call and
    # its ~300-token result) ride on top of the history the session gives back.
    "fixed_tokens": 900,
}
# What a model request may hold: the window less what is kept for the answer.
MODEL_LIMIT = (
    BUDGET["context_window"]
    - BUDGET["reserved_output"]
    - BUDGET["reasoning_reserve"]
    - BUDGET["safety_margin"]
)
INSTRUCTIONS = "You answer questions about stock items; look each one up first."
WORDS = (
    "pallet crate bearing sprocket gasket flange valve rotor spindle bushing coupling piston "
    "manifold bracket hinge latch seal washer rivet sleeve collar nozzle damper filter relay "
    "amber cobalt slate ivory crimson olive teal umber north south east west dock bay aisle "
    "shelf bin zone lot batch serial revision audited recounted reserved shipped returned "
    "backordered inspected"
).split()

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def items_of(session: CtxadminSession, limit: int | None = None) -> list[dict[str, Any]]:
    """get_items as plain dicts (the SDK types an item as a union of some 30 TypedDicts)."""
    return [dict(item) for item in await session.get_items(limit)]


async def popped(session: CtxadminSession) -> dict[str, Any] | None:
    item = await session.pop_item()
    return None if item is None else dict(item)


def as_items(items: list[dict[str, Any]]) -> list[TResponseInputItem]:
    return cast(list[TResponseInputItem], items)


@function_tool
def lookup(item: str) -> str:
    """Look a stock item up: its record, several lines of it."""
    rng = random.Random(item)
    lines = []
    for n in range(12):
        words = " ".join(rng.choice(WORDS) for _ in range(14))
        lines.append(f"{item} line {n}: {words}; qty {rng.randint(1, 9999)}.")
    return "\n".join(lines)


def model_tokens(items: list[Any]) -> int:
    """Tokens of a model input as ctxadmin counts an event (docs/api.md,
    "Working context — `GET /api/v1/threads/{id}/context/`"), plus the instructions: the measure the
    working context's budget is kept in."""
    total = count_text(INSTRUCTIONS) + MESSAGE_OVERHEAD_TOKENS
    for item in items:
        total += count_text(render_event(item_to_event(item))) + MESSAGE_OVERHEAD_TOKENS
    return total


class ScriptedModel(Model):
    """Answers from a script, recording every input: a user message gets a call of `lookup`,
    the tool's output gets a short reply."""

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []
        self.calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items: list[dict[str, Any]] = (
            [{"role": "user", "content": input}]
            if isinstance(input, str)
            else [dict(i) for i in input]
        )
        self.inputs.append(copy.deepcopy(items))
        self.calls += 1
        last = items[-1]
        n = self.calls
        if last.get("type") == "function_call_output":
            output: Any = ResponseOutputMessage(
                id=f"msg_{n}",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        type="output_text",
                        text=f"Checked {last['call_id']}: the record is in place.",
                        annotations=[],
                    )
                ],
            )
        else:
            text = str(last.get("content"))
            output = ResponseFunctionToolCall(
                id=f"fc_{n}",
                type="function_call",
                call_id=f"call_{n}",
                name="lookup",
                arguments=json.dumps({"item": text.split(":")[0]}),
                status="completed",
            )
        # A response id makes the Runner call run_compaction after each settled turn.
        return ModelResponse(output=[output], usage=Usage(), response_id=f"resp_{n}")

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the script answers whole responses only")


class RecordingSession(CtxadminSession):
    """Records what the Runner passes to run_compaction."""

    compactions: list[OpenAIResponsesCompactionArgs | None]

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        self.compactions.append(args)
        await super().run_compaction(args)


def timeline(server: Server, path: str) -> str:
    """The thread's timeline page as an operator sees it (Django's ORM is sync-only)."""
    person = BrowserClient()
    person.force_login(factories.make_person(server.workspace, "olga", "operator"))
    page = person.get(path)
    assert page.status_code == 200
    return page.content.decode()


async def api(server: Server, method: str, path: str) -> Any:
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}
    ) as http:
        response = await http.request(method, path)
        response.raise_for_status()
        return response.json()


@pytest.fixture
def folds() -> Iterator[str]:
    """Where folds run: on the PostgreSQL run of ./scripts/test, on its real Celery worker
    (they finish while the agent goes on); elsewhere in the server's own process."""
    if connection.vendor != "postgresql" or os.environ.get("CTXADMIN_TEST_WORKER") != "1":
        yield "eager" if celery_app.conf.task_always_eager else "the broker"
        return
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield "the worker"
    celery_app.conf.task_always_eager = before


@pytest.mark.asyncio
async def test_forty_turns_with_tools_stay_within_a_4000_token_budget(
    server: Server, folds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agents.set_tracing_disabled(True)
    model = ScriptedModel()
    agent = Agent(name="stock", instructions=INSTRUCTIONS, model=model, tools=[lookup])
    async with AsyncClient(server.url, server.api_key) as client:
        session = RecordingSession("agents-runner", client, **BUDGET)
        session.compactions = []
        max_context = max_input = forced = 0
        for turn in range(1, TURNS + 1):
            seen = len(model.inputs)
            result = await Runner.run(agent, f"item-{turn}: where is it?", session=session)
            assert "record is in place" in result.final_output
            # Each turn: the call, then the reply, each seeing the session's history.
            assert len(model.inputs) == seen + 2
            for sent in model.inputs[seen:]:
                max_input = max(max_input, model_tokens(sent))
            await items_of(session)
            context = session.last_context
            assert context is not None
            budget = context["budget"]
            assert budget["used"] <= budget["available"] == 2700
            max_context = max(max_context, budget["used"])
            if context["needs_fold"]:
                # A fold the appends queued may still be running (a worker, not this process):
                # wait for it, so the next turn starts from the fresh summary.
                await session.run_compaction()
                forced += 1

        assert max_input <= MODEL_LIMIT
        versions = await api(server, "GET", "/api/v1/threads/agents-runner/summaries/")
        committed = [v for v in versions if v["phase"] == "committed"]
        assert len(committed) >= 3, "the budget forced folds"
        # The Runner asked after every settled reply, never forcing (None: this test's own).
        by_runner = [a for a in session.compactions if a is not None]
        assert len(by_runner) == TURNS and all(a["force"] is False for a in by_runner)
        thread = await client.get_thread(session.session_id)
        total = (await thread.refresh())["token_total"]
        assert total > 4 * BUDGET["context_window"], "the log outgrew the window many times"

        # Let the folds settle (a worker may still be running one), then one more turn: its
        # items follow the summary, with no fold in flight to move them.
        await session.run_compaction()
        await session.run_compaction()
        await Runner.run(agent, "item-41: where is it?", session=session)
        items = await items_of(session)
        assert items[0]["role"] == "developer"  # the summary leads
        summary_tokens = count_text(items[0]["content"])
        unit = ["message", "function_call", "function_call_output", "message"]
        assert [i.get("type", "message") for i in items[1:]] == unit

        # pop_item: the turn's reply leaves the working context; then its tool output, and the
        # call with it (the context never holds half a call).
        reply = await popped(session)
        assert reply is not None and reply.get("id") == f"msg_{model.calls}"
        output = await popped(session)
        assert output is not None and output["type"] == "function_call_output"
        assert await items_of(session) == items[:2]
        await Runner.run(agent, "item-42: where is it?", session=session)
        next_input = model.inputs[-2]
        assert next_input[-1] == {"role": "user", "content": "item-42: where is it?"}
        assert all(i.get("id") != reply["id"] for i in next_input)
        assert all(i.get("call_id") != output["call_id"] for i in next_input)
        assert next_input[-2] == items[1]  # the turn's question stayed

        # ...and the log keeps both, each named by a retraction, on the timeline too.
        events = [e async for e in thread.events()]
        by_seq = {e["seq"]: e for e in events}
        retractions = [e for e in events if e["kind"] == "retraction"]
        originals = [by_seq[e["retracts"]] for e in retractions]
        assert [e["kind"] for e in originals] == ["message", "tool_result"]
        assert originals[0]["metadata"]["agents_item"]["extra"]["id"] == reply["id"]
        assert originals[1]["tool_call_id"] == output["call_id"]
        html = await asyncio.to_thread(timeline, server, f"/threads/{thread.id}/")
        assert reply["content"][0]["text"] in html and ">retraction<" in html
        for event in [*originals, *retractions]:
            assert f'id="seq-{event["seq"]}"' in html

        # clear_session: the next run starts from nothing but its own input.
        await session.clear_session()
        assert await items_of(session) == []
        await Runner.run(agent, "item-43: where is it?", session=session)
        assert model.inputs[-2] == [{"role": "user", "content": "item-43: where is it?"}]
        after_reset = await items_of(session)
        # A fold may already have covered the new turn (the capacity trigger counts the
        # withdrawn events too): what comes back holds nothing from before the reset.
        if after_reset and after_reset[0]["role"] == "developer":
            assert "item-42" not in after_reset.pop(0)["content"]
        assert (
            after_reset
            and [i.get("type", "message") for i in after_reset] == unit[-len(after_reset) :]
        )
        assert all(i.get("call_id") in (None, f"call_{model.calls - 1}") for i in after_reset)
        events = [e async for e in thread.events()]
        assert sum(e["kind"] == "reset" for e in events) == 1

        # The chain covers every event, markers included.
        task = await api(server, "POST", f"/api/v1/threads/{thread.id}/verify/")
        await client.wait_for_task(task["task_id"], timeout=60)
        integrity = await api(server, "GET", f"/api/v1/threads/{thread.id}/integrity/")
        assert integrity["chain_ok"] is True
        assert integrity["verified_until"] == events[-1]["seq"]

    with capsys.disabled():
        print(
            f"\nagents runner: {TURNS} turns, {len(events)} events, {total} tokens logged; "
            f"max working context {max_context}/{budget['available']}, max model input "
            f"{max_input}/{MODEL_LIMIT}; {len(committed)} folds committed "
            f"({forced} waited for after a turn, folds on {folds}); summary {summary_tokens} tokens"
        )
