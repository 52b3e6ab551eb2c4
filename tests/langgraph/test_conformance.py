"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) against CtxadminSaver
over a live server: every base capability and the extended copy_thread, prune and
delete_for_runs must pass, so the level is FULL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from ctxadmin_client.langgraph import CtxadminSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from tests.langgraph.conftest import Server


@pytest.mark.asyncio
async def test_the_conformance_suite_passes_at_full_level(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    @checkpointer_test(name="CtxadminSaver")
    async def factory() -> AsyncIterator[CtxadminSaver]:
        saver = CtxadminSaver.from_url(server.url, server.api_key)
        try:
            yield saver
        finally:
            await saver.aclose()

    report = await validate(factory, progress=ProgressCallbacks.quiet())
    counts = {
        name: f"{r.tests_passed} passed, {r.tests_failed} failed"
        for name, r in report.results.items()
        if r.detected
    }
    with capsys.disabled():
        report.print_report()
        print(f"\nCtxadminSaver conformance level: {report.conformance_level()} {counts}")
    failures = [f for r in report.results.values() for f in r.failures]
    assert report.passed_all(), "\n".join(failures)
    assert report.conformance_level() == "FULL"
    for capability in ("copy_thread", "prune", "delete_for_runs"):
        result = report.results[capability]
        assert result.detected and result.passed is True and result.tests_passed > 0, capability
