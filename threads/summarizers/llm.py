"""The optional `llm` backend: an OpenAI-compatible /chat/completions endpoint asked for the
summary schema as a JSON object (docs/pipeline.md, "Fold with a summariser backend").

The model writes the prose-ish parts (goal, facts, constraints, decisions, narrative ...). It never
decides what happened to a tool call: `tool_state` (and the tool/side-effect entries of `pending`)
is recomputed from the log, and the structural fields (`schema_version`, `covered`) are set here.
The result is a candidate like any other and goes through the same verification, whose claim
checks refuse an answer whose task status, facts, actions, decisions or narrative contradict the
ledger (docs/pipeline.md, "Verify"); the narrative is never given to the agent.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from threads.domain.fold import SCHEMA_VERSION, SECTIONS, world_state
from threads.domain.ledger import pending_from_log, tool_state_from_log
from threads.domain.markers import withdrawn
from threads.domain.render import render_event
from threads.summarizers.base import SummarizerError

MAX_EVENT_CHARS = 4000
MAX_ERROR_BODY = 300

SYSTEM_PROMPT = """You fold an AI agent's event log into a structured summary.
Answer with ONE JSON object and nothing else, with these keys:
- "task": {"goal": string, "status": one of planned|running|waiting_for_user|waiting_for_approval|
  succeeded|failed|cancelled|unknown, "source_event_ids": [seq, ...]}
