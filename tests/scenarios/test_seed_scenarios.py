"""The seed scenarios end to end: append as an agent, fold, verify, read the working context."""

from __future__ import annotations

from typing import Any

import pytest

from tests import factories as f
from tests.scenarios import seeds
from threads.models import Checkpoint, SideEffect, SummaryPhase, SummaryVersion, Thread
from threads.selectors import working_context
from threads.services import fold_preparation, folding
from threads.services.integrity import summary_checksum
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "scenario"}


def fold(thread: Thread, trigger: dict[str, Any] = MANUAL) -> SummaryVersion:
    version = folding.fold_run(thread_id=thread.pk, trigger=trigger)
    assert version is not None
    assert version.phase == SummaryPhase.COMMITTED, version.verification
    return version


def head(thread: Thread) -> SummaryVersion:
    thread.refresh_from_db()
    return SummaryVersion.objects.get(thread=thread, version=thread.head_version)


def test_order_change(thread: Thread) -> None:
    seqs = seeds.order_change(thread)
    version = fold(thread)
    content = version.content
    assert version.covered_until == seqs["last"]
    # The constraint, verbatim, with its source.
    [constraint] = seeds.entries(content, "constraints", text=seeds.ORDER_CONSTRAINT)
    assert constraint["status"] == "active" and constraint["source_event_ids"] == [
        seqs["constraint"]
    ]
    # Facts cite the tool results that established them; the update supersedes the read.
    [status] = seeds.entries(content, "facts", key="order.10086.status", status="active")
    assert status["value"] == "processing" and seqs["read_result"] in status["source_event_ids"]
    [address] = seeds.entries(content, "facts", key="order.10086.address", status="active")
    assert address["value"] == "5 Harbour St" and address["previous_value"] == "1 Old Rd"
    assert seqs["update_result"] in address["source_event_ids"]
    # The side effect: succeeded, cited, completed, with the tool's request id on record.
    [update] = seeds.entries(content, "tool_state", tool_call_id="c-upd")
    assert update["status"] == "succeeded" and update["side_effect"] is True
    assert update["idempotency_key"] == "order-10086-address-1"
    assert {seqs["update"], seqs["update_result"]} <= set(update["source_event_ids"])
    assert seeds.entries(content, "completed_actions", tool_call_id="c-upd")
    effect = SideEffect.objects.get(thread=thread, tool_call_id="c-upd")
    assert (effect.status, effect.request_id, effect.result_seq) == (
        "succeeded",
        "req-77",
        seqs["update_result"],
    )
    assert seeds.ORDER_CONSTRAINT in version.rendered
    # Nothing pending; the agent's context is the summary alone.
    assert Checkpoint.objects.get(summary_version=version).pending == []
    context = working_context(thread=thread, overrides={})
    assert context["summary"]["version"] == version.version and context["events"] == []


def test_refund_timeout_unknown_until_resolved(thread: Thread, workspace: Any) -> None:
    seqs = seeds.refund_timeout(thread)
    first = fold(thread, {"kind": "risk", "reason": "side effect timed out"})
    [refund] = seeds.entries(first.content, "tool_state", tool_call_id="r-1")
    assert refund["status"] == "unknown"  # a timeout is never "failed"
    [blocking] = seeds.entries(first.content, "pending", kind="side_effect")
    assert blocking["blocking"] is True and blocking["call_seq"] == seqs["call"]
    [open_effect] = Checkpoint.objects.get(summary_version=first).pending
    assert (open_effect["kind"], open_effect["status"]) == ("side_effect", "unknown")
    # An operator establishes the outcome from the provider's ledger.
    operator = f.make_person(workspace, "ops", "operator")
    effect = SideEffect.objects.get(thread=thread, tool_call_id="r-1")
    resolution = side_effect_resolve(
        side_effect=effect,
        actor=operator,
        status="succeeded",
        evidence="PSP ledger: refund RF-991 settled 42.00",
    )
    # Until the next fold the summary still says unknown, and the resolution is a raw event.
    context = working_context(thread=thread, overrides={})
    assert [e["seq"] for e in context["events"]] == [resolution.seq]
    second = fold(thread, {"kind": "structural", "reason": "side effect resolved"})
    assert (second.covered_from, second.covered_until) == (seqs["last"] + 1, resolution.seq)
    [refund] = seeds.entries(second.content, "tool_state", tool_call_id="r-1")
    assert refund["status"] == "succeeded" and resolution.seq in refund["source_event_ids"]
    assert not seeds.entries(second.content, "pending", kind="side_effect")
    assert Checkpoint.objects.get(summary_version=second).pending == []


