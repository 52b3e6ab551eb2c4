"""The thread list is read off its indexes (docs/scale.md, "What one database holds"): a page of the
default order comes off `(workspace, updated_at DESC, id)` in order, never from a sort of every
thread of the workspace, and on PostgreSQL a name search goes through the trigram indexes of
migration 0017. The plans are asked with the planner's scans and sorts priced out where it has
another way, so a test fails only when that other way is missing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from tests import factories as f
from tests.services.test_checkpoints import two_versions
from threads.database import unknown_counts as unknown_counts
from threads.models import SideEffect, Thread
from threads.selectors import member_workspace_ids, threads_in
from threads.services.fork import thread_fork

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(workspace: Any) -> Any:
    for n in range(30):
        f.make_thread(workspace, f"order-{n:04}", title=f"Refund for order {n}")
    other, _ = f.make_workspace("other")
    f.make_thread(other, "elsewhere")
    return f.make_person(workspace, "olga", "operator")


def page_statements(operator: Any, **filters: Any) -> tuple[list[Thread], list[str]]:
    """The first 10 threads of the operator's list, and the statements that read them."""
    with CaptureQueriesContext(connection) as seen:
        page = list(threads_in(workspace_ids=member_workspace_ids(operator), **filters)[:10])
    return page, [q["sql"] for q in seen.captured_queries]


