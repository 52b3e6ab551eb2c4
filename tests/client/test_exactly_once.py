"""Exactly once through the Agents SDK session and the plain client (docs/clients.md,
"Exactly once: side effects and the ledger"): a counting `refund` tool, a live server, the SDK's
real Runner with a scripted model, through every repair (a run that died inside the tool and a
person's resolution, succeeded or failed; a timeout; a rollback before the call and after its
result) and every resume (no new input, a new user message). The counter equals the number of
distinct keys the agent meant to use; every later item is in the log; every model input passes the
Responses input shape."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import agents
import httpx
import pytest
from agents import Agent, Runner, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from ctxadmin_client import AsyncClient, Client, OutcomeUnknown, SideEffectPending
from ctxadmin_client.agents import CtxadminSession
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseInputParam,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import TypeAdapter

from ctxadmin.celery import app as celery_app
from tests import factories
from tests.client.conftest import Server
from threads.models import Checkpoint, SideEffect, Thread
from threads.services.rollback import checkpoint_rollback
from threads.services.side_effects import side_effect_resolve

# Appends start no fold, so that what the agent reads next is the events themselves (the
# rollback test folds on purpose; test_a_folded_resolution_still_holds folds after a resolution).
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.usefixtures("no_fold_triggers"),
]


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    """Folds run in the server's own process (as the SQLite run of ./scripts/test runs every
    task), so a test can wait for one."""
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


RESPONSES_INPUT = TypeAdapter(ResponseInputParam)


def assert_model_input(items: list[dict[str, Any]]) -> None:
    """The OpenAI Responses input shape, and the pairing rule: every function_call followed by
    its function_call_output (before the next call or message), no output without its call."""
    RESPONSES_INPUT.validate_python(items)
    waiting: set[str] = set()
    seen: set[str] = set()
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            waiting.add(item["call_id"])
            seen.add(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in seen, f"an output with no call: {item}"
            assert item["call_id"] in waiting, f"a second output: {item}"
            waiting.discard(item["call_id"])
        else:
            assert not waiting, f"calls without their result before {item}: {waiting}"
    assert not waiting, f"calls without their result: {waiting}"


class Refunds:
    """The world: refunds really made, by key. `fail` makes the next call raise after the
    money went out (the effect happened, the answer got lost)."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self.fail: BaseException | None = None

    def tool(self) -> Any:
        @function_tool
        async def refund(order: str, amount: int, idempotency_key: str) -> str:
            """Refund an order."""
            self.made.append(idempotency_key)
            if self.fail is not None:
                error, self.fail = self.fail, None
                raise error
            return f"refunded ${amount} on order {order} (ref {idempotency_key})"

        return refund


class Crash(BaseException):
    """The agent's process dying inside the tool."""


