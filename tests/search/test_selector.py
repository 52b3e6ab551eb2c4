"""Message search (docs/search.md, "Message search"): the index finds words of messages, tool calls
and tool results, is written in the append's own transaction, follows every writer of events
(batches, COPY-sized batches, forks, imports), and never shows another workspace's events."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from integrations.trace_imports.readers import read_conversations
from integrations.trace_imports.services.conversations import conversations_import
from tests import factories as f
from tests.services.test_checkpoints import fold
from threads.domain.errors import NoOpenToolCall
from threads.domain.events import normalize_event
from threads.models import Event, Thread
from threads.selectors import SearchHit, events_search, threads_in
from threads.selectors import search as search_selectors
from threads.services.checkpoints import checkpoint_create
from threads.services.events import event_append_batch
from threads.services.fork import thread_fork

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parent.parent / "data" / "tau-bench-gpt-4o-airline.json.gz"


def search(workspace: Any, q: str, **kwargs: Any) -> list[SearchHit]:
    return events_search(workspace_ids=[workspace.pk], q=q, **kwargs)


def hits(workspace: Any, q: str) -> list[tuple[str, int, str]]:
    return [(h.external_id, h.seq, h.kind) for h in search(workspace, q)]


def highlighted(hit: SearchHit) -> list[str]:
    return [part.text for part in hit.snippet if part.hit]


@pytest.fixture
def story(thread: Thread) -> Thread:
    f.append(
        thread,
        f.user("My parcel never arrived, I want a refund"),
        f.call("c1", "lookup_order", {"order": 10086, "carrier": "Northwind"}),
        f.result("c1", value={"status": "lost in Rotterdam", "insured": True}),
        f.assistant("I am sorry: the parcel was lost."),
        f.user("Please hurry"),
    )
    return thread


def test_words_of_a_message_are_found_with_thread_seq_kind_and_a_highlight(story: Thread) -> None:
    found = search(story.workspace, "refund")
    assert [(h.thread_id, h.external_id, h.seq, h.kind) for h in found] == [
        (story.pk, "order-10086", 1, "message")
    ]
    assert highlighted(found[0]) == ["refund"]
    assert "".join(p.text for p in found[0].snippet) == "My parcel never arrived, I want a refund"
    # Any case; every word must be there; newest first.
    assert hits(story.workspace, "PARCEL") == [
        ("order-10086", 4, "message"),
        ("order-10086", 1, "message"),
    ]
    assert hits(story.workspace, "parcel lost") == [("order-10086", 4, "message")]


def test_tool_names_arguments_and_results_are_found(story: Thread) -> None:
    assert hits(story.workspace, "lookup_order") == [("order-10086", 2, "tool_call")]
    assert hits(story.workspace, "Northwind") == [("order-10086", 2, "tool_call")]
    assert hits(story.workspace, "10086") == [("order-10086", 2, "tool_call")]
    assert hits(story.workspace, "rotterdam") == [("order-10086", 3, "tool_result")]
    (hit,) = search(story.workspace, "rotterdam")
    assert highlighted(hit) == ["Rotterdam"]


def test_a_word_not_present_finds_nothing(story: Thread) -> None:
    assert hits(story.workspace, "zeppelin") == []
    assert hits(story.workspace, "refund zeppelin") == []  # every word, not any
    assert hits(story.workspace, "refun") == []  # whole words
    assert hits(story.workspace, "  ...  ") == []  # no words at all


def test_another_workspace_is_not_seen(story: Thread) -> None:
    other, _ = f.make_workspace("globex")
    theirs = f.make_thread(other, external_id="their-order")
    f.append(theirs, f.user("a refund for globex"))
    assert hits(story.workspace, "refund") == [("order-10086", 1, "message")]
    assert hits(other, "refund") == [("their-order", 1, "message")]
    assert hits(story.workspace, "globex") == []
    both = events_search(workspace_ids=[story.workspace_id, other.pk], q="refund")
    assert {h.external_id for h in both} == {"order-10086", "their-order"}


def test_pages_go_on_below_the_last_hit(thread: Thread) -> None:
    f.append(thread, *[f.user(f"status ping {n}") for n in range(7)])
    first = search(thread.workspace, "ping", limit=3)
    assert [h.seq for h in first] == [7, 6, 5]
    rest = search(thread.workspace, "ping", limit=10, before=first[-1].event_id)
    assert [h.seq for h in rest] == [4, 3, 2, 1]


def test_an_append_is_searchable_inside_its_transaction_and_a_rollback_leaves_nothing(
    thread: Thread,
) -> None:
    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        event_append_batch(
            thread=thread,
            new_events=[normalize_event(f.user("quokka sighting"), max_bytes=1 << 20)],
            lock=False,
        )
        # The index row is written by the event's own INSERT: visible before the commit.
        assert hits(thread.workspace, "quokka") == [("order-10086", 1, "message")]
        raise Abort
    assert not Event.objects.filter(thread=thread).exists()
    assert hits(thread.workspace, "quokka") == []


def test_a_refused_batch_leaves_no_index_rows(thread: Thread) -> None:
    # 60 events: on PostgreSQL a batch of this size is streamed with COPY.
    bodies = [f.user(f"wombat number {n}") for n in range(59)] + [f.result("nope")]
    with pytest.raises(NoOpenToolCall):
        f.append(thread, *bodies)
    assert hits(thread.workspace, "wombat") == []
    f.append(thread, *bodies[:-1])
    assert len(search(thread.workspace, "wombat", limit=100)) == 59


def test_a_fork_has_its_own_index_rows(story: Thread) -> None:
    fold(story)
    reviewer = f.make_person(story.workspace, "rex", "reviewer")
    checkpoint = checkpoint_create(thread=story, label="before", actor=reviewer)
    forked = thread_fork(thread=story, checkpoint=checkpoint, external_id="fork-b", actor=reviewer)
    f.append(forked, f.user("the fork asks for a refund again"))
    assert hits(story.workspace, "refund") == [
        ("fork-b", 6, "message"),
        ("fork-b", 1, "message"),
        ("order-10086", 1, "message"),
    ]


def test_imported_conversations_are_searchable(workspace: Any) -> None:
    conversations = read_conversations(str(DATA), "openai-chat")[:3]
    results = conversations_import(
        workspace=workspace, conversations=conversations, fmt="openai-chat"
    )
    tool_names = {
        e.data["tool_name"]
        for e in Event.objects.filter(thread=results[0].thread, kind="tool_call")
    }
    assert tool_names
    name = sorted(tool_names)[0]
    found = search(workspace, name, limit=100)
    assert found and all(name in "".join(p.text for p in h.snippet) for h in found)
    expected = Event.objects.filter(
        thread__workspace=workspace, kind="tool_call", data__tool_name=name
    ).count()
    assert len([h for h in found if h.kind == "tool_call"]) == min(expected, 100)


def test_markup_in_agent_text_stays_text_and_cannot_forge_a_highlight(thread: Thread) -> None:
    f.append(thread, f.user("<script>alert(1)</script> \ue000fake\ue001 marker ocelot"))
    (hit,) = search(thread.workspace, "ocelot")
    assert highlighted(hit) == ["ocelot"]
    text = "".join(p.text for p in hit.snippet)
    assert "<script>" in text and "\ue000" not in text and "\ue001" not in text


def test_the_thread_list_content_filter_uses_the_same_words(story: Thread) -> None:
    f.make_thread(story.workspace, external_id="quiet")
    found = threads_in(workspace_ids=[story.workspace_id], q="rotterdam", content=True)
    assert [t.external_id for t in found] == ["order-10086"]
    assert not threads_in(workspace_ids=[story.workspace_id], q="rotterdam").exists()


@pytest.mark.parametrize(("window", "cap"), [(2, 10_000), (2, 1)])
def test_every_search_strategy_gives_the_same_page(
    story: Thread, monkeypatch: pytest.MonkeyPatch, window: int, cap: int
) -> None:
    # PostgreSQL walks the newest events first, then reads the GIN index, then walks the whole
    # log (threads/selectors/search.py); shrunk, each step is reached with a handful of events.
    f.append(story, *[f.user(f"parcel update {n}") for n in range(5)])
    expected = [(h.seq, h.kind) for h in search(story.workspace, "parcel", limit=4)]
    assert expected == [(10, "message"), (9, "message"), (8, "message"), (7, "message")]
    monkeypatch.setattr(search_selectors, "RECENT_WINDOW", window)
    monkeypatch.setattr(search_selectors, "RARE_CAP", cap)
    assert [(h.seq, h.kind) for h in search(story.workspace, "parcel", limit=4)] == expected
    assert [(h.seq, h.kind) for h in search(story.workspace, "parcel", limit=50)][-2:] == [
        (4, "message"),
        (1, "message"),
    ]
    first = search(story.workspace, "parcel", limit=4)
    rest = search(story.workspace, "parcel", limit=50, before=first[-1].event_id)
    assert [h.seq for h in rest] == [6, 4, 1]
    assert hits(story.workspace, "zeppelin") == []


def test_a_term_of_several_words_finds_them_together_and_in_order(
    thread: Thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's index keeps no positions: its candidates hold the words anywhere, and the
    # selector keeps those where they stand together, reading candidates a batch at a time.
    monkeypatch.setattr(search_selectors, "PHRASE_BATCH", 1)
    f.append(
        thread,
        f.user("lookup_order first"),
        *[f.user(f"the order lookup failed {n}") for n in range(5)],
        f.user("please Lookup-Order again"),
        *[f.user(f"lookup the order {n}") for n in range(5)],
    )
    assert [h.seq for h in search(thread.workspace, "lookup_order", limit=3)] == [7, 1]
    assert [h.seq for h in search(thread.workspace, "lookup_order", limit=1)] == [7]
    (hit,) = search(
        thread.workspace,
        "lookup_order",
        limit=1,
        before=search(thread.workspace, "lookup_order", limit=1)[0].event_id,
    )
    assert hit.seq == 1
    assert highlighted(hit) == ["lookup", "order"]
    assert [h.seq for h in search(thread.workspace, "order_lookup")] == [6, 5, 4, 3, 2]
    assert search(thread.workspace, "first_lookup") == []
    assert [h.seq for h in search(thread.workspace, "lookup_order again")] == [7]


@pytest.mark.postgres
@pytest.mark.parametrize("atomic", [False, True], ids=["autocommit", "in-a-transaction"])
def test_postgres_plans_a_search_without_parallel_workers_and_resets_the_setting(
    story: Thread, atomic: bool
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner setting")

    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW max_parallel_workers_per_gather")
            return str(cursor.fetchone()[0])

    before = setting()
    assert before != "0"
    with transaction.atomic() if atomic else nullcontext():
        with CaptureQueriesContext(connection) as seen:
            found = hits(story.workspace, "parcel")
        # The rest of a caller's transaction plans as before.
        assert setting() == before
    assert found == [("order-10086", 4, "message"), ("order-10086", 1, "message")]
    statements = [q["sql"] for q in seen.captured_queries]
    assert statements[0] == "SET max_parallel_workers_per_gather = 0"
    assert statements[-1] == "RESET max_parallel_workers_per_gather"
    assert len(statements) > 2
    assert setting() == before
