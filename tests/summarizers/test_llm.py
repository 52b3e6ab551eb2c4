"""The llm backend against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.domain.eventlog import Log
from threads.domain.fold import fold_structured
from threads.domain.verify import verify_candidate
from threads.summarizers import LLMSummarizer, StructuredSummarizer, SummarizerError, get_summarizer


class FakeEndpoint:
    """Answers POST /v1/chat/completions with whatever the test queued."""

    def __init__(self) -> None:
        self.status = 200
        self.content: str = "{}"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", 0))
                endpoint.requests.append(json.loads(self.rfile.read(length)))
                endpoint.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                if endpoint.status != 200:
                    body = b'{"error": {"message": "boom"}}'
                else:
                    body = json.dumps(
                        {
                            "id": "chatcmpl-1",
                            "object": "chat.completion",
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": endpoint.content},
                                }
                            ],
                        }
                    ).encode()
                self.send_response(endpoint.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    server = FakeEndpoint()
    yield server
    server.close()


def scenario() -> Log:
    log = Log()
    log.user("Refund order 10086, at most 50 EUR")
    log.annotate("constraint", "user", {"text": "refund at most 50 EUR"})
    log.call("r1", "refund", side_effect=True, key="refund-10086", arguments={"amount": 50})
    log.result("r1", "timeout")
    log.assistant("The refund timed out.")
    return log


def model_candidate(log: Log, **changes: Any) -> dict[str, Any]:
    """What a well-behaved model answers: the schema, cited, with a narrative."""
    candidate: dict[str, Any] = {
        "task": {"goal": "Refund order 10086", "status": "unknown", "source_event_ids": [1]},
        "requests": [
            {
                "text": "Refund order 10086, at most 50 EUR",
                "truncated": False,
                "source_event_ids": [1],
            }
        ],
        "constraints": [
            {"text": "refund at most 50 EUR", "status": "active", "source_event_ids": [2]}
        ],
        "facts": [],
        "tool_state": [
            {
                "tool_call_id": "r1",
                "tool": "refund",
                "side_effect": True,
                "status": "unknown",
                "source_event_ids": [3, 4],
            }
        ],
        "completed_actions": [],
        "pending": [],
        "decisions": [],
        "open_questions": [],
        "narrative": "A refund was attempted and timed out; its outcome is unknown.",
    }
    candidate.update(changes)
    return candidate


def fold(summarizer: LLMSummarizer, log: Log) -> dict[str, Any]:
    return summarizer.fold(
        previous=None, events=log.events, covered_from=1, covered_until=log.last_seq
    )


def verify(log: Log, candidate: dict[str, Any]) -> dict[str, bool]:
    result = verify_candidate(
        candidate=candidate,
        previous=None,
        events=log.events,
        base_covered_until=0,
        boundary=log.last_seq,
        chain_hash_at_boundary=log.head,
        expected_chain_hash=log.head,
    )
    return {c.name: c.ok for c in result.checks}


def test_good_candidate_passes_verification(endpoint: FakeEndpoint) -> None:
    log = scenario()
    endpoint.content = json.dumps(model_candidate(log))
    summarizer = LLMSummarizer(
        base_url=endpoint.base_url, model="m-1", api_key="sk-test", timeout=5
    )
    candidate = fold(summarizer, log)
    assert all(verify(log, candidate).values()), verify(log, candidate)
    assert candidate["schema_version"] == 1
    assert candidate["covered"] == {"from_seq": 1, "to_seq": log.last_seq}
    assert candidate["narrative"].startswith("A refund was attempted")
    [sent] = endpoint.requests
    assert sent["model"] == "m-1"
    assert sent["response_format"] == {"type": "json_object"}
    assert (
        sent["messages"][0]["role"] == "system"
        and "source_event_ids" in sent["messages"][0]["content"]
    )
    assert "#3 call refund#r1" in sent["messages"][1]["content"]
    assert endpoint.headers[0]["Authorization"] == "Bearer sk-test"


def test_tool_state_is_recomputed_never_taken_from_the_model(endpoint: FakeEndpoint) -> None:
    log = scenario()
    lying = model_candidate(
        log,
        tool_state=[
            {
                "tool_call_id": "r1",
                "tool": "refund",
                "side_effect": True,
                "status": "failed",
                "source_event_ids": [3, 4],
            }
        ],
        pending=[
            {"kind": "side_effect", "ref": "nothing", "blocking": False, "source_event_ids": [3]}
        ],
    )
    endpoint.content = json.dumps(lying)
    candidate = fold(LLMSummarizer(base_url=endpoint.base_url, model="m", timeout=5), log)
    [entry] = candidate["tool_state"]
    assert entry["status"] == "unknown" and entry["idempotency_key"] == "refund-10086"
    [pending] = [p for p in candidate["pending"] if p["kind"] == "side_effect"]
    assert pending["blocking"] is True and pending["call_seq"] == 3
    structured = fold_structured(
        previous=None, events=log.events, covered_from=1, covered_until=log.last_seq
    )
    assert candidate["tool_state"] == structured["tool_state"]
    assert verify(log, candidate)["tool_status_matches_log"] is True


def test_pending_approvals_come_from_the_log(endpoint: FakeEndpoint) -> None:
    log = scenario()
    request = log.approval("refund 50 EUR again")
    question = {
        "kind": "question",
        "ref": "which account?",
        "blocking": False,
        "source_event_ids": [1],
    }
    # The model forgets the approval and invents one that was never requested.
    invented = {
        "kind": "approval",
        "ref": "approve everything",
        "blocking": True,
        "source_event_ids": [2],
    }
    endpoint.content = json.dumps(model_candidate(log, pending=[invented, question]))
    candidate = fold(LLMSummarizer(base_url=endpoint.base_url, model="m", timeout=5), log)
    approvals = [p for p in candidate["pending"] if p["kind"] == "approval"]
    assert [p["approval_seq"] for p in approvals] == [request["seq"]]
    assert question in candidate["pending"]


def test_citation_outside_the_range_fails_verification(endpoint: FakeEndpoint) -> None:
    log = scenario()
    endpoint.content = json.dumps(
        model_candidate(
            log, decisions=[{"text": "refund approved", "source_event_ids": [log.last_seq + 40]}]
        )
    )
    candidate = fold(LLMSummarizer(base_url=endpoint.base_url, model="m", timeout=5), log)
    verdict = verify(log, candidate)
    assert [name for name, ok in verdict.items() if not ok] == ["sources_in_range"]


def test_structural_fields_cannot_be_invented(endpoint: FakeEndpoint) -> None:
    log = scenario()
    endpoint.content = json.dumps(
        model_candidate(log, schema_version=7, covered={"from_seq": 1, "to_seq": 999})
    )
    candidate = fold(LLMSummarizer(base_url=endpoint.base_url, model="m", timeout=5), log)
    assert candidate["schema_version"] == 1
    assert candidate["covered"]["to_seq"] == log.last_seq


@pytest.mark.parametrize("content", ["this is not json {", "[1, 2, 3]"])
def test_malformed_answer_is_a_summarizer_error(endpoint: FakeEndpoint, content: str) -> None:
    endpoint.content = content
    with pytest.raises(SummarizerError, match="JSON"):
        fold(LLMSummarizer(base_url=endpoint.base_url, model="m", timeout=5), scenario())


def test_http_500_is_a_summarizer_error(endpoint: FakeEndpoint) -> None:
    endpoint.status = 500
    with pytest.raises(SummarizerError, match="HTTP 500"):
        fold(LLMSummarizer(base_url=endpoint.base_url, model="m", timeout=5), scenario())


def test_unreachable_endpoint_is_a_summarizer_error(endpoint: FakeEndpoint) -> None:
    base_url = endpoint.base_url
    endpoint.close()
    with pytest.raises(SummarizerError, match="unreachable"):
        fold(LLMSummarizer(base_url=base_url, model="m", timeout=2), scenario())


def test_get_summarizer(settings: Any, endpoint: FakeEndpoint) -> None:
    assert isinstance(get_summarizer("structured"), StructuredSummarizer)
    settings.CTXADMIN_LLM_BASE_URL = endpoint.base_url
    settings.CTXADMIN_LLM_MODEL = "m-2"
    llm = get_summarizer("llm")
    assert isinstance(llm, LLMSummarizer) and llm.model == "m-2"
    settings.CTXADMIN_LLM_BASE_URL = ""
    with pytest.raises(SummarizerError, match="CTXADMIN_LLM_BASE_URL"):
        get_summarizer("llm")
    with pytest.raises(SummarizerError, match="unknown"):
        get_summarizer("crystal-ball")


def test_structured_backend_is_the_fold() -> None:
    log = scenario()
    content = StructuredSummarizer().fold(
        previous=None, events=log.events, covered_from=1, covered_until=log.last_seq
    )
    assert content == fold_structured(
        previous=None, events=log.events, covered_from=1, covered_until=log.last_seq
    )
