"""Verification of a candidate summary before it may become head (docs/pipeline.md, "Verify").

Every check is code with a name; a failed check's detail names the offending entry or seq.
Checks never raise on malformed input: a broken shape fails `schema` and the other checks look
at whatever is well-formed, so one defect fails one check.

This module runs them in order; each family of checks is a module beside it: verify_shape
(`schema`, `enums`), verify_citations, verify_range (`cursor_continuity`, `chain_hash`),
verify_calls, verify_facts, verify_wording and verify_claims. A check's result is
verify_report's; the ledger the claim checks read, verify_ledger's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threads.domain.verify_calls import (
    check_completed_actions_match_ledger,
    check_task_status_matches_ledger,
    check_tool_status,
)
from threads.domain.verify_citations import (
    check_constraints_cited,
    check_side_effects_cited,
    check_sources_exist,
    check_sources_in_range,
)
from threads.domain.verify_claims import check_claims_match_ledger, check_narrative_matches_ledger
from threads.domain.verify_facts import (
    check_facts_cite_support,
    check_facts_current,
    check_no_model_override,
)
from threads.domain.verify_ledger import build_ledger
from threads.domain.verify_range import check_chain_hash, check_cursor_continuity
from threads.domain.verify_report import Check, Verification
from threads.domain.verify_shape import check_enums, check_schema
from threads.domain.verify_wording import (
    check_citations_fit_entries,
    check_constraints_verbatim,
    check_decisions_cite_support,
)

CHECK_NAMES = (
    "schema",
    "enums",
    "sources_exist",
    "sources_in_range",
    "side_effects_cited",
    "constraints_cited",
    "tool_status_matches_log",
    "no_model_override",
    "cursor_continuity",
    "chain_hash",
    "task_status_matches_ledger",
    "completed_actions_match_ledger",
    "facts_cite_support",
    "facts_current",
    "constraints_verbatim",
    "decisions_cite_support",
    "citations_fit_entries",
    "claims_match_ledger",
    "narrative_matches_ledger",
)


def verify_candidate(
    *,
    candidate: dict[str, Any],
    previous: dict[str, Any] | None,
    events: list[dict[str, Any]],
    base_covered_until: int,
    boundary: int,
    chain_hash_at_boundary: str,
    expected_chain_hash: str,
    cited_events: Mapping[int, Mapping[str, Any]] | None = None,
) -> Verification:
    """Run every named check (CHECK_NAMES, in that order) on a candidate summary.

    `events` are the stored events in (base_covered_until, boundary]; `previous` is the head's
    content the candidate was folded on (None for a first fold); `cited_events`, the events
    before the range that the candidate cites (by seq), which the claim checks read — a cited
    seq no one supplied is left to the other checks.
    """
    schema = check_schema(candidate)
    if not isinstance(candidate, Mapping):
        checks = [schema] + [
            Check(n, False, "the candidate is not a JSON object") for n in CHECK_NAMES[1:]
        ]
        return Verification(ok=False, checks=checks)
    seqs = {e["seq"] for e in events}
    checks = [
        schema,
        check_enums(candidate),
        check_sources_exist(candidate, previous, seqs, base_covered_until, boundary),
        check_sources_in_range(candidate, boundary),
        check_side_effects_cited(candidate, events),
        check_constraints_cited(candidate, events),
        check_tool_status(candidate, previous, events),
        check_no_model_override(candidate, previous, events),
        check_cursor_continuity(candidate, previous, events, base_covered_until, boundary),
        check_chain_hash(events, chain_hash_at_boundary, expected_chain_hash),
    ]
    ledger = build_ledger(previous, events, cited_events)
    checks += [
        check_task_status_matches_ledger(candidate, ledger),
        check_completed_actions_match_ledger(candidate, ledger),
        check_facts_cite_support(candidate, ledger),
        check_facts_current(candidate, previous, events),
        check_constraints_verbatim(candidate, ledger),
        check_decisions_cite_support(candidate, ledger),
        check_citations_fit_entries(candidate, ledger),
        check_claims_match_ledger(candidate, ledger),
        check_narrative_matches_ledger(candidate, ledger),
    ]
    return Verification(ok=all(c.ok for c in checks), checks=checks)
