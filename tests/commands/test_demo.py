"""The demo command loads the four scenarios, people and tau-bench threads, idempotently,
and counts tokens with no network."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from threads.models import (
    ApiKey,
    ApprovalRequest,
    Event,
    Membership,
    SideEffect,
    SummaryVersion,
    Thread,
)
from threads.selectors import active_constraints
from threads.services.fold_verification import summary_verify

SCENARIOS = ("order-10086", "refund-4471", "email-board-q3", "review-pr-482")


def _counts() -> dict[str, int]:
    return {
        "threads": Thread.objects.count(),
        "events": Event.objects.count(),
        "versions": SummaryVersion.objects.count(),
        "keys": ApiKey.objects.count(),
        "members": Membership.objects.count(),
        "effects": SideEffect.objects.count(),
        "approvals": ApprovalRequest.objects.count(),
    }


@pytest.mark.django_db(transaction=True)
def test_demo_twice_is_idempotent_and_creates_the_scenarios() -> None:
    out = io.StringIO()
    call_command("demo", "--no-serve", "--tau", "3", stdout=out)
    first = _counts()
    call_command("demo", "--no-serve", "--tau", "3", stdout=io.StringIO())
    assert _counts() == first

    text = out.getvalue()
    assert "http://127.0.0.1:8000/" in text
    for username in ("operator", "reviewer", "admin"):
        assert f"username {username}" in text
    roles = dict(
        Membership.objects.filter(workspace__name="demo").values_list("user__username", "role")
    )
    assert roles == {"operator": "operator", "reviewer": "reviewer", "admin": "admin"}
    threads = {t.external_id: t for t in Thread.objects.filter(workspace__name="demo")}
    # The scenarios, the LangGraph thread, the summary history and the tau-bench threads.
    assert set(SCENARIOS) <= set(threads) and len(threads) == 4 + 1 + 1 + 3

    order = threads["order-10086"]
    effect = SideEffect.objects.get(thread=order)
    assert (effect.status, effect.request_id) == ("succeeded", "req_7f3a9c")
    assert effect.result_seq is not None
    result = Event.objects.get(thread=order, seq=effect.result_seq)
    assert {
        "key": "order.10086.address",
        "value": "221B Baker Street, London NW1 6XE",
    } in result.data["verified_facts"]
    assert Event.objects.filter(
        thread=order, kind="annotation", data__type="constraint", data__authority="user"
    ).exists()

    refund = threads["refund-4471"]
    assert SideEffect.objects.get(thread=refund).status == "unknown"
    assert ApprovalRequest.objects.get(thread=refund).status == "pending"
    assert [c["text"] for c in active_constraints(thread_ids={refund.pk})[refund.pk]] == [
        "Never refund the same order twice."
    ]

    email = threads["email-board-q3"]
    constraint = Event.objects.get(thread=email, kind="annotation")
    assert "draft only" in constraint.data["payload"]["text"].lower()
    assert Event.objects.filter(thread=email, kind="message", role="user").count() >= 10

    review = threads["review-pr-482"]
    calls = Event.objects.filter(thread=review, kind="tool_call")
    assert calls.count() == 60
    sizes = [
        len(str(e.data.get("result", "")))
        for e in Event.objects.filter(thread=review, kind="tool_result")
    ]
    assert min(sizes) > 2000
    for external_id in SCENARIOS:
        assert threads[external_id].head_version >= 1  # folded, with a checkpoint
        assert threads[external_id].checkpoints.exists()

    # The live LangGraph thread: its checkpoints listed as ctxadmin ones, paused on a refund.
    agent = threads["langgraph-order-5521"]
    labels = list(agent.checkpoints.values_list("label", flat=True))
    assert len(labels) >= 5 and all(label.startswith("langgraph:") for label in labels)
    assert LanggraphCheckpoint.objects.filter(thread=agent).count() == len(labels)
    [approval] = ApprovalRequest.objects.filter(thread=agent)
    assert (approval.status, approval.action) == ("pending", "langgraph.interrupt")
    assert approval.arguments["value"] == {"action": "refund", "order_id": "5521", "amount": 89.9}
    assert Event.objects.filter(thread=agent, kind="tool_result").count() == 1
    assert "LangGraph agent on thread langgraph-order-5521" in text


def test_demo_counts_tokens_with_no_network(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("`unshare` is not installed, so the network cannot be taken away")
    cache = tmp_path / "tiktoken"
    cache.mkdir()
    database = tmp_path / "demo.sqlite3"
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(cache),
        "CTXADMIN_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{database}",
    }
    # No network, but a loopback interface, as every machine has (the demo's lying summariser
    # listens on it): a new network namespace has its `lo` down.
    command = [
        unshare,
        "-n",
        "sh",
        "-c",
        'ip link set lo up 2>/dev/null; exec "$@"',
        "sh",
        sys.executable,
        str(settings.BASE_DIR / "manage.py"),
        "demo",
        "--no-serve",
        "--tau",
        "2",
    ]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, cwd=settings.BASE_DIR
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(database) as db:
        count, smallest = db.execute(
            "SELECT count(*), min(token_count) FROM threads_event"
        ).fetchone()
    assert count > 200 and smallest > 0


@pytest.mark.django_db(transaction=True)
def test_the_demo_ships_a_summary_history_with_a_lie_the_verifier_refused() -> None:
    """refund-5190: several versions, a lying llm candidate refused by the real verifier (run
    again here, it refuses it again: the refusal is the verifier's, not written as one) while
    the honest versions pass it, and a rollback — what the summaries, diff and checkpoints
    tabs show."""
    out = io.StringIO()
    call_command("demo", "--no-serve", "--tau", "0", stdout=out)
    thread = Thread.objects.get(external_id="refund-5190")
    versions = {v.version: v for v in SummaryVersion.objects.filter(thread=thread)}
    phases = [versions[n].phase for n in sorted(versions)]
    assert len(versions) >= 5
    [lie] = [v for v in versions.values() if v.phase == "rejected"]
    assert lie.backend == "llm" and lie.content["task"]["status"] == "succeeded"
    # The log says the refund's outcome is unknown: the verifier refuses the claim, and only it.
    assert not summary_verify(version=lie).ok
    for version in versions.values():
        if version.phase in ("committed", "rolled_back") and version.trigger["kind"] != "rollback":
            assert summary_verify(version=version).ok, version.version
    assert "rolled_back" in phases and phases[-1] == "committed"
    head = versions[thread.head_version]
    assert head.trigger["kind"] == "rollback" and head.restored_from is not None
    assert "refused by verification" in out.getvalue()
    # What a person sees: the refusal and its failed check, the rollback on the checkpoints.
    client = Client()
    client.force_login(Membership.objects.get(user__username="reviewer").user)
    summaries = client.get(f"/threads/{thread.pk}/summaries/").content.decode()
    assert "rejected" in summaries and "task_status_matches_ledger" in summaries
    assert "rolled back" in summaries.lower()
    checkpoints = client.get(f"/threads/{thread.pk}/checkpoints/").content.decode()
    assert checkpoints.count("<tr") >= 4
    # Loaded twice, the history is not written again.
    before = SummaryVersion.objects.filter(thread=thread).count()
    call_command("demo", "--no-serve", "--tau", "0", stdout=io.StringIO())
    assert SummaryVersion.objects.filter(thread=thread).count() == before
