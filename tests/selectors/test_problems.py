"""A thread's open problems (docs/dashboard.md, "Problems and what to do"): each kind appears
with the link that acts on it, most severe first; a thread with none has none."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests import factories as f
from tests.views.conftest import build_story
from threads.domain.problems import (
    AGENT_STALLED,
    APPROVAL_PENDING,
    CHAIN_BROKEN,
    FOLD_FAILED,
    FOLD_REJECTED,
    OVER_BUDGET,
    PINNED,
    PROBLEM_KINDS,
    SECOND_RESULT,
    SIDE_EFFECT_RUNNING,
    SIDE_EFFECT_UNKNOWN,
)
from threads.models import (
    Event,
    SideEffect,
    SummaryPhase,
    SummaryVersion,
    TaskRun,
    TaskState,
    Thread,
)
from threads.selectors import thread_problems, threads_in
from threads.services.integrity import integrity_check
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db


def every_problem(workspace: Any) -> Thread:
    """A thread with one problem of every kind."""
    thread = build_story(f.make_thread(workspace, external_id="order-10086"))
    f.append(
        thread,
        # a refund whose result never came: running
        f.call("c3", "refund", {"order": 10087}, side_effect_key="refund-10087"),
        # a refund that came back twice
        f.call("c4", "refund", {"order": 10088}, side_effect_key="refund-10088"),
        f.result("c4", value="refunded"),
        f.result("c4", value="refunded again"),
    )
    head = thread.head_version
    SummaryVersion.objects.create(
        thread=thread,
        version=head + 1,
        base_version=head,
        phase=SummaryPhase.REJECTED,
        covered_from=1,
        covered_until=thread.last_seq,
        chain_hash="0" * 64,
        backend=thread.summarizer,
        checksum="0" * 64,
        content={},
        rendered="",
    )
    TaskRun.objects.create(
        id="fold-1", workspace=workspace, thread=thread, kind="fold", state=TaskState.FAILURE
    )
    Thread.objects.filter(pk=thread.pk).update(
        fold_task_id="fold-1",
        # a window the history no longer fits under the high watermark
        context_window=60,
        reserved_output=0,
        reasoning_reserve=0,
        safety_margin=0,
        fixed_tokens=1,
        pinned_at=timezone.now(),
        pinned_by="ada",
        pin_reason="checking the refunds by hand",
    )
    f.tamper(Event.objects.get(thread=thread, seq=5), content="I never asked for a refund")
    integrity_check(thread=thread, full=True)
    thread.refresh_from_db()
    return thread


def test_every_kind_appears_most_severe_first(workspace: Any) -> None:
    thread = every_problem(workspace)
    problems = thread_problems(thread=thread)
    assert [p.kind for p in problems] == [
        CHAIN_BROKEN,
        SIDE_EFFECT_UNKNOWN,
        SECOND_RESULT,
        APPROVAL_PENDING,
        SIDE_EFFECT_RUNNING,
        FOLD_FAILED,
        FOLD_REJECTED,
        OVER_BUDGET,
        PINNED,
    ]
    # A stalled agent cannot be one of them: a thread that waits for a person is not stalled
    # (docs/dashboard.md, "Run status"); tests/api/test_run_status.py shows that kind.
    assert [p.kind for p in problems] == [k for k in PROBLEM_KINDS if k != AGENT_STALLED]
    assert [p.severity for p in problems] == sorted((p.severity for p in problems), reverse=True)
    by_kind = {p.kind: p for p in problems}
    unknown = SideEffect.objects.get(thread=thread, idempotency_key="refund-10086")
    running = SideEffect.objects.get(thread=thread, idempotency_key="refund-10087")
    twice = SideEffect.objects.get(thread=thread, idempotency_key="refund-10088")
    assert by_kind[SIDE_EFFECT_UNKNOWN].target.endswith(f"#effect-{unknown.pk}")
    assert "status=unknown" in by_kind[SIDE_EFFECT_UNKNOWN].target
    assert by_kind[SIDE_EFFECT_RUNNING].target.endswith(f"#effect-{running.pk}")
    assert by_kind[SECOND_RESULT].target.endswith(f"#effect-{twice.pk}")
    assert by_kind[APPROVAL_PENDING].target.startswith("/approvals/?thread=order-10086#approval-")
    assert by_kind[CHAIN_BROKEN].target == "/integrity/"
    assert "#5" in by_kind[CHAIN_BROKEN].text
    assert by_kind[FOLD_REJECTED].target.endswith(f"/summaries/{thread.head_version + 1}/")
    assert "ada" in by_kind[PINNED].text and "by hand" in by_kind[PINNED].text


def test_a_thread_without_problems_has_none(workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="quiet")
    f.append(thread, f.user("hello"), f.assistant("hi"))
    assert thread_problems(thread=thread) == []


def test_a_resolved_side_effect_leaves_the_problems(
    workspace: Any,
) -> None:
    thread = build_story(f.make_thread(workspace, external_id="order-1"))
    assert {p.kind for p in thread_problems(thread=thread)} == {
        SIDE_EFFECT_UNKNOWN,
        APPROVAL_PENDING,
    }
    side_effect_resolve(
        side_effect=SideEffect.objects.get(thread=thread, tool_call_id="c2"),
        actor=None,
        actor_label="status check",
        status="succeeded",
        evidence="bank statement shows the refund",
    )
    assert [p.kind for p in thread_problems(thread=thread)] == [APPROVAL_PENDING]


def test_the_list_sorts_the_most_severe_thread_first(workspace: Any) -> None:
    """One chain broken outweighs an unknown side effect and a pending approval together."""
    quiet = f.make_thread(workspace, external_id="quiet")
    f.append(quiet, f.user("hello"))
    story = build_story(f.make_thread(workspace, external_id="story"))
    broken = f.make_thread(workspace, external_id="broken")
    f.append(broken, f.user("cancel my order"), f.assistant("cancelled"))
    f.tamper(Event.objects.get(thread=broken, seq=2), content="refunded $900")
    integrity_check(thread=broken, full=True)
    Thread.objects.filter(pk=quiet.pk).update(updated_at=timezone.now())
    ids = [workspace.pk]
    order = [t.external_id for t in threads_in(workspace_ids=ids, sort="-severity")]
    assert order == ["broken", "story", "quiet"]
    assert [t.external_id for t in threads_in(workspace_ids=ids)][0] == "quiet"
    assert story.external_id in order
