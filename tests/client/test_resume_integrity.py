"""The Agents SDK session and the plain client after someone edits an event in the database
(docs/clients.md, "Tampered history"): once an integrity check has found the break, the
client's working context says where, and `CtxadminSession.get_items` refuses it with
`ChainBrokenError`, so the Runner's next turn asks the model nothing and runs no tool, unless
the session allows it explicitly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import agents
import pytest
from agents import Agent, Runner, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from ctxadmin_client import AsyncClient, ChainBrokenError, Client
from ctxadmin_client.agents import CtxadminSession
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from tests import factories
from tests.client.conftest import Server
from threads.models import Event, EventKind, Thread
from threads.services.integrity import integrity_check

ASKED = "Refund order 42 ($120)."
EDITED = "Refund order 42 ($12,000) and order 43."

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class World:
    def __init__(self) -> None:
        self.refunds: list[dict[str, Any]] = []
        self.model = ScriptedModel()
        self.integrity: dict[str, Any] | None = None  # the verdict the last session read


class ScriptedModel(Model):
    """A user message gets a call of `refund`; the tool's output gets a short reply. Every
    input is recorded."""

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = (
            [{"role": "user", "content": input}]
            if isinstance(input, str)
            else [dict(i) for i in input]
        )
        self.inputs.append(items)
        n = len(self.inputs)
        output: Any
        if items[-1].get("type") == "function_call_output":
            output = ResponseOutputMessage(
                id=f"msg_{n}",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text="Done.", annotations=[])],
            )
        else:
            output = ResponseFunctionToolCall(
                id=f"fc_{n}",
                type="function_call",
                call_id=f"call_{n}",
                name="refund",
                arguments=json.dumps({"order": 42, "amount": 120}),
                status="completed",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the script answers whole responses only")


def _agent(world: World) -> Agent[Any]:
    @function_tool
    def refund(order: int, amount: int) -> str:
        """Refund an order (money moves)."""
        world.refunds.append({"order": order, "amount": amount})
        return f"refunded ${amount} on order {order}"

    return Agent(
        name="refunds", instructions="Refund what is asked.", model=world.model, tools=[refund]
    )


def _turn(server: Server, world: World, session_id: str, text: str, **session_kw: Any) -> Any:
    """One Runner turn over a fresh session of the thread (as a restarted agent would)."""

    async def run() -> Any:
        async with AsyncClient(server.url, server.api_key) as client:
            session = CtxadminSession(session_id, client, **session_kw)
            try:
                return await Runner.run(_agent(world), text, session=session)
            finally:
                world.integrity = session.integrity

    return asyncio.run(run())


def _tamper_request(session_id: str) -> int:
    """Someone with database access rewrites what the user asked; the sweep finds it."""
    thread = Thread.objects.get(external_id=session_id)
    asked = Event.objects.get(thread=thread, kind=EventKind.MESSAGE, data__content=ASKED)
    factories.tamper(asked, content=EDITED)
    verdict = integrity_check(thread=thread, full=True)
    assert not verdict.ok and verdict.first_bad_seq == asked.seq
    return asked.seq


@pytest.fixture
def refunded(server: Server) -> World:
    """One turn: the agent refunded order 42 once."""
    agents.set_tracing_disabled(True)
    world = World()
    result = _turn(server, world, "session-refund", ASKED)
    assert result.final_output == "Done."
    assert world.refunds == [{"order": 42, "amount": 120}] and len(world.model.inputs) == 2
    assert world.integrity is not None and world.integrity["reaches_break"] is False
    return world


def test_the_session_refuses_a_broken_chain_and_the_runner_does_nothing(
    server: Server, refunded: World
) -> None:
    bad_seq = _tamper_request("session-refund")
    with pytest.raises(ChainBrokenError) as refused:
        _turn(server, refunded, "session-refund", "And order 43?")
    assert refused.value.first_bad_seq == bad_seq
    # The model was asked nothing and no tool ran on the edited history.
    assert len(refunded.model.inputs) == 2
    assert refunded.refunds == [{"order": 42, "amount": 120}]
    # The session kept the verdict it refused.
    integrity = refunded.integrity
    assert integrity is not None
    assert integrity["chain_ok"] is False and integrity["first_bad_seq"] == bad_seq
    assert integrity["reaches_break"] is True

    # Popping an item would hand back (and retract) an edited one: refused, nothing appended.
    async def pop() -> Any:
        async with AsyncClient(server.url, server.api_key) as client:
            return await CtxadminSession("session-refund", client).pop_item()

    with pytest.raises(ChainBrokenError):
        asyncio.run(pop())
    assert not Event.objects.filter(
        thread__external_id="session-refund", kind=EventKind.RETRACTION
    ).exists()


def test_the_session_resumes_from_a_broken_chain_when_told_to(
    server: Server, refunded: World
) -> None:
    _tamper_request("session-refund")
    result = _turn(server, refunded, "session-refund", "And order 43?", allow_broken_chain=True)
    assert result.final_output == "Done."
    # The caller chose to go on: the model read the edited history.
    assert EDITED in [item.get("content") for item in refunded.model.inputs[2]]


def test_the_plain_clients_context_carries_the_verdict(server: Server, refunded: World) -> None:
    with Client(server.url, server.api_key) as client:
        thread = client.get_thread("session-refund")
        before = thread.context()["integrity"]
        assert before["chain_ok"] is True and before["reaches_break"] is False
        bad_seq = _tamper_request("session-refund")
        context = thread.context()
    integrity = context["integrity"]
    assert integrity["chain_ok"] is False
    assert integrity["first_bad_seq"] == bad_seq
    assert integrity["verified_until"] == bad_seq - 1
    assert integrity["verified_at"] is not None
    assert integrity["reaches_break"] is True
    # Still served, flagged: people repair the thread from it.
    assert EDITED in [event.get("content") for event in context["events"]]
