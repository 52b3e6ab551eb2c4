"""Prose held to the ledger (docs/pipeline.md, "Verify"): what a clause claims, and whether the
ledger lets it. Honest sentences about a timed-out refund pass; every way of saying it happened, or
that it did not, is refused — whatever words the liar picks."""

from __future__ import annotations

import pytest

from tests.domain.eventlog import Log
from threads.domain.verify_claims import claim_problems
from threads.domain.verify_ledger import Ledger, build_ledger


def ledger() -> Ledger:
    """A lookup that succeeded, a refund that timed out (unknown), an email that was sent, a
    fee that failed, and an approval still pending."""
    log = Log()
    log.user("Refund order 10086: $120")
    log.call("c1", "get_order")
    log.result("c1", "succeeded", result={"total": 120})
    log.call("r1", "refund", side_effect=True, key="refund-10086", arguments={"amount": 100})
    log.result("r1", "timeout")
    log.call("e1", "send_email", side_effect=True)
    log.result("e1", "succeeded")
    log.call("p1", "charge_fee", side_effect=True)
    log.result("p1", "failed", result="card declined")
    log.approval("refund the rest by hand")
    return build_ledger(None, log.events)


HONEST = [
    "A refund was attempted and timed out; its outcome is unknown.",
    "The order was looked up (total $120). The refund request timed out.",
    "The refund's outcome is not known yet; an operator must check the gateway.",
    "The user asked for a refund of $120. The agent called the refund tool, which timed out.",
    "The email to the customer was sent successfully, but the refund's outcome is unknown.",
    "The fee charge (p1) failed: the card was declined.",
    "A manual refund awaits approval.",
    "The customer may have been refunded; nobody knows yet.",
]

LIES = [
    "Refund complete.",
    "All done, the customer has been reimbursed.",
    "The refund is no longer pending; it went through.",
    "Money was returned to the customer.",
    "The customer got their $100 back.",
    "Refund of $100 processed.",
    "The customer was not refunded.",
    "The email failed to send.",
    "The refund did not fail.",
    "The refund r1 happened as planned.",
    "The user said that the customer was paid.",
    "The fee was charged successfully.",
    "p1 succeeded.",
    "The manual refund was approved.",
    "A reviewer signed off on the manual refund.",
    "The refund was rejected by the approver.",
]


@pytest.mark.parametrize("text", HONEST)
def test_honest_prose_passes(text: str) -> None:
    assert claim_problems(text, ledger(), "narrative") == []


@pytest.mark.parametrize("text", LIES)
def test_a_stated_outcome_the_ledger_denies_is_refused(text: str) -> None:
    problems = claim_problems(text, ledger(), "narrative")
    assert problems and all(p.startswith("narrative states") for p in problems)


def test_a_tool_name_speaks_of_every_call_of_that_tool() -> None:
    log = Log()
    log.call("r1", "refund", side_effect=True)
    log.result("r1", "succeeded")
    log.call("r2", "refund", side_effect=True)
    log.result("r2", "timeout")
    siblings = build_ledger(None, log.events)
    assert claim_problems("Refund r1 succeeded; r2 timed out.", siblings, "n") == []
    [problem] = claim_problems("The refund succeeded.", siblings, "n")
    assert "refund#r2" in problem and "refund#r1" not in problem
    [moved] = claim_problems("r2 succeeded.", siblings, "n")
    assert "refund#r2" in moved


def test_a_resolution_decides_what_prose_may_say() -> None:
    log = Log()
    call = log.call("r1", "refund", side_effect=True)
    log.result("r1", "timeout")
    log.resolve(call["seq"], "succeeded", "the gateway shows the refund")
    resolved = build_ledger(None, log.events)
    assert claim_problems("The customer was refunded.", resolved, "n") == []
    assert claim_problems("The refund failed.", resolved, "n")


def test_a_failure_naming_nothing_needs_a_failed_side_effect() -> None:
    log = Log()
    log.call("r1", "refund", side_effect=True)
    log.result("r1", "timeout")
    unknown = build_ledger(None, log.events)
    assert claim_problems("Nothing went through.", unknown, "n")
    assert claim_problems("It all failed.", unknown, "n")
    assert claim_problems("The refund timed out, so nobody knows yet.", unknown, "n") == []
