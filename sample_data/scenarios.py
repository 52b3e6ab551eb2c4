"""Sample threads for the demo: four scenarios an operator meets in practice.

Each scenario is a list of event bodies exactly as an agent would post them, with fixed
`client_event_id`s and `created_at` times, so loading them twice appends nothing.

- order-10086: an address change with a confirmed side effect and a user constraint;
- refund-4471: a refund whose tool call timed out (side effect unknown) and a pending approval;
- email-board-q3: a user constraint "never send, draft only", then many drafting turns;
- review-pr-482: a code review with 60 tool calls and large outputs (file reads, diffs, tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sample_data.pr_review import code_review_events

START = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


@dataclass
class Scenario:
    external_id: str
    title: str
    events: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)


class _Log:
    """Builds event bodies with stable ids and a plausible clock."""

    def __init__(self, prefix: str, start: datetime) -> None:
        self.prefix, self.now = prefix, start
        self.events: list[dict[str, Any]] = []

    def add(self, body: dict[str, Any], *, after: float = 20) -> dict[str, Any]:
        self.now += timedelta(seconds=after)
        body = {
            "client_event_id": f"{self.prefix}-{len(self.events) + 1}",
            "created_at": self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            **body,
        }
        self.events.append(body)
        return body

    def say(self, role: str, text: str, *, after: float = 20) -> None:
        self.add({"kind": "message", "role": role, "content": text}, after=after)

    def call(
        self,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        key: str | None = None,
        after: float = 3,
    ) -> None:
        body: dict[str, Any] = {
            "kind": "tool_call",
            "tool_call_id": call_id,
            "tool_name": tool,
            "arguments": arguments,
        }
        if key:
            body.update(side_effect=True, idempotency_key=key)
        self.add(body, after=after)

    def result(
        self, call_id: str, status: str, result: Any, *, after: float = 2, **extra: Any
    ) -> None:
        self.add(
            {
                "kind": "tool_result",
                "tool_call_id": call_id,
                "status": status,
                "result": result,
                **extra,
            },
            after=after,
        )

    def note(self, type_: str, authority: str, payload: dict[str, Any], **extra: Any) -> None:
        self.add(
            {
                "kind": "annotation",
                "type": type_,
                "authority": authority,
                "payload": payload,
                **extra,
            },
            after=1,
        )


def order_change() -> Scenario:
    log = _Log("order-10086", START)
    log.say(
        "system",
        "You are the order-support agent of Northwind Outfitters. Change orders "
        "only through the order tools and confirm every change with the customer.",
        after=0,
    )
    log.say(
        "user",
        "Hi, I moved last week. Could you change the delivery address of order "
        "10086 to 221B Baker Street, London NW1 6XE? Please keep the express shipping — "
        "I need the jacket before Friday.",
    )
    log.note(
        "constraint",
        "user",
        {"text": "Keep express shipping; the order must arrive before Friday."},
        refers_to=[2],
    )
    log.call("call_lookup_1", "lookup_order", {"order_id": "10086"})
    log.result(
        "call_lookup_1",
        "succeeded",
        {
            "order_id": "10086",
            "status": "processing",
            "shipping": "express",
            "items": [{"sku": "JKT-448-M", "name": "Storm shell jacket", "qty": 1}],
            "address": {"line1": "14 Elm Road", "city": "Leeds", "postcode": "LS6 2AB"},
            "promised_by": "2026-11-28",
        },
        request_id="req_lookup_5b21",
        verified_facts=[
            {"key": "order.10086.status", "value": "processing"},
            {"key": "order.10086.address", "value": "14 Elm Road, Leeds LS6 2AB"},
            {"key": "order.10086.shipping", "value": "express"},
        ],
    )
    log.say(
        "assistant",
        "Order 10086 is still processing, so the address can change. I will "
        "update it to 221B Baker Street, London NW1 6XE and keep express shipping.",
    )
    log.call(
        "call_update_2",
        "update_shipping_address",
        {
            "order_id": "10086",
            "address": {"line1": "221B Baker Street", "city": "London", "postcode": "NW1 6XE"},
            "keep_shipping_method": True,
        },
        key="order-10086-address-2026-11-27",
    )
    log.result(
        "call_update_2",
        "succeeded",
        {
            "order_id": "10086",
            "updated": True,
            "shipping": "express",
            "promised_by": "2026-11-28",
        },
        after=4,
        request_id="req_7f3a9c",
        verified_facts=[
            {"key": "order.10086.address", "value": "221B Baker Street, London NW1 6XE"},
            {"key": "order.10086.shipping", "value": "express"},
        ],
    )
    log.say(
        "assistant",
        "Done: order 10086 now ships to 221B Baker Street, London NW1 6XE, "
        "still by express, promised for 28 November (confirmation req_7f3a9c).",
    )
    log.say("user", "Perfect, thank you!", after=60)
    log.say("assistant", "You're welcome — have a good move.")
    return Scenario("order-10086", "Change delivery address of order 10086", log.events)


def refund_timeout() -> Scenario:
    log = _Log("refund-4471", START + timedelta(hours=1))
    log.say(
        "system",
        "You are the returns agent of Northwind Outfitters. Refunds go through "
        "refund_payment; never refund the same order twice.",
        after=0,
    )
    # The rule as a constraint the summary keeps (and the approvals card shows): the system
    # message alone is no constraint of the fold.
    log.note(
        "constraint",
        "operator",
        {"text": "Never refund the same order twice."},
        refers_to=[1],
    )
    log.say(
        "user",
        "I sent back the headphones from order 4471 two weeks ago and I still "
        "have not received my refund of €89.90.",
    )
    log.call("call_order_1", "lookup_order", {"order_id": "4471"})
    log.result(
        "call_order_1",
        "succeeded",
        {
            "order_id": "4471",
            "status": "returned",
            "total": "89.90",
            "currency": "EUR",
            "payment": {"method": "card", "last4": "4242"},
        },
        request_id="req_lookup_9c03",
        verified_facts=[
            {"key": "order.4471.status", "value": "returned"},
            {"key": "order.4471.total", "value": "89.90 EUR"},
        ],
    )
    log.call("call_return_2", "check_return", {"order_id": "4471"})
    log.result(
        "call_return_2",
        "succeeded",
        {
            "rma": "RMA-20931",
            "received_at": "2026-11-14",
            "condition": "ok",
        },
        verified_facts=[{"key": "order.4471.return_received", "value": "2026-11-14"}],
    )
    log.say(
        "assistant",
        "Your return RMA-20931 arrived on 14 November in good condition. "
        "I am issuing the refund of €89.90 to the card ending 4242 now.",
    )
    log.call(
        "call_refund_3",
        "refund_payment",
        {"order_id": "4471", "amount": "89.90", "currency": "EUR"},
        key="refund-4471-8990",
    )
    log.result(
        "call_refund_3",
        "timeout",
        {"error": "payment gateway did not answer within 30 s"},
        after=30,
    )
    log.say(
        "assistant",
        "The payment gateway timed out, so I cannot tell yet whether the "
        "refund went through. I will not retry until that is confirmed, so you are never "
        "refunded twice. A colleague will check with the payment provider.",
    )
    log.add(
        {
            "kind": "approval_request",
            "action": "Retry refund of €89.90 for order 4471",
            "tool_name": "refund_payment",
            "arguments": {
                "order_id": "4471",
                "amount": "89.90",
                "currency": "EUR",
                "idempotency_key": "refund-4471-8990",
            },
        },
        after=5,
    )
    log.say("user", "OK, please let me know as soon as you know.", after=40)
    return Scenario("refund-4471", "Refund of order 4471 timed out", log.events)


DRAFT_TURNS = [
    (
        "Make it shorter — the board reads these on their phones.",
        "Q3 in brief: revenue €4.2M (+18% on Q2), gross margin 61%, cash runway 22 months.",
    ),
    (
        "Lead with the churn number, it is the good news.",
        "Churn fell to 1.9% monthly (from 2.6%), the lowest since launch.",
    ),
    (
        "Add a line on the delayed EU data-centre move.",
        "The EU data-centre move slips to January; no customer impact, €40k extra cost.",
    ),
    (
        "Tone it down, 'record quarter' sounds like marketing.",
        "Replaced 'record quarter' with 'our strongest quarter so far'.",
    ),
    (
        "Mention the two enterprise logos but not by name yet.",
        "Two enterprise customers signed (names under NDA until their announcements).",
    ),
    (
        "Put the hiring plan in a bullet list.",
        "Hiring: 3 engineers, 1 solutions architect, 1 finance lead — all budgeted.",
    ),
    (
        "Add the ask: approval of the Q4 budget at the December meeting.",
        "Ask: approve the Q4 budget (attached) at the 12 December board meeting.",
    ),
    (
        "Can you check the margin figure against the finance sheet?",
        "Checked against the finance sheet: gross margin 61.2%, rounded to 61%.",
    ),
    (
        "Subject line should say 'Q3 update — for the 12 Dec meeting'.",
        "Subject set to 'Q3 update — for the 12 Dec meeting'.",
    ),
    ("Sign it from me, not from 'the team'.", "Signature changed to 'Maria Lindqvist, CEO'."),
    (
        "Looks good. Keep it as a draft, I will read it again tonight.",
        "Saved. The email stays a draft; nothing was sent.",
    ),
]


def email_draft() -> Scenario:
    log = _Log("email-board-q3", START + timedelta(hours=2))
    log.say(
        "system",
        "You are Maria's executive assistant. You can read the finance sheet and "
        "manage email drafts.",
        after=0,
    )
    log.say(
        "user",
        "Please draft an email to the board summarising Q3. Never send it — draft "
        "only; I will send it myself after reading it.",
    )
    log.note(
        "constraint",
        "user",
        {"text": "Never send the email — keep it a draft only."},
        refers_to=[2],
    )
    log.call("call_sheet_1", "read_finance_sheet", {"sheet": "Q3-2026", "range": "summary"})
    log.result(
        "call_sheet_1",
        "succeeded",
        {
            "revenue_eur": 4200000,
            "revenue_growth_qoq": 0.18,
            "gross_margin": 0.612,
            "monthly_churn": 0.019,
            "runway_months": 22,
        },
        verified_facts=[
            {"key": "q3.revenue_eur", "value": 4200000},
            {"key": "q3.gross_margin", "value": 0.612},
        ],
    )
    body = (
        "Dear board,\n\nQ3 was our strongest quarter so far: revenue €4.2M (+18% on Q2), "
        "gross margin 61%, runway 22 months.\n\nBest,\nMaria"
    )
    log.call(
        "call_draft_2",
        "save_draft",
        {"to": "board@northwind.example", "subject": "Q3 update", "body": body},
    )
    log.result("call_draft_2", "succeeded", {"draft_id": "dr_8812", "state": "draft"})
    log.say("assistant", "I saved a first draft (dr_8812); it is not sent.\n\n" + body)
    for turn, (ask, change) in enumerate(DRAFT_TURNS, start=3):
        log.say("user", ask, after=90)
        body = body.replace("\n\nBest,", f"\n\n{change}\n\nBest,")
        log.call(f"call_draft_{turn}", "save_draft", {"draft_id": "dr_8812", "body": body})
        log.result(
            f"call_draft_{turn}",
            "succeeded",
            {"draft_id": "dr_8812", "state": "draft", "revision": turn - 1},
        )
        log.say("assistant", f"Updated the draft (still unsent): {change}")
    return Scenario("email-board-q3", "Board email for Q3 — draft only", log.events)


def code_review() -> Scenario:
    log = _Log("review-pr-482", START + timedelta(hours=3))
    code_review_events(log)
    return Scenario(
        "review-pr-482",
        "Code review of PR #482 (billing proration)",
        log.events,
        settings={"context_window": 32000, "reserved_output": 4000},
    )


def scenarios() -> list[Scenario]:
    return [order_change(), refund_timeout(), email_draft(), code_review()]
