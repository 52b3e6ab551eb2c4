"""Build stored-form event dicts (docs/event-log.md, "Event dicts in the domain") without a
database.

Binding follows the append service: a result binds to the latest open call with its
tool_call_id (`call_seq`); the chain hash is real, so verification tests can compare it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from threads.domain import chain
from threads.domain.events import stored_form
from threads.domain.render import render_event

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Log:
    def __init__(self, thread_uid: str = "test-thread") -> None:
        self.events: list[dict[str, Any]] = []
        self.open: dict[str, list[int]] = {}
        self.head = chain.genesis_hash(thread_uid)

    @property
    def last_seq(self) -> int:
        return len(self.events)

    def add(self, kind: str, *, token_count: int | None = None, **data: Any) -> dict[str, Any]:
        seq = self.last_seq + 1
        data = {k: v for k, v in data.items() if v is not None}
        if kind == "tool_call":
            data.setdefault("arguments", {})
            data["side_effect"] = bool(data.get("side_effect"))
            self.open.setdefault(data["tool_call_id"], []).append(seq)
        elif kind == "tool_result":
            data["call_seq"] = self.open[data["tool_call_id"]].pop()
        event = stored_form(
            seq=seq,
            kind=kind,
            created_at=T0 + timedelta(seconds=seq),
            client_event_id=None,
            metadata={},
            data=data,
        )
        self.head = chain.link_hash(self.head, chain.event_canonical(event))
        event["hash"] = self.head
        event["token_count"] = (
            token_count if token_count is not None else len(render_event(event)) // 4 + 4
        )
        self.events.append(event)
        return event

    def user(self, text: str, **kw: Any) -> dict[str, Any]:
        return self.add("message", role="user", content=text, **kw)

    def assistant(self, text: str, **kw: Any) -> dict[str, Any]:
        return self.add("message", role="assistant", content=text, **kw)

    def call(
        self,
        call_id: str,
        tool: str = "lookup",
        *,
        side_effect: bool = False,
        key: str | None = None,
        arguments: dict[str, Any] | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        return self.add(
            "tool_call",
            tool_call_id=call_id,
            tool_name=tool,
            arguments=arguments or {},
            side_effect=side_effect,
            idempotency_key=key or (f"key-{call_id}" if side_effect else None),
            **kw,
        )

    def result(
        self,
        call_id: str,
        status: str = "succeeded",
        *,
        result: Any = None,
        facts: list[dict[str, Any]] | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        return self.add(
            "tool_result",
            tool_call_id=call_id,
            status=status,
            result=result,
            verified_facts=facts,
            **kw,
        )

    def annotate(
        self,
        type_: str,
        authority: str,
        payload: dict[str, Any],
        refers_to: list[int] | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        return self.add(
            "annotation",
            type=type_,
            authority=authority,
            payload=payload,
            refers_to=refers_to,
            **kw,
        )

    def fact(self, key: str, value: Any, authority: str = "user", **kw: Any) -> dict[str, Any]:
        return self.annotate("fact", authority, {"key": key, "value": value}, **kw)

    def approval(self, action: str, **kw: Any) -> dict[str, Any]:
        return self.add("approval_request", action=action, arguments={}, **kw)

    def decide(
        self, approval_seq: int, decision: str = "approve", reason: str = "ok"
    ) -> dict[str, Any]:
        return self.add(
            "approval_decision",
            approval_seq=approval_seq,
            decision=decision,
            reason=reason,
            actor="reviewer",
        )

    def resolve(self, call_seq: int, status: str, evidence: str = "checked") -> dict[str, Any]:
        call = self.events[call_seq - 1]
        return self.add(
            "side_effect_resolution",
            tool_call_id=call["tool_call_id"],
            call_seq=call_seq,
            status=status,
            evidence=evidence,
            actor="operator",
            side_effect_id=call_seq,
        )

    def retract(self, seq: int) -> dict[str, Any]:
        return self.add("retraction", retracts=seq, token_count=0)

    def reset(self) -> dict[str, Any]:
        return self.add("reset", token_count=0)

    def hash_at(self, seq: int) -> str:
        return self.events[seq - 1]["hash"]
