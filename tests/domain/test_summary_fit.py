"""fit_summary (docs/pipeline.md, "Fold with a summariser backend"): the fewest oldest droppable
entries go, protected ones never, and what goes is counted."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from threads.domain.fold import fold_structured
from threads.domain.summary_fit import fit_summary
from threads.domain.summary_render import render_summary


def _words(text: str) -> int:
    return len(text.split())


def _log(requests: int, words: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "seq": 1,
            "kind": "annotation",
            "type": "constraint",
            "authority": "user",
            "payload": {"text": "never refund more than $200"},
        },
        {
            "seq": 2,
            "kind": "tool_call",
            "tool_call_id": "c1",
            "tool_name": "refund",
            "arguments": {"amount": 10},
            "side_effect": {"key": "r-1"},
        },
        {"seq": 3, "kind": "tool_result", "tool_call_id": "c1", "call_seq": 2, "status": "timeout"},
    ]
    for n in range(requests):
        seq = 4 + 2 * n
        events.append(
            {"seq": seq, "kind": "message", "role": "user", "content": f"ask{n} " * words}
        )
        events.append({"seq": seq + 1, "kind": "message", "role": "assistant", "content": "ok"})
    return events


@settings(max_examples=40, deadline=None)
@given(requests=st.integers(0, 40), words=st.integers(1, 60), limit=st.integers(50, 3000))
def test_the_fewest_oldest_entries_go(requests: int, words: int, limit: int) -> None:
    events = _log(requests, words)
    content = fold_structured(
        previous=None, events=events, covered_from=1, covered_until=events[-1]["seq"]
    )
    fitted = fit_summary(content, events=events, limit=limit, count=_words)
    # What must stay stays: the constraint and the side-effecting call's tool state.
    assert fitted["constraints"] == content["constraints"]
    assert fitted["tool_state"] == content["tool_state"]
    dropped = len(content["requests"]) - len(fitted["requests"])
    replies = len(content["last_replies"]) - len(fitted["last_replies"])
    assert fitted["counts"].get("requests_dropped", 0) == (
        content["counts"].get("requests_dropped", 0) + dropped
    )
    assert fitted["counts"].get("last_replies_dropped", 0) == (
        content["counts"].get("last_replies_dropped", 0) + replies
    )
    if content["requests"]:
        assert fitted["requests"][-1] == content["requests"][-1]  # the newest stays
    kept = [r["seq"] for r in fitted["requests"]]
    assert kept == [r["seq"] for r in content["requests"]][dropped:]  # the oldest went
    if _words(render_summary(content)) <= limit:
        assert fitted == content
    elif len(fitted["requests"]) > 1 or len(fitted["last_replies"]) > 1:
        # Something droppable is left (the newest request and reply never are): it fits.
        assert _words(render_summary(fitted)) <= limit
        # One entry fewer dropped would not have fitted: put the newest dropped back.
        if dropped:
            back = {**fitted, "requests": [content["requests"][dropped - 1], *fitted["requests"]]}
            back["counts"] = {
                **fitted["counts"],
                "requests_dropped": fitted["counts"]["requests_dropped"] - 1,
            }
            assert _words(render_summary(back)) > limit or replies
