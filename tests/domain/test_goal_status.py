"""The summary's task status follows the side-effect ledger (docs/pipeline.md,
"Fold with a summariser backend"): an operator's resolution settles the call, and the task no longer
reads unknown or running."""

from __future__ import annotations

import pytest

from tests.domain.eventlog import Log
from threads.domain.fold import fold_structured


def _fold(log: Log, previous: dict | None = None, start: int = 0) -> dict:
    return fold_structured(
        previous=previous,
        events=log.events[start:],
        covered_from=start + 1,
        covered_until=log.last_seq,
    )


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
@pytest.mark.parametrize("replied", [True, False], ids=["agent-replied", "run-died"])
def test_a_resolution_refolded_leaves_the_task_neither_unknown_nor_running(
    outcome: str, replied: bool
) -> None:
    log = Log()
    log.user("refund order 1")
    call = log.call("r1", "refund", side_effect=True, key="idem-1")
    log.result("r1", "timeout")
    if replied:
        log.assistant("the refund timed out; I cannot tell whether it went through")
    first = _fold(log)
    assert first["task"]["status"] == "unknown"

    covered = log.last_seq
    log.resolve(call["seq"], outcome)
    rolled = _fold(log, previous=first, start=covered)
    at_once = _fold(log)
    for content in (rolled, at_once):
        assert content["task"]["status"] == "waiting_for_user", content["task"]
        [entry] = [t for t in content["tool_state"] if t["tool_call_id"] == "r1"]
        assert entry["status"] == outcome


def test_the_agent_acting_after_a_resolution_sets_the_status_again() -> None:
    log = Log()
    log.user("refund order 1")
    call = log.call("r1", "refund", side_effect=True)
    log.result("r1", "timeout")
    log.resolve(call["seq"], "succeeded")
    log.call("n1", "notify_customer")
    content = _fold(log)
    assert content["task"]["status"] == "running"  # the notify call has no result yet
