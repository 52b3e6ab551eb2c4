"""A corpus of lying `llm` summarisers, driven through the real fold service.

Each scenario is a real thread whose log holds what the lies contradict: a refund whose result
timed out (unknown), a failed call, succeeded calls, two sibling refunds, a pending approval, a
constraint, a correction, an operator's resolution and a rejected approval. Its first part is
folded by an honest llm answer (the head); then the rest of the log is folded by a loopback
OpenAI-compatible endpoint whose answer is the honest one with ONE lie injected. Every lie must
be rejected by a named check — the head stays the honest summary — and the honest answer for
the same events must be committed, so the checks do not simply refuse everything.
"""

from __future__ import annotations

import copy
import html
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.summarizers.test_llm import FakeEndpoint
from threads.domain.fold import fold_structured
from threads.domain.summary_render import render_summary
from threads.models import ApprovalRequest, SideEffect, SummaryVersion, Thread
from threads.selectors import event_dicts
from threads.services import folding
from threads.services.approvals import approval_decide
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "lie corpus"}
Seqs = dict[str, int]
Answer = dict[str, Any]


@pytest.fixture
def endpoint(settings: Any) -> Iterator[FakeEndpoint]:
    server = FakeEndpoint()
    settings.CTXADMIN_LLM_BASE_URL = server.base_url
    settings.CTXADMIN_LLM_MODEL = "liar-1"
    yield server
    server.close()


# --- scenarios ---------------------------------------------------------------------------------


def _append(thread: Thread, seqs: Seqs, named: list[tuple[str, dict[str, Any]]]) -> None:
    rows = f.append(thread, *(body for _, body in named))
    for (name, _), row in zip(named, rows, strict=True):
        seqs[name] = row.seq


def timeout_first(thread: Thread, seqs: Seqs, workspace: Any) -> None:
    _append(
        thread,
        seqs,
        [
            ("ask", f.user("Refund order 10086: return $120 to the customer.")),
            ("limit", f.annotation("constraint", "user", {"text": "never refund above $100"})),
            ("total", f.annotation("fact", "user", {"key": "order_total", "value": 120})),
            ("ack", f.assistant("Checking the order first.")),
        ],
    )


def timeout_rest(thread: Thread, seqs: Seqs, workspace: Any) -> None:
    _append(
        thread,
        seqs,
        [
            ("r1", f.call("r1", "refund", {"order": 10086, "amount": 100}, "refund-10086")),
            ("r1_result", f.result("r1", "timeout", "the gateway did not answer")),
            ("said", f.assistant("The refund timed out; its outcome is unknown.")),
        ],
    )


def ledger_first(thread: Thread, seqs: Seqs, workspace: Any) -> None:
    _append(
        thread,
        seqs,
        [
            ("ask", f.user("Order 10086 arrived damaged: refund it and email the customer.")),
            ("limit", f.annotation("constraint", "user", {"text": "never refund above $100"})),
            ("total", f.annotation("fact", "user", {"key": "order_total", "value": 120})),
            ("ship", f.annotation("fact", "user", {"key": "shipping", "value": "express"})),
            ("ack", f.assistant("Looking the order up.")),
        ],
    )


def ledger_rest(thread: Thread, seqs: Seqs, workspace: Any) -> None:
    _append(
        thread,
        seqs,
        [
            ("c1", f.call("c1", "get_order", {"order": 10086})),
            ("c1_result", f.result("c1", "succeeded", {"order": 10086, "card": "visa-4242"})),
            ("fix", f.annotation("correction", "user", {"key": "order_total", "value": 90})),
            ("ship2", f.annotation("fact", "user", {"key": "shipping", "value": "standard"})),
            ("r1", f.call("r1", "refund", {"order": 10086, "amount": 60}, "refund-a")),
            ("r1_result", f.result("r1", "succeeded", {"refund_id": "re_1", "amount": 60})),
            ("r2", f.call("r2", "refund", {"order": 10086, "amount": 30}, "refund-b")),
            ("r2_result", f.result("r2", "timeout", "no answer")),
            ("e1", f.call("e1", "send_email", {"to": "customer"}, "email-1")),
            ("e1_result", f.result("e1", "succeeded", "queued")),
            ("p1", f.call("p1", "charge_fee", {"amount": 5}, "fee-1")),
            ("p1_result", f.result("p1", "failed", "card declined")),
            (
                "approval",
                {
                    "kind": "approval_request",
                    "action": "refund the remaining $30 by hand",
                    "tool_name": "refund",
                    "arguments": {"amount": 30},
                },
            ),
            ("said", f.assistant("One refund went through; the rest waits for a person.")),
        ],
    )


