"""/metrics: exact values after a scripted run, its protection, and a bounded scrape
(docs/operations.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from tests import factories as f
from threads.models import ContextRequestLog, Event, SummaryPhase, SummaryVersion, Thread
from threads.services import fold_preparation, fold_recovery, folding
from threads.services.integrity import integrity_check
from threads.services.metrics import CONTEXT_SECONDS

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

MANUAL = {"kind": "manual", "reason": "test"}
TOKEN = "s3cret-metrics-token"


def _unit(thread: Thread, n: int) -> None:
    f.append(
        thread,
        f.user(f"question {n}"),
        f.call(f"c{n}", "lookup", {"n": n}),
        f.result(f"c{n}", value={"n": n}),
        f.assistant(f"answer {n}"),
    )


def scrape(client: Client | APIClient, **headers: Any) -> dict[str, dict[tuple, float]]:
    """{sample name: {labels as sorted tuples: value}}."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def one(samples: dict[str, dict[tuple, float]], name: str, **labels: str) -> float:
    return samples[name][tuple(sorted(labels.items()))]


def _timed() -> float:
    """How many context requests this process's histogram holds."""
    (family,) = CONTEXT_SECONDS.collect()
    return next(s.value for s in family.samples if s.name.endswith("_count"))


@pytest.fixture
def with_token(settings: Any) -> None:
    settings.CTXADMIN_METRICS_TOKEN = TOKEN


def test_each_counter_holds_the_exact_expected_value(
    thread: Thread, agent: APIClient, with_token: None
) -> None:
    # The latency histogram is this process's: other tests' requests are in it already.
    timed_before = _timed()
    # A fold that commits.
    _unit(thread, 1)
    first = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert first is not None
    assert folding.summary_decide(version=first) == folding.Outcome.COMMITTED
    # Two folds racing on one head: one commits, the other loses the compare-and-swap.
    _unit(thread, 2)
    loser = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    winner = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert loser is not None and winner is not None
    assert folding.summary_decide(version=winner) == folding.Outcome.COMMITTED
    assert folding.summary_decide(version=loser) == folding.Outcome.DISCARDED
    # A prepared candidate whose worker died, committed by recovery.
    _unit(thread, 3)
    orphan = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert orphan is not None
    assert [v.pk for v in fold_recovery.recover_prepared(older_than=timedelta(0))] == [orphan.pk]
    # A candidate changed after it was prepared: rejected by its checksum.
    _unit(thread, 4)
    changed = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert changed is not None
    SummaryVersion.objects.filter(pk=changed.pk).update(
        content={**changed.content, "narrative": "edited behind the pipeline's back"}
    )
    changed.refresh_from_db()
    assert folding.summary_decide(version=changed) == folding.Outcome.REJECTED
    # Side effects: one timed out (unknown), one still running; one approval pending.
    f.append(
        thread,
        f.user("refund"),
        f.call("r1", "refund", {"amount": 5}, side_effect_key="k1"),
        f.result("r1", status="timeout"),
        f.call("r2", "refund", {"amount": 6}, side_effect_key="k2"),
        {
            "kind": "approval_request",
            "action": "retry refund",
            "tool_name": "refund",
            "arguments": {"amount": 5},
        },
    )
    # Context requests: one answered, one that needs a fold, one too small (422).
    url = f"/api/v1/threads/{thread.pk}/context/"
    answer = agent.get(url)
    assert answer.status_code == 200 and answer.json()["needs_fold"] is False
    budget = answer.json()["budget"]
    overhead = budget["window"] - budget["available"]
    tight = agent.get(url, {"window": overhead + budget["used"] + 1})
    assert tight.status_code == 200 and tight.json()["needs_fold"] is True
    small = agent.get(url, {"window": 1})
    assert small.status_code == 422 and small.json()["error"]["code"] == "budget_too_small"
    # Each request is also a row for the Operations page, with the numbers it was judged by.
    logged = list(
        ContextRequestLog.objects.order_by("pk").values_list(
            "used", "available", "overflow", "needs_fold"
        )
    )
    refused = small.json()["error"]["fields"]
    assert logged == [
        (budget["used"], budget["available"], False, False),
        (tight.json()["budget"]["used"], tight.json()["budget"]["available"], False, True),
        (refused["history"], refused["available"], True, False),
    ]
    # Integrity: two checks, the second after an edit behind the application's back.
    integrity_check(thread=thread)
    f.tamper(Event.objects.get(thread=thread, seq=2), arguments={"n": 99})
    integrity_check(thread=thread, full=True)

    samples = scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    kinds = {"message": 4 * 2 + 1, "tool_call": 4 + 2, "tool_result": 4 + 1}
    kinds["approval_request"] = 1
    for kind, n in kinds.items():
        assert one(samples, "ctxadmin_events_appended_total", kind=kind) == n
    assert one(samples, "ctxadmin_events_appended_total", kind="annotation") == 0
    assert sum(samples["ctxadmin_events_appended_total"].values()) == Event.objects.count()
    assert one(samples, "ctxadmin_context_requests_total") == 3
    assert one(samples, "ctxadmin_context_overflows_total") == 1
    assert one(samples, "ctxadmin_context_needs_fold_total") == 1
    assert one(samples, "ctxadmin_context_request_seconds_count") - timed_before == 3
    assert one(samples, "ctxadmin_folds_total", outcome="started") == 5
    assert one(samples, "ctxadmin_folds_total", outcome="committed") == 3
    assert one(samples, "ctxadmin_folds_total", outcome="rejected") == 1
    assert one(samples, "ctxadmin_folds_total", outcome="discarded") == 1
    assert samples["ctxadmin_fold_rejections_total"] == {(("check", "checksum"),): 1}
    assert one(samples, "ctxadmin_cas_conflicts_total") == 1
    assert one(samples, "ctxadmin_prepared_recovered_total") == 1
    committed = SummaryVersion.objects.filter(phase=SummaryPhase.COMMITTED)
    assert [v.pk for v in committed.order_by("version")] == [first.pk, winner.pk, orphan.pk]
    assert one(samples, "ctxadmin_tokens_replaced_total") == sum(
        v.tokens_replaced for v in committed
    )
    assert one(samples, "ctxadmin_summary_tokens_total") == sum(v.tokens for v in committed)
    # The committed folds cover 1–4, 5–8 and 9–12.
    assert one(samples, "ctxadmin_tokens_replaced_total") == sum(
        Event.objects.filter(seq__lte=12).values_list("token_count", flat=True)
    )
    assert one(samples, "ctxadmin_verify_runs_total") == 2
    assert one(samples, "ctxadmin_chain_breaks") == 1
    assert one(samples, "ctxadmin_side_effects", status="unknown") == 1
    assert one(samples, "ctxadmin_side_effects", status="running") == 1
    assert one(samples, "ctxadmin_side_effects", status="succeeded") == 0
    assert one(samples, "ctxadmin_approvals_pending") == 1
    assert 0 <= one(samples, "ctxadmin_approval_oldest_pending_seconds") < 60


