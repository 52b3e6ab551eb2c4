"""The Operations page: who may see it, the numbers of its data tables against what was seeded,
and a query count that does not grow with the data (docs/operations.md)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests import factories as f
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    ContextRequestLog,
    Event,
    EventKind,
    SideEffect,
    SummaryVersion,
    Thread,
)
from threads.services import fold_preparation, folding
from threads.services.side_effects import side_effect_resolve
from threads.views import operations

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

MANUAL = {"kind": "manual", "reason": "test"}
NOW = datetime(2026, 3, 10, 12, 30, tzinfo=UTC)
START = datetime(2026, 3, 9, 13, 0, tzinfo=UTC)  # the first of 24 hourly buckets


def at(bucket: int, minutes: int = 0) -> datetime:
    return START + timedelta(hours=bucket, minutes=minutes)


def stamp(at_: datetime) -> str:
    return at_.isoformat().replace("+00:00", "Z")


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(operations, "_now", lambda: NOW)


def login(workspace: Any, role: str) -> Client:
    client = Client()
    client.force_login(f.make_person(workspace, f"{role}-p", role))
    return client


def table(html: str, table_id: str) -> list[list[str]]:
    """The body rows of one table: each row's cells as text, its header cell first."""
    body = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)
    assert body is not None, table_id
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
    ]


def _unit(thread: Thread, n: int) -> None:
    f.append(
        thread,
        f.user(f"q{n}"),
        f.call(f"c{n}", "lookup", {"n": n}),
        f.result(f"c{n}", value={"n": n}),
        f.assistant(f"a{n}"),
    )


def _fold(thread: Thread, *, created: datetime, decided: datetime, decide: bool = True) -> Any:
    version = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None
    if decide:
        folding.summary_decide(version=version)
        SummaryVersion.objects.filter(pk=version.pk).update(created_at=created, decided_at=decided)
    else:
        SummaryVersion.objects.filter(pk=version.pk).update(created_at=created)
    return version


def seed(workspace: Any, thread: Thread, operator: Any) -> None:
    # Folds: one long before the range, one committed at hour 20, a race at hour 21 (one
    # committed, one discarded), one rejected by its checksum at hour 22.
    _unit(thread, 0)
    _fold(thread, created=at(-5), decided=at(-5, 1))
    _unit(thread, 1)
    _fold(thread, created=at(20, 10), decided=at(20, 11))
    _unit(thread, 2)
    loser = _fold(thread, created=at(21, 5), decided=at(21, 7), decide=False)
    _fold(thread, created=at(21, 5), decided=at(21, 6))
    folding.summary_decide(version=loser)
    SummaryVersion.objects.filter(pk=loser.pk).update(decided_at=at(21, 7))
    _unit(thread, 3)
    changed = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert changed is not None
    SummaryVersion.objects.filter(pk=changed.pk).update(
        content={**changed.content, "narrative": "edited"}, created_at=at(22, 1)
    )
    changed.refresh_from_db()
    assert folding.summary_decide(version=changed) == folding.Outcome.REJECTED
    SummaryVersion.objects.filter(pk=changed.pk).update(decided_at=at(22, 2))
    # Context requests: four at hour 22 (one overflow, one needing a fold), one at hour 23,
    # one before the range.
    for when, ms, overflow, needs in [
        (at(22, 1), 10.0, False, False),
        (at(22, 2), 20.0, True, False),
        (at(22, 3), 30.0, False, True),
        (at(22, 4), 400.0, False, False),
        (at(23, 1), 5.5, False, False),
        (at(-1), 99.0, True, False),
    ]:
        ContextRequestLog.objects.create(
            workspace=workspace,
            thread=thread,
            at=when,
            latency_ms=ms,
            overflow=overflow,
            needs_fold=needs,
        )
    # Side effects: one timed out at hour 19, never resolved; one timed out at hour 20,
    # resolved at hour 21.
    f.append(
        thread,
        {**f.call("s1", "refund", {"a": 1}, side_effect_key="k1"), "created_at": stamp(at(19, 1))},
        {**f.result("s1", status="timeout"), "created_at": stamp(at(19, 2))},
        {**f.call("s2", "refund", {"a": 2}, side_effect_key="k2"), "created_at": stamp(at(20, 2))},
        {**f.result("s2", status="timeout"), "created_at": stamp(at(20, 3))},
    )
    resolution = side_effect_resolve(
        side_effect=SideEffect.objects.get(thread=thread, tool_call_id="s2"),
        actor=operator,
        status="succeeded",
        evidence="the refund is in the ledger",
    )
    with f.log_unsealed():
        Event.objects.filter(pk=resolution.pk).update(created_at=at(21, 30))
    assert resolution.kind == EventKind.SIDE_EFFECT_RESOLUTION
    # Approvals: one asked at hour 18, still pending; one asked at hour 21, decided at 22.
    for action in ("first", "second"):
        f.append(
            thread,
            {"kind": "approval_request", "action": action, "tool_name": "refund", "arguments": {}},
        )
    ApprovalRequest.objects.filter(action="first").update(created_at=at(18))
    ApprovalRequest.objects.filter(action="second").update(
        created_at=at(21, 1), status=ApprovalStatus.APPROVED, decided_at=at(22, 1)
    )
    # Secrets (docs/event-log.md, "Secrets at ingest"): two events holding a key at hour 17,
    # one at hour 23, one before the range; an event without one at hour 17.
    key = "AKIAIOSFODNN7EXAMPLE"
    for when, text in [
        (at(17, 1), f"my key is {key}"),
        (at(17, 2), f"again: {key}"),
        (at(17, 3), "no key here"),
        (at(23, 4), f"and {key}"),
        (at(-2), f"long ago {key}"),
    ]:
        f.append(thread, {**f.user(text), "created_at": stamp(when)})