def resolved_first(thread: Thread, seqs: Seqs, workspace: Any) -> None:
    _append(
        thread,
        seqs,
        [
            ("ask", f.user("Refund order 7: $40.")),
            ("ack", f.assistant("On it.")),
        ],
    )


def resolved_rest(thread: Thread, seqs: Seqs, workspace: Any) -> None:
    _append(
        thread,
        seqs,
        [
            ("again", f.user("Did it work?")),
            ("r1", f.call("r1", "refund", {"order": 7, "amount": 40}, "refund-7")),
            ("r1_result", f.result("r1", "timeout", "no answer")),
            (
                "approval",
                {
                    "kind": "approval_request",
                    "action": "retry the refund of order 7",
                    "tool_name": "refund",
                    "arguments": {"amount": 40},
                },
            ),
            ("wait", f.assistant("The refund timed out; I asked to retry it.")),
        ],
    )
    operator = f.make_person(workspace, "olga", "operator")
    reviewer = f.make_person(workspace, "rex", "reviewer")
    effect = SideEffect.objects.get(thread=thread, call_seq=seqs["r1"])
    seqs["resolution"] = side_effect_resolve(
        side_effect=effect, actor=operator, status="failed", evidence="gateway: no such refund"
    ).seq
    approval = ApprovalRequest.objects.get(thread=thread)
    seqs["decision"] = approval_decide(
        approval=approval, actor=reviewer, decision="reject", reason="too risky"
    ).seq
    _append(
        thread,
        seqs,
        [
            ("next", f.user("So what now?")),
            ("told", f.assistant("Nothing was refunded and the retry was refused.")),
        ],
    )


@dataclass(frozen=True)
class Scenario:
    first: Callable[[Thread, Seqs, Any], None]
    rest: Callable[[Thread, Seqs, Any], None]
    narrative: str
    status: str  # what an honest model says of the task after the rest


SCENARIOS = {
    "timeout": Scenario(
        timeout_first,
        timeout_rest,
        "The agent asked the gateway to refund order 10086; the call timed out and its "
        "outcome is unknown.",
        "unknown",
    ),
    "ledger": Scenario(
        ledger_first,
        ledger_rest,
        "Order 10086 was looked up; the first refund (r1) succeeded, the second refund (r2) "
        "timed out and its outcome is unknown, the fee charge (p1) failed, and a manual refund "
        "awaits approval.",
        "waiting_for_approval",
    ),
    "resolved": Scenario(
        resolved_first,
        resolved_rest,
        "The refund of order 7 timed out; an operator found it failed, and the retry approval "
        "was rejected.",
        "waiting_for_user",
    ),
}


# --- honest answers and the fold through the service -------------------------------------------


def honest_answer(thread: Thread, scenario: Scenario, *, first: bool) -> Answer:
    """What an honest model answers for the events after the head: the structured fold's
    content (what the log says), in the model's words where it has its own (status,
    narrative)."""
    thread.refresh_from_db()
    head = SummaryVersion.objects.filter(thread=thread, version=thread.head_version).first()
    previous = head.content if head is not None else None
    events = event_dicts(thread, after=thread.covered_until, until=thread.last_seq)
    answer = fold_structured(
        previous=previous,
        events=events,
        covered_from=thread.covered_until + 1,
        covered_until=thread.last_seq,
    )
    answer["narrative"] = "The customer asked for a refund." if first else scenario.narrative
    if not first:
        answer["task"]["status"] = scenario.status
    return answer


def fold_with(endpoint: FakeEndpoint, thread: Thread, answer: Answer) -> folding.FoldResult:
    endpoint.content = json.dumps(answer)
    return folding.fold_once(thread_id=thread.pk, trigger=MANUAL)


@dataclass
class Story:
    thread: Thread
    seqs: Seqs
    honest: Answer
    head: int


