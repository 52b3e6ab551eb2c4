"""The text the agent receives for a summary (docs/pipeline.md, "Fold with a summariser backend"):
compact, sectioned, deterministic; and the one rendering of a summary entry as text (`entry_text`),
which the dashboard shows too, so that a person reads each entry as the agent does.

Same content, same text, byte for byte: its token count is what the budget counts. Citations are
written `[#seq]`. Empty sections are left out, and so is the narrative: free text that
verification cannot check is not given to the agent (docs/pipeline.md, "Verify").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from threads.domain.entries import json_text, section_entries
from threads.domain.fold import SECTION_TITLES


def _cite(entry: Mapping[str, Any]) -> str:
    seqs = entry.get("source_event_ids") or []
    return " " + "".join(f"[#{s}]" for s in seqs) if seqs else ""


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _section(title: str, lines: Iterable[str]) -> list[str]:
    body = list(lines)
    return [f"## {title}", *body, ""] if body else []


def entry_text(section: str, entry: Mapping[str, Any]) -> str:
    """An entry of `section` as one line of text, without its citations and the marks the
    agent's text adds (authority, expiry, blocking...): a fact `key = <JSON value>`, a tool's
    state `tool#call: status`, a pending item `kind: ref`, a completed action its text, any
    other entry its `text`."""
    if section == "facts":
        return f"{entry.get('key')} = {json_text(entry.get('value'))}"
    if section == "tool_state":
        return f"{entry.get('tool')}#{entry.get('tool_call_id')}: {entry.get('status')}"
    if section == "pending":
        return f"{entry.get('kind')}: {_one_line(entry.get('ref', ''))}"
    if section == "completed_actions":
        return _one_line(entry.get("action", ""))
    if section == "constraints":
        return str(entry.get("text", ""))
    return _one_line(entry.get("text", ""))


def render_summary(content: Mapping[str, Any]) -> str:
    covered = content.get("covered") or {}
    task = content.get("task") or {}
    counts = content.get("counts") or {}
    out: list[str] = [
        f"# Summary of events #{covered.get('from_seq', '?')}–#{covered.get('to_seq', '?')}",
        "",
    ]
    if task.get("goal") or task.get("status"):
        out += _section(
            "Goal",
            [
                f"{_one_line(task.get('goal') or '(not stated)')}{_cite(task)}",
                f"status: {task.get('status', 'unknown')}",
            ],
        )
    out += _section(
        SECTION_TITLES["constraints"],
        (
            f"- {entry_text('constraints', c)}"
            + (" (expired)" if c.get("status") == "expired" else "")
            + _cite(c)
            for c in section_entries(content, "constraints")
        ),
    )
    facts = section_entries(content, "facts")
    out += _section(
        SECTION_TITLES["facts"],
        (
            f"- {entry_text('facts', f)} ({f.get('authority')}, {f.get('confidence')})"
            + (
                f"; was {json_text(f.get('previous_value'))}"
                if f.get("previous_value") is not None
                else ""
            )
            + _cite(f)
            for f in facts
            if f.get("status") == "active"
        ),
    )
    out += _section(
        SECTION_TITLES["tool_state"],
        (
            f"- {entry_text('tool_state', t)}"
            + (f" side effect key={t.get('idempotency_key')}" if t.get("side_effect") else "")
            + _cite(t)
            for t in section_entries(content, "tool_state")
            if t.get("side_effect") or t.get("status") not in ("succeeded",)
        ),
    )
    out += _section(
        SECTION_TITLES["pending"],
        (
            f"- {entry_text('pending', p)}"
            + (" (blocking)" if p.get("blocking") else "")
            + _cite(p)
            # Questions have their own section below.
            for p in section_entries(content, "pending")
            if p.get("kind") != "question"
        ),
    )
    out += _section(
        SECTION_TITLES["completed_actions"],
        (
            f"- {entry_text('completed_actions', a)}{_cite(a)}"
            for a in section_entries(content, "completed_actions")
        ),
    )
    out += _section(
        SECTION_TITLES["decisions"],
        (
            f"- {entry_text('decisions', d)}{_cite(d)}"
            for d in section_entries(content, "decisions")
        ),
    )
    out += _section(
        SECTION_TITLES["open_questions"],
        (
            f"- {entry_text('open_questions', q)}{_cite(q)}"
            for q in section_entries(content, "open_questions")
        ),
    )
    out += _section(
        SECTION_TITLES["requests"],
        (
            f"- {entry_text('requests', r)}" + (" […]" if r.get("truncated") else "") + _cite(r)
            for r in section_entries(content, "requests")
        ),
    )
    out += _section(
        SECTION_TITLES["last_replies"],
        (
            f"- {entry_text('last_replies', r)}" + (" […]" if r.get("truncated") else "") + _cite(r)
            for r in section_entries(content, "last_replies")
        ),
    )
    # The narrative (the llm backend's free text) is never part of the agent's text: prose
    # cannot be checked as the sections are, so it is shown to people only, marked unverified
    # (docs/pipeline.md, "Verify").
    omitted = {k: v for k, v in sorted(counts.items()) if k.endswith("_dropped") and v}
    if omitted:
        out += _section(
            "Older material (in the log, not repeated here)",
            (
                f"- {name.removesuffix('_dropped').replace('_', ' ')}: {count}"
                for name, count in omitted.items()
            ),
        )
    return "\n".join(out).rstrip() + "\n"
