"""The checks that a candidate continues its head (threads.domain.verify): the folded events are
exactly those after the head's covered_until up to the boundary (`cursor_continuity`), and the
chain hash at the boundary is the expected one (`chain_hash`).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from threads.domain.verify_report import Check, _result


def check_cursor_continuity(
    candidate: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    base_covered_until: int,
    boundary: int,
) -> Check:
    problems: list[str] = []
    covered = candidate.get("covered")
    covered = covered if isinstance(covered, Mapping) else {}
    if boundary < base_covered_until:
        problems.append(
            f"boundary {boundary} is before the head's covered_until {base_covered_until}"
        )
    if covered.get("to_seq") != boundary:
        problems.append(f"covered.to_seq is {covered.get('to_seq')!r}, the boundary is {boundary}")
    prev_covered = (previous or {}).get("covered")
    expected_from = prev_covered.get("from_seq") if isinstance(prev_covered, Mapping) else None
    if expected_from is not None and covered.get("from_seq") != expected_from:
        problems.append(
            f"covered.from_seq is {covered.get('from_seq')!r}; the previous summary starts at "
            f"{expected_from}"
        )
    seqs = [e["seq"] for e in events]
    if seqs != list(range(base_covered_until + 1, boundary + 1)):
        gaps = sorted(set(range(base_covered_until + 1, boundary + 1)) - set(seqs))
        problems.append(
            f"the folded events are not exactly #{base_covered_until + 1}..#{boundary}"
            + (f" (missing #{gaps[0]})" if gaps else "")
        )
    return _result(
        "cursor_continuity", problems, f"continues from {base_covered_until} to {boundary}"
    )


def _short(value: str) -> str:
    """A digest shortened for reading; anything else (a caller's explanation) in full."""
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"
    return repr(value)


def check_chain_hash(
    events: Sequence[Mapping[str, Any]], chain_hash_at_boundary: str, expected_chain_hash: str
) -> Check:
    problems: list[str] = []
    if not hmac.compare_digest(str(chain_hash_at_boundary), str(expected_chain_hash)):
        problems.append(
            f"chain hash at the boundary {_short(chain_hash_at_boundary)} differs from the "
            f"expected {_short(expected_chain_hash)}"
        )
    if (
        events
        and events[-1].get("hash") is not None
        and not hmac.compare_digest(str(events[-1]["hash"]), str(chain_hash_at_boundary))
    ):
        problems.append(f"event #{events[-1]['seq']} carries another hash than the boundary's")
    return _result("chain_hash", problems, "chain hash at the boundary matches")