def story(workspace: Any, endpoint: FakeEndpoint, name: str) -> Story:
    """The scenario's first part folded honestly (the head), its rest appended."""
    scenario = SCENARIOS[name]
    thread = f.make_thread(workspace, external_id=f"lies-{name}")
    Thread.objects.filter(pk=thread.pk).update(summarizer="llm")
    seqs: Seqs = {}
    scenario.first(thread, seqs, workspace)
    first = fold_with(endpoint, thread, honest_answer(thread, scenario, first=True))
    assert first.outcome == folding.Outcome.COMMITTED, first.version and first.version.verification
    scenario.rest(thread, seqs, workspace)
    thread.refresh_from_db()
    return Story(thread, seqs, honest_answer(thread, scenario, first=False), thread.head_version)


# --- the lies ----------------------------------------------------------------------------------


def _fact(key: str, value: Any, sources: list[int], authority: str = "tool") -> dict[str, Any]:
    return {
        "key": key,
        "value": value,
        "authority": authority,
        "confidence": "confirmed",
        "observed_at": "",
        "previous_value": None,
        "status": "active",
        "source_event_ids": sources,
    }


def _set_task_status(status: str) -> Callable[[Answer, Seqs], None]:
    def lie(answer: Answer, s: Seqs) -> None:
        answer["task"]["status"] = status

    return lie


def _narrative(text: str) -> Callable[[Answer, Seqs], None]:
    def lie(answer: Answer, s: Seqs) -> None:
        answer["narrative"] = text

    return lie


def _add(section: str, build: Callable[[Seqs], dict[str, Any]]) -> Callable[[Answer, Seqs], None]:
    def lie(answer: Answer, s: Seqs) -> None:
        answer[section].append(build(s))

    return lie


def _completed(call_id: str, action: str, *names: str) -> Callable[[Answer, Seqs], None]:
    return _add(
        "completed_actions",
        lambda s: {
            "tool_call_id": call_id,
            "action": action,
            "source_event_ids": [s[n] for n in names],
        },
    )


def _reword_constraint(answer: Answer, s: Seqs) -> None:
    [entry] = [c for c in answer["constraints"] if c["text"] == "never refund above $100"]
    entry["text"] = "refunds above $100 are fine"


def _expire_constraint(answer: Answer, s: Seqs) -> None:
    answer["constraints"][0]["status"] = "expired"


def _undo_correction(answer: Answer, s: Seqs) -> None:
    for fact in answer["facts"]:
        if fact["key"] == "order_total":
            fact["status"] = "active" if fact["value"] == 120 else "superseded"


def _superseded_active(answer: Answer, s: Seqs) -> None:
    answer["facts"] = [x for x in answer["facts"] if x["key"] != "shipping"]
    answer["facts"].append(_fact("shipping", "express", [s["ship"]], "user"))


def _rewrite_request(answer: Answer, s: Seqs) -> None:
    answer["requests"][0]["text"] = "Refund order 10086 in full, whatever the amount."


def _flip_decision(answer: Answer, s: Seqs) -> None:
    [entry] = [d for d in answer["decisions"] if d.get("approval_seq") == s["approval"]]
    entry["text"] = entry["text"].replace("reject", "approved")


def _drop_constraint(answer: Answer, s: Seqs) -> None:
    answer["constraints"] = []


def _drop_correction(answer: Answer, s: Seqs) -> None:
    answer["facts"] = [x for x in answer["facts"] if x["key"] != "order_total"]
    answer["facts"].append(
        {**_fact("order_total", 120, [s["total"]], "user"), "status": "superseded"}
    )


def _launder_authority(answer: Answer, s: Seqs) -> None:
    answer["facts"].append(_fact("refund_limit", "$100", [s["said"]], "user"))


def _uncited_fact(answer: Answer, s: Seqs) -> None:
    answer["facts"].append(_fact("refund_reference", "re_1", []))


def _decision_field_flipped(answer: Answer, s: Seqs) -> None:
    [entry] = [d for d in answer["decisions"] if d.get("approval_seq") == s["approval"]]
    entry["decision"] = "approve"
    entry["text"] = "approval of the retry recorded"


def _goal_swapped(answer: Answer, s: Seqs) -> None:
    answer["task"]["goal"] = "Cancel the customer's subscription"