def test_the_dashboard_context_page_is_not_an_api_context_request(
    thread: Thread, operator_client: APIClient, with_token: None
) -> None:
    _unit(thread, 1)
    assert operator_client.get(f"/threads/{thread.pk}/context/").status_code == 200
    samples = scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert one(samples, "ctxadmin_context_requests_total") == 0


def test_a_token_when_set_is_required(with_token: None) -> None:
    client = Client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=TOKEN).status_code == 401
    scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
def test_the_token_scheme_is_case_insensitive(with_token: None, scheme: str) -> None:
    scrape(Client(), HTTP_AUTHORIZATION=f"{scheme} {TOKEN}")
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"{scheme} wrong").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401


def test_without_a_token_only_loopback_may_read(settings: Any) -> None:
    settings.CTXADMIN_METRICS_TOKEN = ""
    client = Client()
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.7").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.2").status_code == 403
    scrape(client, REMOTE_ADDR="127.0.0.1")
    scrape(client, REMOTE_ADDR="::1")


def test_a_scrape_takes_a_fixed_number_of_queries(
    workspace: Any, django_assert_num_queries: Any, with_token: None
) -> None:
    client = Client()

    def run() -> None:
        assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200

    with django_assert_num_queries(7):
        run()
    for n in range(3):
        thread = f.make_thread(workspace, external_id=f"t-{n}")
        _unit(thread, n)
        version = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
        assert version is not None
        folding.summary_decide(version=version)
    with django_assert_num_queries(7):
        run()