def column(rows: list[list[str]], index: int) -> dict[int, str]:
    """Bucket -> the cell, for buckets whose cell is not empty ("0" or "–")."""
    return {i: row[index] for i, row in enumerate(rows) if row[index] not in ("0", "–")}


def test_the_data_tables_hold_what_was_seeded(workspace: Any, thread: Thread) -> None:
    client = login(workspace, "operator")
    seed(workspace, thread, f.make_person(workspace, "olga", "operator"))
    response = client.get("/operations/")
    assert response.status_code == 200
    html = response.content.decode()

    folds = table(html, "folds-table")
    assert len(folds) == 24 and folds[0][0] == "03-09 13:00" and folds[23][0] == "03-10 12:00"
    assert column(folds, 1) == {20: "1", 21: "2", 22: "1"}  # started
    assert column(folds, 2) == {20: "1", 21: "1"}  # committed
    assert column(folds, 3) == {22: "1"}  # rejected
    assert column(folds, 4) == {21: "1"}  # discarded
    rejections = table(html, "rejections-table")
    assert column(rejections, 1) == {20: "0.0%", 21: "0.0%", 22: "100.0%"}
    assert "checksum" in html and column(rejections, 2) == {22: "1"}
    overflow = table(html, "overflow-table")
    assert column(overflow, 1) == {22: "4", 23: "1"}
    assert column(overflow, 2) == {22: "1"}
    assert column(overflow, 3) == {22: "1"}
    assert column(overflow, 4) == {22: "25.0%", 23: "0.0%"}
    p95 = table(html, "p95-table")
    assert column(p95, 2) == {22: "400.0", 23: "5.5"}
    backlog = table(html, "backlog-table")
    assert column(backlog, 1) == {19: "1", 20: "2", 21: "1", 22: "1", 23: "1"}
    assert column(backlog, 2) == {18: "1", 19: "1", 20: "1", 21: "2", 22: "1", 23: "1"}
    secrets = table(html, "secrets-table")
    assert column(secrets, 1) == {17: "2", 23: "1"}
    assert 'id="secrets-total">3<' in html and "AKIAIOSFODNN7EXAMPLE" not in html
    # Each chart is an image with a name and a description.
    assert html.count('role="img"') == 7
    assert html.count("<title id=") == 7


def test_a_longer_range_reaches_back(workspace: Any, thread: Thread) -> None:
    client = login(workspace, "operator")
    seed(workspace, thread, f.make_person(workspace, "olga", "operator"))
    html = client.get("/operations/?hours=48").content.decode()
    folds = table(html, "folds-table")
    assert len(folds) == 48
    assert column(folds, 2) == {19: "1", 44: "1", 45: "1"}  # the old fold is in range now
    overflow = table(html, "overflow-table")
    assert column(overflow, 2) == {23: "1", 46: "1"}
    assert (
        len(table(client.get("/operations/?hours=100000").content.decode(), "folds-table")) == 168
    )
    assert len(table(client.get("/operations/?hours=x").content.decode(), "folds-table")) == 24


@pytest.mark.parametrize("role", ["operator", "reviewer", "admin"])
def test_every_member_role_sees_the_page(workspace: Any, role: str) -> None:
    response = login(workspace, role).get("/operations/")
    assert response.status_code == 200
    assert b'href="/operations/" aria-current="page"' in response.content


def test_others_are_refused(db: Any) -> None:
    anonymous = Client().get("/operations/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    stranger = Client()
    stranger.force_login(User.objects.create_user("nobody", password="x"))
    assert stranger.get("/operations/").status_code == 403


def test_the_page_sees_only_the_person_s_workspaces(workspace: Any, thread: Thread) -> None:
    other, _ = f.make_workspace("globex")
    elsewhere = f.make_thread(other, external_id="far")
    ContextRequestLog.objects.create(
        workspace=other, thread=elsewhere, at=at(22), latency_ms=1.0, overflow=True
    )
    html = login(workspace, "operator").get("/operations/").content.decode()
    assert column(table(html, "overflow-table"), 1) == {}


def test_the_query_count_does_not_grow_with_the_data(workspace: Any, thread: Thread) -> None:
    client = login(workspace, "operator")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/operations/?hours=168").status_code == 200
        return len(captured)

    empty = queries()
    seed(workspace, thread, f.make_person(workspace, "olga", "operator"))
    for n in range(3):
        other = f.make_thread(workspace, external_id=f"more-{n}")
        _unit(other, n)
        _fold(other, created=at(10 + n), decided=at(10 + n, 1))
    assert queries() == empty
    assert empty <= 10
