"""The citation checks of a candidate summary (threads.domain.verify): every citation names an
event of the folded range or one the previous summary cited (`sources_exist`) and lies within
the boundary (`sources_in_range`); every side-effecting call, constraint and correction of the
range is cited (`side_effects_cited`, `constraints_cited`). Also what a summary cites
(`cited_seqs`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from threads.domain.entries import section_entries
from threads.domain.fold import SECTIONS
from threads.domain.markers import last_reset, retracted_items
from threads.domain.verify_report import Check, _is_int, _label, _result

LIST_SECTIONS = tuple(s for s in SECTIONS if s != "last_replies")


class _Cite:
    """One citation; its label is built only when a problem is reported."""

    __slots__ = ("section", "index", "entry", "seq")

    def __init__(self, section: str, index: int, entry: Mapping[str, Any], seq: Any) -> None:
        self.section, self.index, self.entry, self.seq = section, index, entry, seq

    @property
    def label(self) -> str:
        return "task" if self.section == "task" else _label(self.section, self.index, self.entry)


def _cited(content: Mapping[str, Any]) -> Iterator[_Cite]:
    """Every citation in the content."""
    task = content.get("task")
    if isinstance(task, Mapping) and isinstance(task.get("source_event_ids"), list):
        for seq in task["source_event_ids"]:
            yield _Cite("task", 0, task, seq)
    for section in (*LIST_SECTIONS, "last_replies"):
        for index, entry in enumerate(section_entries(content, section)):
            sources = entry.get("source_event_ids")
            if isinstance(sources, list):
                for seq in sources:
                    yield _Cite(section, index, entry, seq)


def _cited_seqs(content: Mapping[str, Any]) -> set[int]:
    seqs: set[int] = set()
    task = content.get("task")
    if isinstance(task, Mapping) and isinstance(task.get("source_event_ids"), list):
        seqs.update(s for s in task["source_event_ids"] if _is_int(s))
    for section in (*LIST_SECTIONS, "last_replies"):
        for entry in section_entries(content, section):
            sources = entry.get("source_event_ids")
            if isinstance(sources, list):
                seqs.update(s for s in sources if _is_int(s))
    return seqs


def cited_seqs(content: Any) -> set[int]:
    """Every seq the content cites (an empty set for what is not an object)."""
    return _cited_seqs(content) if isinstance(content, Mapping) else set()


def check_sources_exist(
    candidate: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    event_seqs: set[int],
    base_covered_until: int,
    boundary: int,
) -> Check:
    """Every citation is a seq number naming an event: one of the folded events, or one the
    previous summary already cited (the log before the fold is not re-read here)."""
    known = _cited_seqs(previous) if previous else set()
    problems: list[str] = []
    for cite in _cited(candidate):
        seq = cite.seq
        if not _is_int(seq):
            problems.append(f"{cite.label} cites {seq!r}, which is not an event seq")
        elif base_covered_until < seq <= boundary and seq not in event_seqs:
            problems.append(f"{cite.label} cites #{seq}, which is not among the folded events")
        elif 0 < seq <= base_covered_until and previous is not None and seq not in known:
            # The folder saw only the previous summary and the new events: an older seq it
            # cites must come from the previous summary, or it was made up.
            problems.append(f"{cite.label} cites #{seq}, which the previous summary never cited")
    return _result("sources_exist", problems, "every cited seq names an event")


def check_sources_in_range(candidate: Mapping[str, Any], boundary: int) -> Check:
    problems = [
        f"{cite.label} cites #{cite.seq}, outside (0, {boundary}]"
        for cite in _cited(candidate)
        if _is_int(cite.seq) and not 0 < cite.seq <= boundary
    ]
    return _result("sources_in_range", problems, f"every citation lies in (0, {boundary}]")


def check_side_effects_cited(
    candidate: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> Check:
    """Retracted or before a reset, a side-effecting call is still cited: tool state reports
    what the tool did, whatever the agent sees (docs/pipeline.md, "Verify")."""
    cited = _cited_seqs(candidate)
    problems = [
        f"side-effecting call #{e['seq']} {e.get('tool_name')}#{e.get('tool_call_id')} "
        "is cited by no entry"
        for e in events
        if e["kind"] == "tool_call" and e.get("side_effect") and e["seq"] not in cited
    ]
    return _result("side_effects_cited", problems, "every side-effecting call is cited")


def check_constraints_cited(
    candidate: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> Check:
    """A constraint or correction that a retraction in the range took back, or that a reset
    in the range left behind, is no longer content: it need not be cited."""
    cited = _cited_seqs(candidate)
    retracted = retracted_items(events)
    reset_at = last_reset(events) or 0
    problems = [
        f"{e.get('type')} #{e['seq']} is cited by no entry"
        for e in events
        if e["kind"] == "annotation"
        and e.get("type") in ("constraint", "correction")
        and e["seq"] not in cited
        and e["seq"] not in retracted
        and e["seq"] > reset_at
    ]
    return _result("constraints_cited", problems, "every constraint and correction is cited")