def test_draft_only_constraint_survives_200_events_and_several_folds(thread: Thread) -> None:
    seqs = seeds.draft_only_email(thread)
    fold(thread)
    for batch in range(5):
        seeds.routine_units(thread, 10, start=batch * 10)  # 40 events a batch
        fold(thread)
    final = head(thread)
    assert final.covered_until == seqs["last"] + 200
    assert SummaryVersion.objects.filter(thread=thread, phase="committed").count() == 6
    [constraint] = seeds.entries(final.content, "constraints", text=seeds.DRAFT_CONSTRAINT)
    assert constraint["status"] == "active"
    assert constraint["source_event_ids"] == [seqs["constraint"]]
    assert seeds.DRAFT_CONSTRAINT in final.rendered
    assert (
        seeds.DRAFT_CONSTRAINT
        in working_context(thread=thread, overrides={})["summary"]["rendered"]
    )


def test_correction_supersedes_a_tool_confirmed_value(thread: Thread) -> None:
    seqs = seeds.correction_over_tool(thread)
    version = fold(thread)
    [active] = seeds.entries(version.content, "facts", key="customer.7.address", status="active")
    assert (active["value"], active["authority"], active["previous_value"]) == (
        "9 New St",
        "user",
        "1 Old Rd",
    )
    assert active["source_event_ids"] == [seqs["correction"]]
    [old] = seeds.entries(version.content, "facts", key="customer.7.address", status="superseded")
    assert old["value"] == "1 Old Rd" and seqs["tool_result"] in old["source_event_ids"]


def test_model_guess_does_not_override_a_confirmed_fact(thread: Thread) -> None:
    seqs = seeds.model_guess(thread)
    version = fold(thread)
    [active] = seeds.entries(version.content, "facts", key="account.3.balance", status="active")
    assert (active["value"], active["authority"], active["confidence"]) == (
        120,
        "tool",
        "confirmed",
    )
    questions = [
        q for q in version.content["open_questions"] if seqs["guess"] in q["source_event_ids"]
    ]
    assert len(questions) == 1 and questions[0]["value"] == 200


def test_a_candidate_where_the_guess_wins_is_rejected(thread: Thread) -> None:
    seqs = seeds.model_guess(thread)
    prepared = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert prepared is not None
    # A summariser that let the model's guess win (an llm backend could): same checksum
    # discipline, so only the content checks can catch it.
    content = prepared.content
    for fact in content["facts"]:
        if fact["key"] == "account.3.balance":
            fact.update(
                value=200,
                authority="model",
                confidence="inferred",
                source_event_ids=[seqs["guess"]],
            )
    prepared.content = content
    prepared.checksum = summary_checksum(prepared)
    SummaryVersion.objects.filter(pk=prepared.pk).update(
        content=content, checksum=prepared.checksum
    )
    assert folding.summary_decide(version=prepared) == folding.Outcome.REJECTED
    prepared.refresh_from_db()
    failed = [c["name"] for c in prepared.verification["checks"] if not c["ok"]]
    assert "no_model_override" in failed
    thread.refresh_from_db()
    assert thread.head_version == 0
    # The raw events stay in the working context.
    assert len(working_context(thread=thread, overrides={})["events"]) == 7
