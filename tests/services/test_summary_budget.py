"""A fold's summary fits its thread's budget (docs/pipeline.md, "Fold with a summariser backend"):
long user requests are no longer kept until the summary alone passes the budget, which made every
context request `budget_too_small` and started a capacity fold at every append."""

from __future__ import annotations

import random
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests import factories as f
from tests.runtime.conftest import eager_tasks  # noqa: F401 (a fixture)
from threads.domain.budget import thread_budget
from threads.domain.summary_render import render_summary
from threads.domain.tokens import count_text
from threads.models import SummaryPhase, SummaryVersion, Thread
from threads.services import fold_preparation, fold_verification, folding, triggers

pytestmark = pytest.mark.django_db

WORDS = (
    "order refund customer shipping address payment invoice package delivery warehouse "
    "carrier tracking number receipt account balance credit card statement discount coupon "
    "return label damaged missing replacement schedule weekend morning evening urgent"
).split()


def _request(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(330))


@pytest.mark.usefixtures("eager_tasks")
def test_long_requests_never_make_the_context_unreadable(
    agent: APIClient, workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    thread = f.make_thread(workspace, external_id="long-requests")  # the default budget
    available = thread_budget(thread).available
    rng = random.Random(7)
    for n in range(70):
        with django_capture_on_commit_callbacks(execute=True):
            f.append(thread, f.user(_request(rng)), f.assistant(f"noted, request {n}"))
        if n % 10 == 9:
            answer = agent.get(f"/api/v1/threads/{thread.external_id}/context/")
            assert answer.status_code == 200, (n, answer.content)
    thread.refresh_from_db()
    versions = SummaryVersion.objects.filter(thread=thread)
    committed = versions.filter(phase=SummaryPhase.COMMITTED)
    # 140 events of about 240 tokens a pair: a capacity fold every few dozen events, not one
    # at every append.
    assert 2 <= committed.count() <= 15, committed.count()
    assert not versions.filter(phase=SummaryPhase.REJECTED).exists()
    limit = fold_preparation.summary_limit(thread_budget(thread), thread.low_watermark)
    for version in committed:
        assert version.tokens <= limit < available
        assert count_text(render_summary(version.content), thread.encoding) == version.tokens
    head = committed.get(version=thread.head_version)
    assert head.content["counts"]["requests_dropped"] > 0  # the log still has them


def test_a_summary_over_the_budget_fails_verification(workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="tight", context_window=3000)
    f.append(thread, f.user("hello"), f.assistant("hi"))
    version = folding.fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "t"})
    assert version is not None and version.phase == SummaryPhase.COMMITTED
    checks = {c["name"]: c for c in version.verification["checks"]}
    assert checks["fits_budget"]["ok"] is True
    Thread.objects.filter(pk=thread.pk).update(context_window=2600)  # 100 tokens available
    version.rendered = "word " * 400
    verdict = fold_verification.summary_verify(version=SummaryVersion.objects.get(pk=version.pk))
    assert verdict.ok  # the stored rendering still fits
    version.thread.refresh_from_db()
    over = fold_verification.summary_verify(version=version)
    check = next(c for c in over.checks if c.name == "fits_budget")
    assert not over.ok and not check.ok
    assert "more than the 100" in check.detail


def test_a_summary_that_must_stay_big_does_not_fold_at_every_append(
    workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Constraints are never dropped: a summary of many long ones stays above low × available,
    and the next capacity fold waits for the room between the watermarks to fill."""
    thread = f.make_thread(workspace, external_id="constraints", context_window=4500)
    rng = random.Random(3)
    for _ in range(12):
        f.append(thread, f.annotation("constraint", "user", {"text": _request(rng)[:900]}))
    f.append(thread, f.user("go"), f.assistant("ok"))
    version = folding.fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "t"})
    assert version is not None
    thread.refresh_from_db()
    budget = thread_budget(thread)
    assert version.tokens > fold_preparation.summary_limit(budget, thread.low_watermark)
    assert len(version.content["constraints"]) == 12
    room = (thread.high_watermark - thread.low_watermark) * budget.available
    high = thread.high_watermark * budget.available
    while triggers.history_tokens(thread=thread) <= high:  # past the high watermark, ...
        f.append(thread, f.user(_request(rng)[:300]), f.assistant("fine"))
        thread.refresh_from_db()
    assert triggers.history_tokens(thread=thread) - version.tokens <= room  # ... little after it
    assert triggers.capacity_trigger(thread=thread) is None
    while triggers.history_tokens(thread=thread) - version.tokens <= room:
        f.append(thread, f.user(_request(rng)[:400]), f.assistant("fine"))
        thread.refresh_from_db()
    assert triggers.capacity_trigger(thread=thread) is not None
