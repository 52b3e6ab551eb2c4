"""Hypothesis strategies: valid event logs with parallel calls, late results, timeouts,
resolutions, approvals and annotations of every authority."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.domain.eventlog import Log
from threads.domain.markers import RETRACTABLE_KINDS

KEYS = ("order.total", "order.status", "customer.email")
VALUES = (10, 20, "paid", "open", None)
AUTHORITIES = ("user", "tool", "model", "operator")
OPS = (
    "user",
    "assistant",
    "call",
    "parallel",
    "result",
    "result",
    "result",
    "result",
    "resolve",
    "resolve",
    "fact",
    "correction",
    "constraint",
    "question",
    "goal",
    "decision",
    "approval",
    "decide",
)


@st.composite
def logs(
    draw: st.DrawFn,
    *,
    min_ops: int = 1,
    max_ops: int = 40,
    close_all: bool = False,
    markers: bool = False,
) -> Log:
    """A log built op by op so that it always obeys the append rules. With `close_all`, every
    call still open at the end gets a result (the log is one closed prefix). With `markers`,
    retractions (of any retractable item not retracted yet) and resets are mixed in."""
    log = Log()
    open_calls: list[str] = []
    unknown_side_effects: list[int] = []
    undecided: list[int] = []
    counter = 0

    def tokens() -> int:
        return draw(st.integers(min_value=1, max_value=400))

    def result(call_id: str) -> None:
        status = draw(st.sampled_from(("succeeded", "failed", "timeout", "cancelled")))
        facts = None
        if status == "succeeded" and draw(st.booleans()):
            facts = [{"key": draw(st.sampled_from(KEYS)), "value": draw(st.sampled_from(VALUES))}]
        event = log.result(call_id, status, facts=facts, token_count=tokens())
        call = log.events[event["call_seq"] - 1]
        if status == "timeout" and call["side_effect"]:
            unknown_side_effects.append(call["seq"])

    ops = (*OPS, "retract", "retract", "reset") if markers else OPS
    retracted: set[int] = set()
    for _ in range(draw(st.integers(min_value=min_ops, max_value=max_ops))):
        op = draw(st.sampled_from(ops))
        if op == "user":
            log.user(draw(st.sampled_from(("refund it", "stop", "x" * 30))), token_count=tokens())
        elif op == "assistant":
            log.assistant(draw(st.sampled_from(("ok", "done", "checking"))), token_count=tokens())
        elif op in ("call", "parallel"):
            width = draw(st.integers(min_value=2, max_value=3)) if op == "parallel" else 1
            group = f"g{counter}" if width > 1 else None
            for _ in range(width):
                counter += 1
                # Ids repeat once closed, as real agents do.
                call_id = f"c{draw(st.integers(min_value=0, max_value=3))}"
                if call_id in open_calls:
                    call_id = f"c{counter}x"
                side_effect = draw(st.booleans())
                log.call(
                    call_id,
                    "refund" if side_effect else "lookup",
                    side_effect=side_effect,
                    key=f"k{counter}" if side_effect else None,
                    group=group,
                    token_count=tokens(),
                )
                open_calls.append(call_id)
        elif op == "result" and open_calls:
            index = draw(st.integers(min_value=0, max_value=len(open_calls) - 1))
            result(open_calls.pop(index))
        elif op == "resolve" and unknown_side_effects:
            call_seq = unknown_side_effects.pop(0)
            log.resolve(call_seq, draw(st.sampled_from(("succeeded", "failed", "cancelled"))))
        elif op in ("fact", "correction"):
            log.annotate(
                op,
                draw(st.sampled_from(AUTHORITIES)),
                {"key": draw(st.sampled_from(KEYS)), "value": draw(st.sampled_from(VALUES))},
                token_count=tokens(),
            )
        elif op in ("constraint", "question", "goal", "decision"):
            payload: dict[str, Any] = {"text": f"{op} {counter}"}
            refers = None
            if op == "decision" and log.last_seq and draw(st.booleans()):
                refers = [draw(st.integers(min_value=1, max_value=log.last_seq))]
            log.annotate(
                op,
                draw(st.sampled_from(AUTHORITIES)),
                payload,
                refers_to=refers,
                token_count=tokens(),
            )
        elif op == "approval":
            undecided.append(log.approval(f"action {counter}", token_count=tokens())["seq"])
        elif op == "decide" and undecided:
            log.decide(undecided.pop(0), draw(st.sampled_from(("approve", "reject"))))
        elif op == "retract":
            targets = [
                e["seq"]
                for e in log.events
                if e["kind"] in RETRACTABLE_KINDS and e["seq"] not in retracted
            ]
            if targets:
                target = draw(st.sampled_from(targets))
                retracted.add(target)
                log.retract(target)
        elif op == "reset":
            log.reset()
    if close_all:
        while open_calls:
            result(open_calls.pop(0))
    return log
