"""Version-to-version diff, citations, and important events no entry cites."""

from __future__ import annotations

from tests.domain.eventlog import Log
from threads.domain.diff import citations, diff_versions, uncited_important
from threads.domain.fold import fold_structured


def two_versions() -> tuple[Log, dict, dict]:
    log = Log()
    log.user("refund order 1")
    log.call("c1", "get_order")
    log.result("c1", facts=[{"key": "order.total", "value": 80}])
    old = fold_structured(previous=None, events=log.events, covered_from=1, covered_until=3)
    log.annotate("correction", "user", {"key": "order.total", "value": 70})
    log.annotate("constraint", "user", {"text": "at most 50 EUR"})
    new = fold_structured(previous=old, events=log.events[3:], covered_from=4, covered_until=5)
    return log, old, new


def test_diff_reports_added_and_changed_entries() -> None:
    _, old, new = two_versions()
    diff = diff_versions(old, new)
    assert diff["covered"] == {
        "old": {"from_seq": 1, "to_seq": 3},
        "new": {"from_seq": 1, "to_seq": 5},
    }
    facts = diff["sections"]["facts"]
    [changed] = facts["changed"]
    assert changed["label"] == "fact order.total"
    assert changed["fields"]["status"] == {"old": "active", "new": "superseded"}
    [added] = facts["added"]
    assert (added["value"], added["previous_value"]) == (70, 80)
    assert [c["text"] for c in diff["sections"]["constraints"]["added"]] == ["at most 50 EUR"]
    assert "tool_state" not in diff["sections"]
    assert diff["counts"]["added"] == 2 and diff["counts"]["removed"] == 0


def test_diff_of_identical_versions_is_empty_and_reverse_removes() -> None:
    _, old, new = two_versions()
    assert diff_versions(new, new)["sections"] == {}
    assert diff_versions(new, new)["counts"] == {"added": 0, "removed": 0, "changed": 0}
    reverse = diff_versions(new, old)
    assert [c["text"] for c in reverse["sections"]["constraints"]["removed"]] == ["at most 50 EUR"]


def test_citations_map_seqs_to_entries() -> None:
    _, _, new = two_versions()
    cited = citations(new)
    assert "fact order.total" in cited[4]
    assert "constraint at most 50 EUR" in cited[5]
    assert "tool get_order#c1" in cited[2]
    assert list(cited) == sorted(cited)


def test_uncited_important_finds_what_no_entry_cites() -> None:
    log, _, new = two_versions()
    assert uncited_important(new, log.events) == []
    new["constraints"] = []
    assert uncited_important(new, log.events) == [
        {"seq": 5, "kind": "annotation", "reason": "uncited constraint"}
    ]
    side = Log()
    side.user("go")
    side.call("r", "refund", side_effect=True)
    side.result("r")
    content = fold_structured(previous=None, events=side.events, covered_from=1, covered_until=3)
    content["tool_state"], content["completed_actions"] = [], []
    assert uncited_important(content, side.events) == [
        {"seq": 2, "kind": "tool_call", "reason": "uncited side-effecting tool call"}
    ]
    # Events outside the covered range are not the summary's business.
    assert uncited_important(
        content, side.events + [side.call("r2", "refund", side_effect=True)]
    ) == [{"seq": 2, "kind": "tool_call", "reason": "uncited side-effecting tool call"}]