def plan(sql: str, *priced_out: str, params: Any = ()) -> str:
    """The plan of `sql` as text; on PostgreSQL with the `priced_out` ways (sequential scans,
    sorts, …) priced out, so that it takes another where it has one."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
    with transaction.atomic(), connection.cursor() as cursor:
        for way in priced_out:
            cursor.execute(f"SET LOCAL enable_{way} = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        found = cursor.fetchone()[0]
    return json.dumps(found if isinstance(found, list) else json.loads(found))


def assert_read_in_order(sql: str, index: str) -> None:
    """The statement reads `index` and sorts nothing: its rows come off the index in order."""
    found = plan(sql, "seqscan", "sort")
    assert index in found
    if connection.vendor == "sqlite":
        assert "TEMP B-TREE" not in found
    else:
        assert "Sort" not in found


def test_a_persons_workspaces_go_into_the_list_as_values(operator: Any) -> None:
    page, sql = page_statements(operator)
    assert len(sql) == 2  # the memberships, then the page
    assert "threads_membership" in sql[0]
    assert "threads_membership" not in sql[1]
    assert len(page) == 10
    assert {t.workspace.name for t in page} == {"acme"}


def test_a_page_of_the_default_order_is_read_off_the_index_in_order(operator: Any) -> None:
    page, sql = page_statements(operator)
    assert [t.pk for t in page] == list(
        Thread.objects.filter(workspace__name="acme")
        .order_by("-updated_at", "pk")
        .values_list("pk", flat=True)[:10]
    )
    assert_read_in_order(sql[-1], "thread_list_order")


@pytest.mark.postgres
@pytest.mark.parametrize("field", ["external_id", "title"])
def test_postgres_reads_a_name_search_off_its_trigram_index(operator: Any, field: str) -> None:
    """The index's expression is the one Django's `icontains` writes: with only bitmap scans
    left, the planner has no other way to the rows than the trigram index."""
    if connection.vendor != "postgresql":
        pytest.skip("pg_trgm is PostgreSQL's")
    query = Thread.objects.filter(**{f"{field}__icontains": "der-001"}).values("pk")
    sql, params = query.query.sql_with_params()
    found = plan(sql, "seqscan", "indexscan", "indexonlyscan", params=params)
    assert f"thread_{field}_trgm" in found


def test_the_list_finds_a_name_in_any_case(operator: Any) -> None:
    page, _ = page_statements(operator, q="und for ORDER 7")
    assert [t.external_id for t in page] == ["order-0007"]
    page, _ = page_statements(operator, q="R-002")
    assert sorted(t.external_id for t in page) == [f"order-{n:04}" for n in range(20, 30)]


def _timeout(thread: Thread, n: int) -> None:
    f.append(
        thread,
        f.call(f"c{n}", "refund", {"order": n}, side_effect_key=f"refund-{thread.pk}-{n}"),
        f.result(f"c{n}", status="timeout"),
    )


def test_the_unknown_filter_is_read_off_its_partial_index_in_order(
    operator: Any, client: Any
) -> None:
    threads = list(Thread.objects.filter(workspace__name="acme").order_by("external_id"))
    for thread in threads[:12]:
        _timeout(thread, 1)
    _timeout(threads[0], 2)
    page, sql = page_statements(operator, unknown=True)
    assert [t.pk for t in page] == list(
        Thread.objects.filter(workspace__name="acme", side_effects__status="unknown")
        .distinct()
        .order_by("-updated_at", "pk")
        .values_list("pk", flat=True)[:10]
    )
    assert Thread.objects.get(pk=threads[0].pk).unknown_side_effects == 2
    if connection.vendor == "postgresql":
        # The planner weighs the partial index by the table's statistics; the whole suite's
        # earlier tests leave others behind (autovacuum), so take this test's own.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE threads_thread")
    assert_read_in_order(sql[-1], "thread_list_unknown")
    assert threads_in(workspace_ids=member_workspace_ids(operator), unknown=True).count() == 12
    assert threads_in(workspace_ids=member_workspace_ids(operator), unknown=False).count() == 18
    client.force_login(operator)
    page = client.get("/threads/?unknown=1").content.decode()
    assert page.count("1 unknown side effect<") == 11
    assert page.count("2 unknown side effects<") == 1


def test_a_fork_counts_the_unknown_side_effects_it_copies(workspace: Any, thread: Thread) -> None:
    _, second = two_versions(thread)  # its refund timed out
    admin = f.make_person(workspace, "ada", "admin")
    fork = thread_fork(thread=thread, checkpoint=second, external_id="fork-1", actor=admin)
    fork.refresh_from_db()
    thread.refresh_from_db()
    assert SideEffect.objects.filter(thread=fork, status="unknown").count() == 1
    assert (fork.unknown_side_effects, thread.unknown_side_effects) == (1, 1)


def test_the_migrations_recount_gives_what_the_triggers_kept(operator: Any) -> None:
    threads = list(Thread.objects.filter(workspace__name="acme").order_by("external_id"))
    for n, thread in enumerate(threads[:5]):
        for m in range(n + 1):
            _timeout(thread, m)
    kept = dict(Thread.objects.values_list("pk", "unknown_side_effects"))
    assert sorted(kept.values())[-5:] == [1, 2, 3, 4, 5]
    Thread.objects.update(unknown_side_effects=0)
    with connection.cursor() as cursor:
        cursor.execute(unknown_counts.RECOUNT_SQL)
    assert dict(Thread.objects.values_list("pk", "unknown_side_effects")) == kept


@pytest.mark.postgres
def test_a_busy_threads_appends_do_not_grow_the_name_indexes(workspace: Any) -> None:
    """Every append rewrites the thread's row, and PostgreSQL indexes each version again: the
    trigram indexes take a version's trigrams into their posting lists (a few bytes each), not
    as new entries of a pending list, so 300 appends to one thread leave them about their size."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's trigram indexes (SQLite has none)")
    thread = f.make_thread(workspace, "review-busy-thread", title="A pull request under review")
    names = ("thread_external_id_trgm", "thread_title_trgm")

    def sizes() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_relation_size(to_regclass(n)) FROM unnest(%s::text[]) AS n",
                [list(names)],
            )
            return [int(size) for (size,) in cursor.fetchall()]

    before = sizes()
    for n in range(300):
        f.append(thread, f.user(f"step {n}"))
    after = sizes()
    assert Thread.objects.get(pk=thread.pk).last_seq >= 300
    # 300 row versions in the posting lists of a title's 25 trigrams: a page or two (with a
    # pending list, 120-165 kB: an entry per trigram per version).
    assert all(a - b <= 3 * 8192 for a, b in zip(after, before, strict=True)), (before, after)
