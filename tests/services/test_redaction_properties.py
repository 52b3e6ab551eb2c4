"""A property of forgetting (docs/event-log.md, "Redaction"): any sequence of appends, folds (the
deterministic structured summariser), rollbacks and redactions keeps the thread's chain
verifiable end to end, reports exactly the redacted seqs, lets every later fold pass its own
verification (whose chain check crosses the redactions), and leaves every summary's citations
resolvable. Few, small examples: it runs in the suite."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import factories as f
from threads.domain.verify_citations import cited_seqs
from threads.models import Checkpoint, Event, SummaryPhase, SummaryVersion, Thread
from threads.services.folding import fold_run
from threads.services.integrity import integrity_check
from threads.services.redaction import event_redact
from threads.services.rollback import checkpoint_rollback

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "test"}
OPERATIONS = st.lists(st.sampled_from(["turn", "fold", "rollback", "redact"]), max_size=7)
_names = itertools.count()


def _turn(thread: Thread, n: int, tool: bool) -> None:
    bodies: list[dict[str, Any]] = [f.user(f"question {n} token-{n}-secret")]
    if tool:
        bodies += [f.call(f"c{n}", "lookup", {"n": n}), f.result(f"c{n}", value={"n": n})]
    bodies.append(f.assistant(f"answer {n}"))
    f.append(thread, *bodies)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS, data=st.data())
def test_appends_folds_rollbacks_and_redactions_keep_every_chain_verifiable(
    workspace: Any, operations: list[str], data: st.DataObject
) -> None:
    thread = f.make_thread(workspace, f"prop-{next(_names)}")
    admin = f.make_person(workspace, f"ada-{thread.external_id}", "admin")
    redacted: set[int] = set()
    _turn(thread, 0, tool=True)
    for step, operation in enumerate(operations, start=1):
        thread.refresh_from_db()
        if operation == "turn":
            _turn(thread, step, tool=data.draw(st.booleans(), label="tool"))
        elif operation == "fold":
            version = fold_run(thread_id=thread.pk, trigger=MANUAL)
            if version is not None:
                # The fold's verification walks the chain across the redactions.
                assert version.phase == SummaryPhase.COMMITTED, version.verification
        elif operation == "rollback":
            safe = list(
                Checkpoint.objects.filter(
                    thread=thread, safe=True, summary_version__isnull=False
                ).order_by("pk")
            )
            if safe:
                chosen = data.draw(st.sampled_from(safe), label="checkpoint")
                checkpoint_rollback(thread=thread, checkpoint=chosen, actor=admin, reason="prop")
        else:
            candidates = sorted(
                set(Event.objects.filter(thread=thread).values_list("seq", flat=True)) - redacted
            )
            if candidates:  # every event may be redacted already
                seq = data.draw(st.sampled_from(candidates), label="redact")
                event_redact(thread=thread, seq=seq, actor=admin, reason=f"step {step}")
                redacted.add(seq)
    thread.refresh_from_db()
    verdict = integrity_check(thread=thread, full=True)
    assert verdict.ok, verdict.detail
    assert verdict.redactions == tuple(f"redacted at seq {seq}" for seq in sorted(redacted))
    for version in SummaryVersion.objects.filter(thread=thread):
        assert cited_seqs(version.content) <= set(range(1, thread.last_seq + 1))