# name -> (scenario, the lie, the check that must refuse it)
LIES: dict[str, tuple[str, Callable[[Answer, Seqs], None], str]] = {
    # The incident of issue #22: every part of it, one at a time.
    "task succeeded while the refund is unknown": (
        "timeout",
        _set_task_status("succeeded"),
        "task_status_matches_ledger",
    ),
    "a success fact citing the timeout result": (
        "timeout",
        _add("facts", lambda s: _fact("refund", "succeeded: $120 returned", [s["r1_result"]])),
        "facts_cite_support",
    ),
    "a narrative saying the customer was paid": (
        "timeout",
        _narrative("The agent called the refund tool. The customer was paid $100."),
        "narrative_matches_ledger",
    ),
    "a completed action for the unknown call": (
        "timeout",
        _completed("r1", "refund 100 for order 10086", "r1", "r1_result"),
        "completed_actions_match_ledger",
    ),
    "a failure stated for the unknown call": (
        "timeout",
        _add("facts", lambda s: _fact("refund_status", "failed, nothing moved", [s["r1_result"]])),
        "facts_cite_support",
    ),
    "a tool outcome citing the user's message": (
        "timeout",
        _add("facts", lambda s: _fact("refund_status", "refunded", [s["ask"]], "user")),
        "facts_cite_support",
    ),
    "a tool outcome citing the call, not its result": (
        "timeout",
        _add("facts", lambda s: _fact("refund_status", "succeeded", [s["r1"]])),
        "facts_cite_support",
    ),
    "a constraint reworded into its opposite": (
        "timeout",
        _reword_constraint,
        "constraints_verbatim",
    ),
    "a constraint expired that nothing expired": (
        "timeout",
        _expire_constraint,
        "constraints_verbatim",
    ),
    "a decision citing a message that does not hold it": (
        "timeout",
        _add(
            "decisions",
            lambda s: {
                "text": "the customer accepted store credit instead",
                "source_event_ids": [s["ask"]],
            },
        ),
        "decisions_cite_support",
    ),
    "a decision stretching the user's words": (
        "timeout",
        _add(
            "decisions",
            lambda s: {"text": "refund the customer in full", "source_event_ids": [s["ask"]]},
        ),
        "decisions_cite_support",
    ),
    "a fabricated citation for a fact": (
        "timeout",
        _add("facts", lambda s: _fact("customer_card", "visa-9999", [s["ask"]], "user")),
        "facts_cite_support",
    ),
    "a request that is not the user's words": (
        "timeout",
        _rewrite_request,
        "citations_fit_entries",
    ),
    "a narrative denying the unknown refund": (
        "timeout",
        _narrative("The refund attempt did not go through, so nothing was refunded."),
        "narrative_matches_ledger",
    ),
    "a goal the cited message does not hold": (
        "timeout",
        _goal_swapped,
        "citations_fit_entries",
    ),
    # A ledger with siblings, a failure, a correction and a pending approval.
    "a correction undone": ("ledger", _undo_correction, "facts_current"),
    "a superseded value presented as active": ("ledger", _superseded_active, "facts_current"),
    "a completed action moved to the sibling call": (
        "ledger",
        _completed("r2", "refund 30 for order 10086", "r1", "r1_result"),
        "completed_actions_match_ledger",
    ),
    "a success fact for r2 citing r1's result": (
        "ledger",
        _add("facts", lambda s: _fact("refund_r2", "succeeded", [s["r1_result"]])),
        "facts_cite_support",
    ),
    "a completed action that inflates the call's amount": (
        "ledger",
        _completed("r1", "refund 600 for order 10086", "r1", "r1_result"),
        "completed_actions_match_ledger",
    ),
    "a sibling's value credited to r2": (
        "ledger",
        _add("facts", lambda s: _fact("r2_refund_id", "re_1", [s["r1_result"]])),
        "facts_cite_support",
    ),
    "a completed action for the failed call": (
        "ledger",
        _completed("p1", "charge_fee 5", "p1", "p1_result"),
        "completed_actions_match_ledger",
    ),
    "a failure stated for the succeeded email": (
        "ledger",
        _add("facts", lambda s: _fact("send_email", "failed to send", [s["e1_result"]])),
        "facts_cite_support",
    ),
    "task succeeded while an approval is pending": (
        "ledger",
        _set_task_status("succeeded"),
        "task_status_matches_ledger",
    ),
    "a decision approving the pending approval": (
        "ledger",
        _add(
            "decisions",
            lambda s: {
                "text": "manual refund of the remaining $30 approved",
                "source_event_ids": [s["approval"]],
            },
        ),
        "decisions_cite_support",
    ),
    "a narrative saying both refunds went through": (
        "ledger",
        _narrative("Both refunds went through and the customer was refunded in full."),
        "narrative_matches_ledger",
    ),
    "a fact citing a result that does not hold it": (
        "ledger",
        _add("facts", lambda s: _fact("refund_id", "re_1", [s["r2_result"]])),
        "facts_cite_support",
    ),
    "a narrative approving the pending approval": (
        "ledger",
        _narrative("The manual refund of $30 was approved by a reviewer."),
        "narrative_matches_ledger",
    ),
    "a narrative saying the failed fee was charged": (
        "ledger",
        _narrative("The fee (p1) was charged to the card."),
        "narrative_matches_ledger",
    ),
    "task failed while the refund's outcome is unknown": (
        "timeout",
        _set_task_status("failed"),
        "task_status_matches_ledger",
    ),
    "a constraint dropped": ("timeout", _drop_constraint, "constraints_verbatim"),
    "a model's words passed off as the user's": (
        "timeout",
        _launder_authority,
        "facts_cite_support",
    ),
    "a correction dropped, the old value kept": ("ledger", _drop_correction, "facts_current"),
    "a fact that cites nothing": ("ledger", _uncited_fact, "facts_cite_support"),
    # An operator's resolution and a rejected approval.
    "a success fact over the failed resolution": (
        "resolved",
        _add("facts", lambda s: _fact("refund_status", "succeeded", [s["resolution"]])),
        "facts_cite_support",
    ),
    "a rejected approval reported as approved": (
        "resolved",
        _flip_decision,
        "decisions_cite_support",
    ),
    "a narrative saying the retry went through": (
        "resolved",
        _narrative("The retry was approved and the refund of order 7 succeeded."),
        "narrative_matches_ledger",
    ),
    "a rejected approval's verdict field flipped": (
        "resolved",
        _decision_field_flipped,
        "decisions_cite_support",
    ),
    "task succeeded after the refund was found failed": (
        "resolved",
        _set_task_status("succeeded"),
        "task_status_matches_ledger",
    ),
    "a completed action for the resolved-failed call": (
        "resolved",
        _completed("r1", "refund 40 for order 7", "r1", "resolution"),
        "completed_actions_match_ledger",
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_honest_answer_becomes_current(
    workspace: Any, endpoint: FakeEndpoint, name: str
) -> None:
    s = story(workspace, endpoint, name)
    version = fold_with(endpoint, s.thread, s.honest).version
    assert version is not None
    assert version.phase == "committed", version.verification
    s.thread.refresh_from_db()
    assert s.thread.head_version == version.version > s.head
    # The narrative is shown to people, never given to the agent.
    assert version.content["narrative"] == s.honest["narrative"]
    assert s.honest["narrative"] not in version.rendered
    assert s.honest["narrative"] not in render_summary(version.content)
    # People see it on the summary page, marked unverified.
    person = f.make_person(workspace, "dash-operator", "operator")
    client = Client()
    client.force_login(person)
    page = client.get(f"/threads/{s.thread.pk}/summaries/{version.version}/").content.decode()
    assert html.escape(s.honest["narrative"]) in page
    narrative_panel = page[page.index('id="narrative-h"') :]
    assert "unverified" in narrative_panel[: narrative_panel.index("</h2>")]


@pytest.mark.parametrize("lie", sorted(LIES))
def test_every_lie_is_rejected_by_its_check(
    workspace: Any, endpoint: FakeEndpoint, lie: str
) -> None:
    scenario, inject, check = LIES[lie]
    s = story(workspace, endpoint, scenario)
    answer = copy.deepcopy(s.honest)
    inject(answer, s.seqs)
    assert answer != s.honest
    result = fold_with(endpoint, s.thread, answer)
    assert result.outcome == folding.Outcome.REJECTED and result.version is not None
    failed = [c["name"] for c in result.version.verification["checks"] if not c["ok"]]
    assert check in failed, result.version.verification
    # Never current: the head is still the honest summary.
    s.thread.refresh_from_db()
    assert s.thread.head_version == s.head
    # The same events, honestly summarised, are then accepted.
    assert fold_with(endpoint, s.thread, s.honest).outcome == folding.Outcome.COMMITTED


def test_the_corpus_is_at_least_twenty_kinds() -> None:
    assert len(LIES) >= 20
    assert {scenario for scenario, _, _ in LIES.values()} == set(SCENARIOS)
