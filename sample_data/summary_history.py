"""The demo's summary history: refund-5190, a thread whose summary has several versions, one
candidate refused by verification and one rollback, so that the summaries, diff and
checkpoints tabs have something to show.

Its log is appended in four parts, as an agent's would be, and folded as it goes:

1. the customer's request and a lookup: folded by the structured summariser;
2. a refund whose gateway times out (its outcome is unknown): the risk trigger folds it;
3. the customer asks whether it went through and the agent says it does not know yet. The
   admin tries the llm summariser, and the model lies: the refund went through, the task is
   done. The candidate is refused by the real verifier (its task status, completed action
   and narrative contradict the log); the admin switches back and the structured fold
   commits;
4. an operator resolves the refund from the gateway's dashboard, the agent tells the
   customer, and that is folded; then the admin rolls back to the summary of part 3, because
   finance has not confirmed the settlement yet (the versions after it are rolled back, a
   new version restores it).

The lying model is an OpenAI-compatible endpoint on a loopback port, started for that one
fold: the llm summariser, the fold and the verifier are the product's own. Run again, it does
nothing (the thread has events already).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.utils import timezone

from sample_data.scenarios import _Log
from threads.domain.events import normalize_event
from threads.domain.fold import fold_structured
from threads.models import Checkpoint, SideEffect, SummaryVersion, Thread, Workspace
from threads.selectors import event_dicts
from threads.services.events import event_append_batch
from threads.services.folding import Outcome, fold_once, fold_run
from threads.services.rollback import checkpoint_rollback
from threads.services.side_effects import side_effect_resolve
from threads.services.thread_update import thread_update
from threads.services.threads import thread_get_or_create
from threads.summarizers import SummarizerError

logger = logging.getLogger(__name__)

THREAD_ID = "refund-5190"
TITLE = "Refund of order 5190 — a refused summary and a rollback"
TRIGGER = {"kind": "manual", "reason": "demo: summary history"}
ROLLBACK_REASON = (
    "The summaries after the resolution of call_refund_2 stand on a settlement finance has not "
    "confirmed yet; back to the one before it until the payment provider's report arrives"
)


Part = list[dict[str, Any]]


def _parts(start: datetime) -> tuple[Part, Part, Part, Part]:
    log = _Log(THREAD_ID, start)
    log.say(
        "system",
        "You are the returns agent of Northwind Outfitters. Refunds go through "
        "refund_payment; never refund an order twice.",
        after=0,
    )
    log.say("user", "My return of order 5190 arrived last week. Please refund the €64.50.")
    log.note("constraint", "user", {"text": "Refund to the original card only."}, refers_to=[2])
    log.call("call_lookup_1", "lookup_order", {"order_id": "5190"})
    log.result(
        "call_lookup_1",
        "succeeded",
        {"order_id": "5190", "status": "returned", "total": "64.50", "card_last4": "1881"},
        after=1.2,
        verified_facts=[
            {"key": "order.5190.status", "value": "returned"},
            {"key": "order.5190.total", "value": "64.50 EUR"},
        ],
    )
    log.say(
        "assistant", "Your return is registered. I am refunding €64.50 to the card ending 1881."
    )
    marks = [len(log.events)]
    log.call(
        "call_refund_2",
        "refund_payment",
        {"order_id": "5190", "amount": "64.50", "currency": "EUR"},
        key="refund-5190-6450",
        after=95,
    )
    log.result(
        "call_refund_2",
        "timeout",
        {"error": "payment gateway did not answer within 30 s"},
        after=30,
    )
    log.say(
        "assistant",
        "The payment gateway timed out: I cannot tell whether the refund went through, so I "
        "will not retry it. A colleague will check with the payment provider.",
    )
    marks.append(len(log.events))
    log.say("user", "Thanks. Did it go through in the end?", after=240)
    log.say(
        "assistant",
        "Not confirmed yet: the refund's outcome is still unknown. I will write as soon as "
        "the payment provider answers.",
    )
    marks.append(len(log.events))
    log.say(
        "assistant",
        "The payment provider confirmed that your refund of €64.50 was settled. You will see "
        "it on your statement within five days.",
    )
    events = log.events
    # The last part comes after the operator's resolution, which is made now: it is stamped
    # when it arrives.
    last = [{k: v for k, v in body.items() if k != "created_at"} for body in events[marks[2] :]]
    return events[: marks[0]], events[marks[0] : marks[1]], events[marks[1] : marks[2]], last


def _append(thread: Thread, bodies: list[dict[str, Any]]) -> None:
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    event_append_batch(
        thread=thread, new_events=[normalize_event(body, max_bytes=max_bytes) for body in bodies]
    )
    thread.refresh_from_db()


def _fold(thread: Thread) -> SummaryVersion:
    version = fold_run(thread_id=thread.pk, trigger=TRIGGER)
    thread.refresh_from_db()
    if version is None or thread.head_version != version.version:
        raise RuntimeError(f"demo: the fold of {THREAD_ID} did not commit")
    return version


class _LyingModel:
    """An OpenAI-compatible /chat/completions endpoint on a loopback port that answers every
    request with `answer`."""

    def __init__(self, answer: dict[str, Any]) -> None:
        body = json.dumps(
            {
                "id": "chatcmpl-demo",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": json.dumps(answer)},
                    }
                ],
            }
        ).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def _lying_llm(answer: dict[str, Any]) -> Iterator[None]:
    model = _LyingModel(answer)
    try:
        with override_settings(CTXADMIN_LLM_BASE_URL=model.base_url, CTXADMIN_LLM_MODEL="liar-1"):
            yield
    finally:
        model.close()


def _lie(thread: Thread) -> dict[str, Any]:
    """What the log says about the events after the head (the structured fold's content), with
    the lie a model tells: the timed-out refund went through."""
    thread.refresh_from_db()
    head = SummaryVersion.objects.get(thread=thread, version=thread.head_version)
    events = event_dicts(thread, after=thread.covered_until, until=thread.last_seq)
    logged = event_dicts(thread, after=0, until=thread.last_seq)
    answer = fold_structured(
        previous=head.content,
        events=events,
        covered_from=thread.covered_until + 1,
        covered_until=thread.last_seq,
    )
    call = next(e for e in logged if e.get("tool_call_id") == "call_refund_2")
    result = next(e for e in logged if e.get("call_seq") == call["seq"])
    answer["task"]["status"] = "succeeded"
    answer["completed_actions"].append(
        {
            "tool_call_id": call["tool_call_id"],
            "action": "refunded 64.50 EUR for order 5190",
            "source_event_ids": [call["seq"], result["seq"]],
        }
    )
    answer["narrative"] = "The refund of €64.50 for order 5190 went through; the task is done."
    return answer


def _fold_if_behind(thread: Thread) -> SummaryVersion | None:
    """Fold what the triggers did not (an append's fold runs inline in the demo, a timed-out
    refund is one of them; elsewhere it is queued)."""
    thread.refresh_from_db()
    return _fold(thread) if thread.covered_until < thread.last_seq else None


@dataclass
class History:
    versions: list[SummaryVersion]
    refused: SummaryVersion | None  # the lying candidate, None without a loopback interface


def summary_history_load(*, workspace: Workspace) -> History | None:
    """Load refund-5190 and its summary history (see the module's docstring); None when the
    thread had events already."""
    thread, _ = thread_get_or_create(workspace=workspace, external_id=THREAD_ID, title=TITLE)
    if thread.last_seq:
        return None
    people = get_user_model().objects
    admin, operator = people.get(username="admin"), people.get(username="operator")
    # The thread happened this morning: its resolution and what follows are made now.
    request, refund, follow_up, settled = _parts(timezone.now() - timedelta(hours=3))
    _append(thread, request)
    _fold(thread)
    _append(thread, refund)
    _fold_if_behind(thread)
    _append(thread, follow_up)
    with _lying_llm(_lie(thread)):
        thread_update(thread=thread, actor=admin, summarizer="llm")
        try:
            refused = fold_once(thread_id=thread.pk, trigger=TRIGGER)
        except SummarizerError as exc:
            # No loopback interface (a network namespace without one): no lie to refuse.
            logger.warning("demo: the lying summariser could not be reached: %s", exc)
            refused = None
        finally:
            thread_update(thread=thread, actor=admin, summarizer="structured")
    if refused is not None and refused.outcome != Outcome.REJECTED:
        raise RuntimeError(f"demo: the verifier did not refuse the lie ({refused.outcome})")
    safe = _fold(thread)
    side_effect = SideEffect.objects.get(thread=thread, idempotency_key="refund-5190-6450")
    side_effect_resolve(
        side_effect=side_effect,
        actor=operator,
        status="succeeded",
        evidence="The gateway's dashboard lists refund re_5190 of 64.50 EUR as settled.",
    )
    _append(thread, settled)
    _fold_if_behind(thread)
    checkpoint = Checkpoint.objects.get(thread=thread, summary_version=safe)
    checkpoint_rollback(thread=thread, checkpoint=checkpoint, actor=admin, reason=ROLLBACK_REASON)
    return History(
        list(SummaryVersion.objects.filter(thread=thread).order_by("version")),
        refused.version if refused is not None else None,
    )