- "requests": [{"text": the user's words verbatim, "truncated": bool, "source_event_ids": [seq]}]
- "constraints": [{"text": verbatim, "status": "active"|"expired", "source_event_ids": [seq]}]
- "facts": [{"key", "value", "authority": user|tool|model|operator,
  "confidence": confirmed|inferred|unknown, "observed_at", "previous_value",
  "status": "active"|"superseded", "source_event_ids": [seq]}]
- "completed_actions": [{"tool_call_id", "action", "source_event_ids": [seq]}]
- "pending": [{"kind": "question", "ref", "blocking": bool, "source_event_ids": [seq]}]
- "decisions": [{"text", "source_event_ids": [seq]}]
- "open_questions": [{"text", "source_event_ids": [seq]}]
- "narrative": a short paragraph for people (the agent never sees it)
Rules: start from the previous summary and fold the new events into it; keep what still holds.
Cite every entry with the seq numbers (#N) of the events it comes from; cite nothing else.
Cite every constraint and correction; copy a constraint's text exactly, never reword it, and
drop none. Facts from users, tools or operators are confirmed; your own inferences have
authority "model" and confidence "inferred" and never replace a confirmed fact: put a
conflicting guess in open_questions. Keep one active fact per key; a replaced fact stays with
status "superseded". Do not report tool call outcomes: they are taken from the log. Every
summary is checked against the log and refused if it says otherwise: never call a call
succeeded, done, paid or failed unless its result (or an operator's resolution) says so — a
timeout is unknown; name the call (its tool_call_id) when calls of one tool differ; a task is
not "succeeded" while an approval, a call or a side effect is pending; a completed action cites
its call's succeeded result; a decision repeats the words of the event it cites, and one on an
approval says what the approval's decision said."""


def _render_events(events: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for event in events:
        text = render_event(dict(event))
        if len(text) > MAX_EVENT_CHARS:
            text = text[:MAX_EVENT_CHARS] + " […]"
        lines.append(f"#{event['seq']} {text}")
    return "\n".join(lines)


class LLMSummarizer:
    name = "llm"

    def __init__(self, base_url: str, model: str, api_key: str = "", timeout: float = 60.0) -> None:
        if not base_url:
            raise SummarizerError("the llm summariser needs CTXADMIN_LLM_BASE_URL")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout

    @classmethod
    def from_settings(cls) -> LLMSummarizer:
        from django.conf import settings

        return cls(
            base_url=getattr(settings, "CTXADMIN_LLM_BASE_URL", ""),
            model=getattr(settings, "CTXADMIN_LLM_MODEL", ""),
            api_key=getattr(settings, "CTXADMIN_LLM_API_KEY", ""),
            timeout=float(getattr(settings, "CTXADMIN_LLM_TIMEOUT", 60.0)),
        )

    def messages(
        self,
        *,
        previous: Mapping[str, Any] | None,
        events: Sequence[Mapping[str, Any]],
        covered_from: int,
        covered_until: int,
    ) -> list[dict[str, str]]:
        # The model sees only what is content: no retracted item, no marker, nothing before a
        # reset — and after a reset, of the previous summary only its world state (tool state
        # and pending approvals, which it may not change anyway).
        gone = withdrawn(events)
        if gone.reset_at is not None:
            previous = world_state(previous)
        prior = json.dumps(previous, ensure_ascii=False, sort_keys=True) if previous else "none"
        shown = [e for e in events if e["seq"] not in gone.seqs]
        user = (
            f"Previous summary:\n{prior}\n\n"
            f"New events #{covered_from}..#{covered_until}:\n{_render_events(shown)}"
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(payload).encode("utf-8"),
            headers=headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()[:MAX_ERROR_BODY].decode("utf-8", "replace")
            raise SummarizerError(f"llm endpoint answered HTTP {exc.code}: {body}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise SummarizerError(f"llm endpoint unreachable: {exc}") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise SummarizerError("llm endpoint answered with something that is not JSON") from exc
        if not isinstance(answer, dict):
            raise SummarizerError("llm endpoint answered with something that is not an object")
        return answer

    def fold(
        self,
        *,
        previous: dict[str, Any] | None,
        events: list[dict[str, Any]],
        covered_from: int,
        covered_until: int,
    ) -> dict[str, Any]:
        answer = self._post(
            {
                "model": self.model,
                "messages": self.messages(
                    previous=previous,
                    events=events,
                    covered_from=covered_from,
                    covered_until=covered_until,
                ),
                "response_format": {"type": "json_object"},
                "temperature": 0,
            }
        )
        try:
            text = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError("llm answer has no choices[0].message.content") from exc
        try:
            parsed = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise SummarizerError(f"llm answer is not valid JSON: {str(text)[:120]!r}") from exc
        if not isinstance(parsed, dict):
            raise SummarizerError("llm answer is JSON but not an object")
        return self.complete(
            parsed,
            previous=previous,
            events=events,
            covered_from=covered_from,
            covered_until=covered_until,
        )

    @staticmethod
    def complete(
        parsed: dict[str, Any],
        *,
        previous: Mapping[str, Any] | None,
        events: list[dict[str, Any]],
        covered_from: int,
        covered_until: int,
    ) -> dict[str, Any]:
        """Turn the model's object into a candidate: structural fields and tool state come
        from here and the log, never from the model."""
        candidate = dict(parsed)
        prev_covered = (previous or {}).get("covered") or {}
        candidate["schema_version"] = SCHEMA_VERSION
        candidate["covered"] = {
            "from_seq": prev_covered.get("from_seq", covered_from),
            "to_seq": covered_until,
        }
        for section in SECTIONS:
            if not isinstance(candidate.get(section), list):
                candidate[section] = []
        if not isinstance(candidate.get("task"), dict):
            candidate["task"] = {"goal": "", "status": "unknown", "source_event_ids": []}
        candidate["tool_state"] = tool_state_from_log(previous=previous, events=events)
        # Approvals, open calls and unknown side effects in `pending` come from the log too;
        # the model contributes only its questions.
        model_questions = [
            p for p in candidate["pending"] if isinstance(p, dict) and p.get("kind") == "question"
        ]
        candidate["pending"] = pending_from_log(previous=previous, events=events) + model_questions
        if "narrative" in candidate and not isinstance(candidate["narrative"], str):
            candidate["narrative"] = json.dumps(candidate["narrative"], ensure_ascii=False)
        return candidate