class RefundModel(Model):
    """A user message asking for a refund gets a call of `refund` with the key the test says
    the agent means (`key`); anything else gets a short reply quoting the last item."""

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []
        self.key = "refund-10086"

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
        self.inputs.append(copy.deepcopy(items))
        assert_model_input(items)
        n = len(self.inputs)
        last = items[-1]
        output: Any
        if last.get("role") == "user" and "refund" in str(last.get("content")).lower():
            output = ResponseFunctionToolCall(
                id=f"fc_{n}",
                type="function_call",
                call_id=f"call_{n}",
                name="refund",
                arguments=json.dumps(
                    {"order": "10086", "amount": 120, "idempotency_key": self.key}
                ),
                status="completed",
            )
        else:
            text = str(last.get("output", last.get("content")))[:200]
            output = ResponseOutputMessage(
                id=f"msg_{n}",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(type="output_text", text=f"Noted: {text}", annotations=[])
                ],
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    async def stream_response(  # type: ignore[override]
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The same answer, streamed as one `response.completed` event."""
        answer = await self.get_response(system_instructions, input, *args, **kwargs)
        response = Response(
            id=f"resp_{len(self.inputs)}",
            created_at=0,
            model="scripted",
            object="response",
            output=answer.output,
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )


class Setup:
    def __init__(self, server: Server, client: AsyncClient, name: str) -> None:
        agents.set_tracing_disabled(True)
        self.server = server
        self.refunds = Refunds()
        self.model = RefundModel()
        self.session = CtxadminSession(name, client, side_effect_tools=["refund"])
        tool = self.session.exactly_once(self.refunds.tool())
        self.agent = Agent(
            name="support", instructions="Refund when asked.", model=self.model, tools=[tool]
        )

    async def run(self, text: str | None) -> Any:
        return await Runner.run(self.agent, [] if text is None else text, session=self.session)

    async def items(self) -> list[dict[str, Any]]:
        items = [dict(i) for i in await self.session.get_items()]
        assert_model_input(items)
        return items

    async def events(self) -> list[dict[str, Any]]:
        thread = await self.session.thread()
        return [e async for e in thread.events()]  # type: ignore[union-attr]


def resolve(server: Server, external_id: str, status: str, evidence: str) -> None:
    """An operator resolves the thread's open side effect (Django's ORM is sync-only)."""
    person = factories.make_person(server.workspace, f"olga-{status}", "operator")
    effect = SideEffect.objects.get(
        thread__external_id=external_id, status__in=("running", "unknown")
    )
    side_effect_resolve(side_effect=effect, actor=person, status=status, evidence=evidence)


def rollback_to(server: Server, external_id: str, checkpoint_id: int) -> None:
    admin = factories.make_person(server.workspace, f"ada-{checkpoint_id}", "admin")
    thread = Thread.objects.get(external_id=external_id)
    checkpoint_rollback(
        thread=thread,
        checkpoint=Checkpoint.objects.get(pk=checkpoint_id),
        actor=admin,
        reason="the summary lost the refund",
    )


def latest_checkpoint(external_id: str) -> int:
    return Checkpoint.objects.filter(thread__external_id=external_id).order_by("-pk")[0].pk


@pytest.mark.asyncio
async def test_a_recorded_refund_is_answered_from_the_ledger_and_a_new_key_runs(
    server: Server,
) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, "once-plain")
        await s.run("Refund order 10086")
        assert s.refunds.made == ["refund-10086"]
        # The agent asks again (a new call id, the same key): the ledger answers.
        result = await s.run("Please refund order 10086")
        assert s.refunds.made == ["refund-10086"]
        assert "refunded $120" in result.final_output
        # Retry on purpose: a new key is a new effect.
        s.model.key = "refund-10086-second"
        await s.run("Refund order 10086 once more, on purpose")
        assert s.refunds.made == ["refund-10086", "refund-10086-second"]
        events = await s.events()
        calls = [e for e in events if e["kind"] == "tool_call"]
        assert [c["idempotency_key"] for c in calls] == [
            "refund-10086",
            "refund-10086",
            "refund-10086-second",
        ]
        assert all(c["side_effect"] for c in calls)
        results = [e for e in events if e["kind"] == "tool_result"]
        assert [r["status"] for r in results] == ["succeeded"] * 3
        # Every item of the last run is in the log: its user message, call, output, reply.
        assert events[-1]["kind"] == "message" and events[-1]["role"] == "assistant"
        await s.items()


@pytest.mark.asyncio
@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
@pytest.mark.parametrize("resume", ["no input", "new message"])
async def test_a_run_that_died_in_the_tool_is_held_until_a_person_resolves_it(
    server: Server, outcome: str, resume: str
) -> None:
    name = f"once-died-{outcome}-{resume.replace(' ', '-')}"
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, name)
        s.refunds.fail = Crash()
        with pytest.raises(Crash):
            await s.run("Refund order 10086")
        assert s.refunds.made == ["refund-10086"]
        # The call was stored before the tool ran: the ledger holds it, running.
        thread = await s.session.thread()
        record = await thread.side_effect("refund-10086")  # type: ignore[misc]
        assert record is not None and record["status"] == "running"
        # Resumed before anyone decided: held at the call, nothing runs, nothing reaches a
        # model.
        asked = len(s.model.inputs)
        for text in (None, "Refund order 10086"):
            with pytest.raises(SideEffectPending) as held:
                await s.run(text)
            assert (held.value.call_id, held.value.tool_name) == ("call_1", "refund")
            assert (held.value.idempotency_key, held.value.status) == ("refund-10086", "running")
        assert len(s.model.inputs) == asked and s.refunds.made == ["refund-10086"]

        await asyncio.to_thread(resolve, server, name, outcome, "bank ref 7781: $120 returned")
        # The resolution is the call's result in the items...
        items = await s.items()
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert len(outputs) == 1 and outputs[0]["call_id"] == "call_1"
        assert "bank ref 7781" in outputs[0]["output"] and outcome in outputs[0]["output"]
        # ...and the agent reads it on its next run, however it is resumed.
        result = await s.run(None if resume == "no input" else "Refund order 10086")
        seen = s.model.inputs[asked]
        assert any("bank ref 7781" in str(i.get("output", "")) for i in seen)
        assert s.refunds.made == ["refund-10086"]
        if resume == "new message":
            assert "bank ref 7781" in result.final_output  # the ledger's answer to the retry
        # Every item of the run is in the log, after the resolution.
        events = await s.events()
        kinds = [e["kind"] for e in events]
        assert kinds.index("side_effect_resolution") < len(kinds) - 1
        assert events[-1]["kind"] == "message" and events[-1]["role"] == "assistant"
        await s.items()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "error",
    [TimeoutError("no answer"), OutcomeUnknown("the bank did not say"), httpx.ReadTimeout("slow")],
    ids=["TimeoutError", "OutcomeUnknown", "httpx.ReadTimeout"],
)
async def test_a_timeout_is_unknown_and_the_call_waits_for_a_person(
    server: Server, error: Exception
) -> None:
    name = f"once-timeout-{type(error).__name__}"
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, name)
        s.refunds.fail = error
        await s.run("Refund order 10086")  # the SDK gives the model the tool's error text
        thread = await s.session.thread()
        record = await thread.side_effect("refund-10086")  # type: ignore[misc]
        assert record is not None and record["status"] == "unknown"
        assert record["result_event"]["status"] == "timeout"
        # The agent tries again with the same key: held, not run.
        with pytest.raises(SideEffectPending) as held:
            await s.run("Refund order 10086 again")
        assert held.value.status == "unknown"
        assert s.refunds.made == ["refund-10086"]
        await asyncio.to_thread(resolve, server, name, "succeeded", "bank ref 99: paid")
        # The resolution reaches the model; asked again, the ledger answers.
        result = await s.run("Refund order 10086 again")
        assert "bank ref 99" in result.final_output
        assert s.refunds.made == ["refund-10086"]
        await s.items()


@pytest.mark.asyncio
async def test_a_tool_that_knows_it_failed_is_failed(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, "once-failed")
        s.refunds.fail = ValueError("card expired: nothing was sent")
        await s.run("Refund order 10086")
        thread = await s.session.thread()
        record = await thread.side_effect("refund-10086")  # type: ignore[misc]
        assert record is not None and record["status"] == "failed"
        # Failed is an outcome: the same key is answered from the ledger, not run.
        await s.run("Refund order 10086")
        assert s.refunds.made == ["refund-10086"]


def fold_and_checkpoint(server: Server, external_id: str) -> int:
    """A fold of everything closed, then the checkpoint its commit made."""
    with Client(server.url, server.api_key) as client:
        thread = client.get_thread(external_id)
        task = thread.fold("test")
        assert client.wait_for_task(task["task_id"], 60)["state"] == "SUCCESS"
    return latest_checkpoint(external_id)


@pytest.mark.asyncio
@pytest.mark.parametrize("target", ["before the call", "after its result"])
@pytest.mark.parametrize("resume", ["no input", "new message"])
async def test_after_a_rollback_the_refund_is_not_made_again(
    server: Server, target: str, resume: str, eager_tasks: None
) -> None:
    name = f"once-rollback-{target.replace(' ', '-')}-{resume.replace(' ', '-')}"
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, name)
        await s.run("Hello, it is about order 10086")
        before = await asyncio.to_thread(fold_and_checkpoint, server, name)
        await s.run("Refund order 10086")
        after = await asyncio.to_thread(fold_and_checkpoint, server, name)
        assert before != after and s.refunds.made == ["refund-10086"]
        await asyncio.to_thread(
            rollback_to, server, name, before if target == "before the call" else after
        )
        items = await s.items()
        if target == "before the call":
            # The events after the checkpoint are delta again: the call and its result.
            assert [i["type"] for i in items if "call_id" in i] == [
                "function_call",
                "function_call_output",
            ]
        await s.run(None if resume == "no input" else "Refund order 10086")
        await s.run("Refund order 10086, did it go through?")
        assert s.refunds.made == ["refund-10086"]
        events = await s.events()
        assert events[-1]["kind"] == "message" and events[-1]["role"] == "assistant"
        await s.items()


def test_the_plain_client_runs_a_key_once(server: Server) -> None:
    made: list[str] = []

    def refund(key: str, fail: BaseException | None = None) -> Any:
        def run() -> dict[str, Any]:
            made.append(key)
            if fail is not None:
                raise fail
            return {"refunded": 120, "ref": key}

        return run

    with Client(server.url, server.api_key) as client:
        thread = client.thread("once-client")
        thread.append({"kind": "message", "role": "user", "content": "Refund order 10086"})
        args = {"order": "10086", "idempotency_key": "k1"}
        first = thread.run_once(
            tool_call_id="c1", tool_name="refund", arguments=args, run=refund("k1")
        )
        assert (first.status, first.executed, first.result["ref"]) == ("succeeded", True, "k1")
        again = thread.run_once(
            tool_call_id="c2", tool_name="refund", arguments=args, run=refund("k1")
        )
        assert (again.status, again.executed, again.result) == ("succeeded", False, first.result)
        assert made == ["k1"]

        # A timeout: unknown, held, then the resolution is the answer.
        args2 = {"order": "10087", "idempotency_key": "k2"}
        with pytest.raises(TimeoutError):
            thread.run_once(
                tool_call_id="c3",
                tool_name="refund",
                arguments=args2,
                run=refund("k2", TimeoutError()),
            )
        assert thread.side_effect("k2")["status"] == "unknown"  # type: ignore[index]
        with pytest.raises(SideEffectPending):
            thread.run_once(
                tool_call_id="c4", tool_name="refund", arguments=args2, run=refund("k2")
            )
        # A process stopped inside the tool: running, held.
        args3 = {"order": "10088", "idempotency_key": "k3"}
        with pytest.raises(Crash):
            thread.run_once(
                tool_call_id="c5", tool_name="refund", arguments=args3, run=refund("k3", Crash())
            )
        with pytest.raises(SideEffectPending) as held:
            thread.run_once(
                tool_call_id="c5", tool_name="refund", arguments=args3, run=refund("k3")
            )
        assert held.value.status == "running"
        assert made == ["k1", "k2", "k3"]
        person = factories.make_person(server.workspace, "olga", "operator")
        for key in ("k2", "k3"):
            effect = SideEffect.objects.get(thread__external_id="once-client", idempotency_key=key)
            side_effect_resolve(
                side_effect=effect, actor=person, status="succeeded", evidence=f"paid {key}"
            )
        third = thread.run_once(
            tool_call_id="c6", tool_name="refund", arguments=args3, run=refund("k3")
        )
        assert (third.status, third.executed) == ("succeeded", False)
        assert third.result["evidence"] == "paid k3"
        assert made == ["k1", "k2", "k3"]

        # The context: each call with one result, the resolutions standing for the missing one.
        context = thread.context()
        assert context["unanswered_calls"] == []
        calls = [e for e in context["events"] if e["kind"] == "tool_call"]
        results = [e for e in context["events"] if e["kind"] == "tool_result"]
        assert len(calls) == len(results) == 5
        crashed = next(r for r in results if r["tool_call_id"] == "c5")
        assert crashed.get("from_resolution") and crashed["result"]["evidence"] == "paid k3"


@pytest.mark.asyncio
async def test_a_folded_resolution_still_holds(server: Server, eager_tasks: None) -> None:
    """The call and its resolution folded into the summary: the agent asked again is answered
    from the ledger."""
    name = "once-died-folded"
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, name)
        s.refunds.fail = Crash()
        with pytest.raises(Crash):
            await s.run("Refund order 10086")
        await asyncio.to_thread(resolve, server, name, "succeeded", "bank ref 7781")
        await s.session.run_compaction()
        items = await s.items()
        assert items[0]["role"] == "developer"  # the summary leads
        assert all(i.get("call_id") != "call_1" for i in items)
        result = await s.run("Refund order 10086")
        assert "bank ref 7781" in result.final_output
        assert s.refunds.made == ["refund-10086"]
        await s.items()


@pytest.mark.asyncio
async def test_popping_a_resolved_call_takes_the_pair_out(server: Server) -> None:
    name = "once-died-popped"
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, name)
        s.refunds.fail = Crash()
        with pytest.raises(Crash):
            await s.run("Refund order 10086")
        await asyncio.to_thread(resolve, server, name, "succeeded", "bank ref 7781")
        popped = await s.session.pop_item()
        assert popped is not None and dict(popped)["type"] == "function_call_output"
        assert [i.get("role") for i in await s.items()] == ["user"]
        events = await s.events()
        assert events[-1]["kind"] == "retraction" and events[-1]["retracts"] == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_an_approved_refund_runs_once_and_a_rejected_one_never(
    server: Server, decision: str
) -> None:
    """The SDK's own approvals (`needs_approval`): the guarded tool waits for the decision;
    approved, it runs once, and asked again the ledger answers; rejected, it never runs."""
    name = f"once-approval-{decision}"
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, name)
        guarded = s.session.exactly_once(s.refunds.tool())
        guarded.needs_approval = True
        s.agent = Agent(name="support", model=s.model, tools=[guarded])
        first = await s.run("Refund order 10086")
        assert first.interruptions and s.refunds.made == []
        state = first.to_state()
        for item in first.interruptions:
            getattr(state, decision)(item)
        await Runner.run(s.agent, state, session=s.session)
        assert s.refunds.made == (["refund-10086"] if decision == "approve" else [])
        again = await s.run("Refund order 10086")
        if decision == "approve":
            state = again.to_state()
            for item in again.interruptions:
                state.approve(item)
            await Runner.run(s.agent, state, session=s.session)
        assert s.refunds.made == (["refund-10086"] if decision == "approve" else [])
        thread = await s.session.thread()
        record = await thread.side_effect("refund-10086")  # type: ignore[misc]
        assert record is not None
        # Rejected: the call is in the log with a cancelled result: nothing happened.
        assert record["status"] == ("succeeded" if decision == "approve" else "cancelled")
        events = await s.events()
        assert [e["kind"] for e in events].count("tool_call") >= 1
        assert events[-1]["kind"] == "message" or again.interruptions
        await s.items()


@pytest.mark.asyncio
async def test_the_async_plain_client_runs_a_key_once(server: Server) -> None:
    made: list[str] = []

    async def refund() -> str:
        made.append("k1")
        raise httpx.ReadTimeout("the bank took too long")

    async with AsyncClient(server.url, server.api_key) as client:
        thread = await client.thread("once-async-client")
        args = {"order": "10086", "idempotency_key": "k1"}
        with pytest.raises(httpx.ReadTimeout):
            await thread.run_once(tool_call_id="c1", tool_name="refund", arguments=args, run=refund)
        record = await thread.side_effect("k1")
        assert record is not None and record["status"] == "unknown"
        with pytest.raises(SideEffectPending):
            await thread.run_once(tool_call_id="c2", tool_name="refund", arguments=args, run=refund)
        assert made == ["k1"]
        context = await thread.context()
        assert [e["kind"] for e in context["events"]] == ["tool_call", "tool_result"]
        assert context["events"][1]["status"] == "timeout"


@pytest.mark.asyncio
async def test_a_streamed_run_is_guarded_too(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, "once-streamed")
        for text in ("Refund order 10086", "Please refund order 10086"):
            streamed = Runner.run_streamed(s.agent, text, session=s.session)
            async for _ in streamed.stream_events():
                pass
        assert s.refunds.made == ["refund-10086"]
        events = await s.events()
        assert [e["kind"] for e in events].count("tool_result") == 2
        await s.items()


@pytest.mark.asyncio
@pytest.mark.parametrize("resume", ["no input", "new message"])
async def test_a_rollback_to_the_checkpoint_taken_at_the_pending_call(
    server: Server, resume: str, eager_tasks: None
) -> None:
    """The checkpoint a fold made while the refund was pending (its run had died), then the
    person's resolution and a fold past it, then a rollback to that checkpoint: the agent
    reads the resolution as the call's result and the refund is not made again."""
    name = f"once-rollback-pending-{resume.replace(' ', '-')}"
    async with AsyncClient(server.url, server.api_key) as client:
        s = Setup(server, client, name)
        await s.run("Hello, it is about order 10086")
        s.refunds.fail = Crash()
        with pytest.raises(Crash):
            await s.run("Refund order 10086")
        pending = await asyncio.to_thread(fold_and_checkpoint, server, name)
        await asyncio.to_thread(resolve, server, name, "succeeded", "bank ref 7781")
        after = await asyncio.to_thread(fold_and_checkpoint, server, name)
        assert after != pending
        await asyncio.to_thread(rollback_to, server, name, pending)
        items = await s.items()
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert len(outputs) == 1 and "bank ref 7781" in outputs[0]["output"]
        await s.run(None if resume == "no input" else "Refund order 10086")
        await s.run("Refund order 10086, did it go through?")
        assert s.refunds.made == ["refund-10086"]
        await s.items()
