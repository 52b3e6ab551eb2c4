"""The seed scenarios (docs/pipeline.md, "Rolling fold, verification, atomic commit"): each builds a
thread through the services exactly as an agent would post it, and returns the seqs the tests check
against."""

from __future__ import annotations

from typing import Any

from tests import factories as f
from threads.models import Thread

ORDER_CONSTRAINT = "do not change the payment method"
DRAFT_CONSTRAINT = "draft only: never send the email to the supplier"


def order_change(thread: Thread) -> dict[str, int]:
    """The user changes an order's address; a read, a constraint, one side effect."""
    events = f.append(
        thread,
        f.user(
            "Please change the shipping address of order 10086 to 5 Harbour St. "
            "Do not touch the payment method."
        ),
        f.annotation("constraint", "user", {"text": ORDER_CONSTRAINT}),
        f.call("c-get", "get_order", {"order": "10086"}),
        f.result(
            "c-get",
            value={"status": "processing", "address": "1 Old Rd"},
            verified_facts=[
                {"key": "order.10086.status", "value": "processing"},
                {"key": "order.10086.address", "value": "1 Old Rd"},
            ],
        ),
        f.call(
            "c-upd",
            "update_order",
            {"order": "10086", "address": "5 Harbour St"},
            "order-10086-address-1",
        ),
        f.result(
            "c-upd",
            value={"ok": True},
            request_id="req-77",
            verified_facts=[{"key": "order.10086.address", "value": "5 Harbour St"}],
        ),
        f.assistant("Done: order 10086 now ships to 5 Harbour St."),
    )
    seqs = [e.seq for e in events]
    return {
        "constraint": seqs[1],
        "read": seqs[2],
        "read_result": seqs[3],
        "update": seqs[4],
        "update_result": seqs[5],
        "last": seqs[6],
    }


def refund_timeout(thread: Thread) -> dict[str, int]:
    """A refund call times out: its outcome is unknown until someone establishes it."""
    events = f.append(
        thread,
        f.user("Refund order 10086, please."),
        f.call("r-1", "refund", {"order": "10086", "amount": 42}, "refund-10086"),
        f.result("r-1", "timeout"),
        f.assistant(
            "The payment provider did not answer in time; the refund may or may not have happened."
        ),
    )
    return {"call": events[1].seq, "result": events[2].seq, "last": events[3].seq}


def draft_only_email(thread: Thread) -> dict[str, int]:
    events = f.append(
        thread,
        f.user("Draft an email to the supplier about the late delivery, but never send it."),
        f.annotation("constraint", "user", {"text": DRAFT_CONSTRAINT}),
        f.call("d-1", "draft_email", {"to": "supplier@example.com"}),
        f.result("d-1", value={"draft_id": "D-1"}),
        f.assistant("Here is the draft; I have not sent it."),
    )
    return {"constraint": events[1].seq, "last": events[-1].seq}


def routine_units(thread: Thread, count: int, *, start: int = 0) -> None:
    """`count` ordinary units of four events: a question, a read, its result, a reply."""
    for n in range(start, start + count):
        f.append(
            thread,
            f.user(f"What is the status of ticket {n}?"),
            f.call(f"t-{n}", "get_ticket", {"ticket": n}),
            f.result(f"t-{n}", value={"ticket": n, "status": "open"}),
            f.assistant(f"Ticket {n} is open."),
        )


def correction_over_tool(thread: Thread) -> dict[str, int]:
    """A tool reads an address; the user corrects it."""
    events = f.append(
        thread,
        f.user("Where will my parcel go?"),
        f.call("a-1", "get_address", {"customer": 7}),
        f.result(
            "a-1",
            value="1 Old Rd",
            verified_facts=[{"key": "customer.7.address", "value": "1 Old Rd"}],
        ),
        f.assistant("To 1 Old Rd."),
        f.user("That is outdated: I moved to 9 New St."),
        f.annotation("correction", "user", {"key": "customer.7.address", "value": "9 New St"}),
        f.assistant("Noted, 9 New St."),
    )
    return {"tool_result": events[2].seq, "correction": events[5].seq}


def model_guess(thread: Thread) -> dict[str, int]:
    """A tool confirms a balance; later the model guesses another one."""
    events = f.append(
        thread,
        f.user("What's my balance?"),
        f.call("b-1", "get_balance", {"account": 3}),
        f.result("b-1", value=120, verified_facts=[{"key": "account.3.balance", "value": 120}]),
        f.assistant("120."),
        f.user("Will it be enough after the next payment?"),
        f.annotation("fact", "model", {"key": "account.3.balance", "value": 200}),
        f.assistant("Probably."),
    )
    return {"tool_result": events[2].seq, "guess": events[5].seq}


def entries(content: dict[str, Any], section: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in content.get(section) or [] if all(e.get(k) == v for k, v in match.items())]
