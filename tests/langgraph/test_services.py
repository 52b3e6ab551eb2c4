"""The LangGraph services called server-side, as a repair would: no HTTP, no saver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import query
from django.test.utils import CaptureQueriesContext
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, message_to_dict

from integrations.langgraph_checkpointer.domain.messages import INTERRUPT_ACTION, message_digest
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    langgraph_checkpoint_get,
    langgraph_checkpoints_list,
    langgraph_tuple,
    langgraph_tuples,
)
from integrations.langgraph_checkpointer.services.batch import (
    BatchOperation,
    langgraph_batch_put,
)
from integrations.langgraph_checkpointer.services.checkpoint_put import (
    ValueIn,
    langgraph_checkpoint_put,
    langgraph_checkpoint_put_locked,
)
from integrations.langgraph_checkpointer.services.interrupts import InterruptIn
from integrations.langgraph_checkpointer.services.message_mirror import (
    MessageIn,
    MessagesBaseUnknown,
    MessagesIn,
    MessagesMissing,
    MessagesNotMirrored,
)
from integrations.langgraph_checkpointer.services.writes import (
    MessagesUnordered,
    WriteIn,
    langgraph_writes_put,
)
from tests import factories
from threads.models import ApprovalRequest, Checkpoint, Thread
from threads.services.approvals import approval_decide
from threads.services.checkpoints import checkpoint_checksum, pending_at
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db(transaction=True)

FORMS = [
    message_to_dict(m)
    for m in (
        HumanMessage("refund order 7", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "refund", "args": {"o": 7}, "id": "c1"}]),
        ToolMessage("refunded", tool_call_id="c1", id="t1"),
    )
]


def _entries(forms: list[dict[str, Any]], *, with_forms: bool = True) -> list[MessageIn]:
    return [
        MessageIn(id=f["data"]["id"], digest=message_digest(f), message=f if with_forms else None)
        for f in forms
    ]


def _put(workspace: Any, checkpoint_id: str, entries: list[MessageIn], version: str) -> Any:
    return langgraph_checkpoint_put(
        workspace=workspace,
        external_id="repair-1",
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id="",
        checkpoint={
            "v": 4,
            "id": checkpoint_id,
            "channel_versions": {"messages": version, "other": version},
        },
        metadata={"source": "loop", "step": 0},
        values=[ValueIn(channel="other", version=version, type="bytes", data=b"\x01")],
        messages=MessagesIn(channel="messages", version=version, entries=entries),
        actor_label="api key test",
    )


def test_a_put_mirrors_the_messages_and_records_a_ctxadmin_checkpoint() -> None:
    workspace, _ = factories.make_workspace("acme")
    row = _put(workspace, "cp-1", _entries(FORMS), "1")
    thread = Thread.objects.get(external_id="repair-1")
    assert thread.last_seq == 4 and row.cursor == 4
    assert row.ctxadmin_checkpoint.label == "langgraph:cp-1"
    assert row.ctxadmin_checkpoint.cursor == 4
    found = langgraph_checkpoint_get(thread=thread, checkpoint_ns="", checkpoint_id=None)
    assert found is not None
    assert langgraph_tuple(found).messages == {"messages": FORMS}

    # The log holds them: ids and digests are enough, and nothing is appended again.
    _put(workspace, "cp-2", _entries(FORMS, with_forms=False), "2")
    thread.refresh_from_db()
    assert thread.last_seq == 4
    with pytest.raises(MessagesMissing) as missing:
        _put(
            workspace,
            "cp-3",
            _entries([message_to_dict(HumanMessage("new", id="h2"))], with_forms=False),
            "3",
        )
    assert missing.value.fields == {"missing": ["h2"]}


def test_messages_with_no_event_form_are_refused_whole() -> None:
    workspace, _ = factories.make_workspace("acme")
    orphan = message_to_dict(ToolMessage("refunded", tool_call_id="nope", id="t9"))
    with pytest.raises(MessagesNotMirrored):
        _put(workspace, "cp-1", _entries([FORMS[0], orphan]), "1")
    assert not Thread.objects.filter(external_id="repair-1").exists()  # all or nothing
    assert not LanggraphChannelVersion.objects.exists()
    assert not Checkpoint.objects.exists()


def test_a_repair_writes_a_new_head_inside_its_own_transaction() -> None:
    workspace, _ = factories.make_workspace("acme")
    first = _put(workspace, "cp-1", _entries(FORMS[:1]), "1")
    _put(workspace, "cp-2", _entries(FORMS), "2")
    thread = Thread.objects.get(external_id="repair-1")
    with transaction.atomic(durable=True):
        locked = Thread.objects.select_for_update().get(pk=thread.pk)
        head = langgraph_checkpoint_put_locked(
            thread=locked,
            checkpoint_ns="",
            checkpoint_id="cp-3",
            parent_checkpoint_id="cp-2",
            checkpoint={**first.checkpoint, "id": "cp-3"},
            metadata={"source": "update", "step": 2},
        )
    assert head.cursor == first.cursor == 1
    found = langgraph_tuple(head)
    assert found.messages == {"messages": FORMS[:1]}
    assert [v[0] for v in found.values] == ["other"]
    latest = langgraph_checkpoint_get(thread=thread, checkpoint_ns="", checkpoint_id=None)
    assert latest is not None and latest.checkpoint_id == "cp-3"


def _put_after(
    workspace: Any, checkpoint_id: str, entries: list[MessageIn], version: str, **base: Any
) -> Any:
    return langgraph_checkpoint_put(
        workspace=workspace,
        external_id="repair-1",
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id="",
        checkpoint={"v": 4, "id": checkpoint_id, "channel_versions": {"messages": version}},
        metadata={"source": "loop", "step": 0},
        messages=MessagesIn(channel="messages", version=version, entries=entries, **base),
        actor_label="api key test",
    )


def test_a_put_after_a_base_version_sends_only_the_new_messages() -> None:
    workspace, _ = factories.make_workspace("acme")
    _put_after(workspace, "cp-1", _entries(FORMS[:2]), "1")
    row = _put_after(workspace, "cp-2", _entries(FORMS[2:]), "2", base_version="1", base_count=2)
    assert langgraph_tuple(row).messages == {"messages": FORMS}
    version = LanggraphChannelVersion.objects.get(version="2")
    assert version.message_count == 3 and version.messages_until_seq == 4  # still "up to a seq"
    # Nothing new: the same list again, by reference.
    again = _put_after(workspace, "cp-3", [], "3", base_version="2", base_count=3)
    assert langgraph_tuple(again).messages == {"messages": FORMS}


def test_a_put_whose_base_does_not_fit_is_refused() -> None:
    workspace, _ = factories.make_workspace("acme")
    _put_after(workspace, "cp-1", _entries(FORMS[:2]), "1")
    for base in ({"base_version": "nope", "base_count": 2}, {"base_version": "1", "base_count": 1}):
        with pytest.raises(MessagesBaseUnknown):
            _put_after(workspace, "cp-2", _entries(FORMS[2:]), "2", **base)
    assert not LanggraphChannelVersion.objects.filter(version="2").exists()
    assert Thread.objects.get(external_id="repair-1").last_seq == 3  # nothing appended


def test_a_base_that_is_not_a_prefix_of_the_log_gives_explicit_seqs() -> None:
    """A base version after an edit refers to explicit seqs: its extension does too, in order."""
    workspace, _ = factories.make_workspace("acme")
    _put_after(workspace, "cp-1", _entries(FORMS[:1]), "1")
    other = message_to_dict(HumanMessage("unrelated", id="h9"))
    _put_after(workspace, "cp-2", _entries([FORMS[0], other]), "2")  # h9 after h1 in the log
    row = _put_after(workspace, "cp-3", _entries(FORMS[1:]), "3", base_version="1", base_count=1)
    assert langgraph_tuple(row).messages == {"messages": FORMS}
    version = LanggraphChannelVersion.objects.get(version="3")
    assert version.messages_until_seq is None and version.message_count == 3


def _write(workspace: Any, checkpoint_id: str, forms: list[dict[str, Any]]) -> None:
    langgraph_writes_put(
        workspace=workspace,
        external_id="repair-1",
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        task_id="task-1",
        task_path="",
        writes=[WriteIn(idx=0, channel="messages", messages=_entries(forms))],
        actor_label="api key test",
    )


def test_a_write_of_messages_is_mirrored_and_stored_as_a_reference() -> None:
    workspace, _ = factories.make_workspace("acme")
    row = _put_after(workspace, "cp-1", _entries(FORMS[:2]), "1")
    _write(workspace, "cp-1", FORMS[2:])
    assert not LanggraphWrite.objects.exists()  # its checkpoint's row holds it
    row = LanggraphCheckpoint.objects.get(pk=row.pk)
    ((write,),) = [task.writes for task in row.task_writes]
    assert write.data == b"" and write.message_seqs == [4]
    found = langgraph_tuple(row)
    (pending,) = found.writes
    assert pending.message_seqs == [4]
    assert found.write_messages == {pending.pk: FORMS[2:]}
    # The next put finds the message in the log: nothing appended twice.
    _put_after(
        workspace,
        "cp-2",
        _entries(FORMS[2:], with_forms=False),
        "2",
        base_version="1",
        base_count=2,
    )
    assert Thread.objects.get(external_id="repair-1").last_seq == 4


def test_a_write_that_would_break_the_conversations_order_is_refused() -> None:
    workspace, _ = factories.make_workspace("acme")
    with pytest.raises(MessagesUnordered):  # its checkpoint is not stored yet
        _write(workspace, "cp-1", FORMS[:1])
    _put_after(workspace, "cp-1", _entries(FORMS[:1]), "1")
    _put_after(workspace, "cp-2", _entries(FORMS[:2]), "2")
    with pytest.raises(MessagesUnordered):  # the log holds a later message than cp-1's
        _write(workspace, "cp-1", [message_to_dict(HumanMessage("late", id="h7"))])
    assert not LanggraphWrite.objects.exists()
    _write(workspace, "cp-1", FORMS[1:2])  # already in the log: a reference, whatever the order
    (task,) = LanggraphCheckpoint.objects.get(checkpoint_id="cp-1").task_writes
    assert [w.message_seqs for w in task.writes] == [[2]]


def test_a_checkpoint_is_stored_compressed_and_read_back_exactly() -> None:
    workspace, _ = factories.make_workspace("acme")
    versions = {f"channel-{i}": f"{i:010}.0a1b2c3d" for i in range(20)}
    checkpoint = {
        "v": 4,
        "id": "cp-1",
        "channel_versions": versions,
        "versions_seen": {f"node-{i}": dict(versions) for i in range(5)},
    }
    row = langgraph_checkpoint_put(
        workspace=workspace,
        external_id="repair-1",
        checkpoint_ns="",
        checkpoint_id="cp-1",
        parent_checkpoint_id="",
        checkpoint=checkpoint,
        metadata={},
        actor_label="api key test",
    )
    stored = LanggraphCheckpoint.objects.get(pk=row.pk)
    assert stored.checkpoint == checkpoint
    assert len(bytes(stored.checkpoint_z)) * 3 < len(json.dumps(checkpoint))


def test_a_page_of_checkpoints_is_read_in_a_fixed_number_of_queries() -> None:
    workspace, _ = factories.make_workspace("acme")
    for n in range(1, 11):
        _put_after(workspace, f"cp-{n:02}", _entries(FORMS[: 1 + n % 3]), str(n))
    thread = Thread.objects.get(external_id="repair-1")

    def queries(limit: int) -> int:
        rows = langgraph_checkpoints_list(workspace=workspace, external_id="repair-1", limit=limit)
        with CaptureQueriesContext(connection) as captured:
            found = langgraph_tuples(rows)
        assert len(found) == limit
        return len(captured)

    assert queries(2) == queries(10)
    assert thread.lg_checkpoints.count() == 10


def _steps(n: int) -> list[list[dict[str, Any]]]:
    """A tool-calling agent's messages step by step: a call, then its result."""
    return [
        [
            message_to_dict(
                AIMessage("", id=f"a{i}", tool_calls=[{"name": "read", "args": {}, "id": f"c{i}"}])
            ),
            message_to_dict(ToolMessage(f"file {i}", tool_call_id=f"c{i}", id=f"t{i}")),
        ]
        for i in range(n)
    ]


def _agent_put(workspace: Any, step: int, entries: list[MessageIn], count: int) -> Any:
    return langgraph_checkpoint_put(
        workspace=workspace,
        external_id="agent-1",
        actor_label="api key test",
        **_put_arguments(step, entries, count),
    )


def _put_arguments(step: int, entries: list[MessageIn], count: int) -> dict[str, Any]:
    """A put of step `step` (its messages after the `count` of the step before), without the
    workspace and thread."""
    return dict(
        checkpoint_ns="",
        checkpoint_id=f"cp-{step:03}",
        parent_checkpoint_id=f"cp-{step - 1:03}" if step else "",
        checkpoint={
            "v": 4,
            "id": f"cp-{step:03}",
            "channel_versions": {"messages": str(step + 1), "branch:to:agent": str(step + 1)},
        },
        metadata={"source": "loop", "step": step},
        values=[ValueIn(channel="branch:to:agent", version=str(step + 1), type="null", data=b"")],
        messages=MessagesIn(
            channel="messages",
            version=str(step + 1),
            entries=entries,
            base_version=str(step) if step else None,
            base_count=count,
        ),
    )


def _agent_write(
    workspace: Any,
    step: int,
    forms: list[dict[str, Any]],
    *,
    external_id: str = "agent-1",
    interrupt: str = "",
    tools: frozenset[str] = frozenset(),
) -> None:
    """A task's write at step `step`: its messages, or a value of another channel when none;
    with an interrupt when `interrupt` names one."""
    langgraph_writes_put(
        workspace=workspace,
        external_id=external_id,
        checkpoint_ns="",
        checkpoint_id=f"cp-{step:03}",
        task_id=f"task-{step}",
        task_path="tools",
        writes=[WriteIn(idx=0, channel="messages", messages=_entries(forms))]
        if forms
        else [WriteIn(idx=0, channel="x", type="bytes", data=b"\x01")],
        interrupts=[InterruptIn(id=interrupt, value={"ask": step})] if interrupt else [],
        side_effect_tools=tools,
        actor_label="api key test",
    )


def test_an_agents_puts_and_writes_build_no_orm_query_on_postgresql(monkeypatch: Any) -> None:
    """A LangGraph agent puts and writes on every step: on PostgreSQL those requests run
    prepared statements only (docs/benchmarks.md, "LangGraph storage — `bench/storage.py`"), so no
    ORM queryset is built on the way — also none for the work a checkpoint opens, when it opens
    none."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs the ORM's queries")
    workspace, _ = factories.make_workspace("acme")
    steps = _steps(4)
    human = message_to_dict(HumanMessage("review", id="h0"))
    built: list[str] = []
    original = query.QuerySet._filter_or_exclude  # type: ignore[attr-defined]

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(self.model.__name__)
        return original(self, *args, **kwargs)

    count = 0
    for step, (call, result) in enumerate(steps):
        # The previous step's result is in the log already (its write mirrored it).
        entries = [steps[step - 1][1], call] if step else [human, call]
        if step == 2:
            monkeypatch.setattr(query.QuerySet, "_filter_or_exclude", counted)
        _agent_put(workspace, step, _entries(entries), count)
        count += len(entries)
        _agent_write(workspace, step, [result])
    assert built == []
    thread = Thread.objects.get(external_id="agent-1")
    assert LanggraphCheckpoint.objects.filter(thread=thread).count() == 4


def test_an_agents_put_and_write_statements_on_postgresql() -> None:
    """On PostgreSQL a steady-state put and write of a tool-calling agent merge their reads:
    the put reads its base version, its messages' index and the count that extends the base in
    one statement, and learns from the read of its parent's row whether it repeats a stored
    checkpoint; the write reads its messages' index, its checkpoint's cursor and the messages
    after it in one."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs the ORM's queries")
    workspace, _ = factories.make_workspace("acme")
    steps = _steps(3)
    human = message_to_dict(HumanMessage("review", id="h0"))
    count = 0
    for step, (call, result) in enumerate(steps):
        entries = [steps[step - 1][1], call] if step else [human, call]
        with CaptureQueriesContext(connection) as put:
            _agent_put(workspace, step, _entries(entries), count)
        count += len(entries)
        with CaptureQueriesContext(connection) as write:
            _agent_write(workspace, step, [result])
    version_table = LanggraphChannelVersion._meta.db_table
    checkpoint_table = LanggraphCheckpoint._meta.db_table

    def reads(captured: CaptureQueriesContext) -> list[str]:
        return [
            q["sql"]
            for q in captured.captured_queries
            if q["sql"].startswith(("SELECT", "WITH")) and "INSERT" not in q["sql"]
        ]

    put_reads = reads(put)
    # The thread's lock, the near checkpoints, the base with the index and the count that
    # extends it, the replays, the pending work: no statement of its own for the base version,
    # the index, the count or whether the checkpoint is stored.
    assert len(put_reads) == 5, put_reads
    assert not any(
        sql.startswith("SELECT") and f'FROM "{version_table}"' in sql for sql in put_reads
    )
    assert not any(sql.startswith(f'SELECT t.id FROM "{checkpoint_table}"') for sql in put_reads)
    write_reads = reads(write)
    # The thread's lock, the index with the checkpoint's cursor, the replays, the open calls
    # of the result, the checkpoint's writes.
    assert len(write_reads) == 5, write_reads


def _tool_call(message_id: str, *call_ids: str) -> dict[str, Any]:
    """An AI message calling a tool per id, named by the id's prefix (`refund-1`: refund)."""
    calls = [{"name": i.split("-")[0], "args": {"call": i}, "id": i} for i in call_ids]
    return message_to_dict(AIMessage("", id=message_id, tool_calls=calls))


def test_a_puts_pending_work_is_what_the_whole_log_replayed_gives() -> None:
    """A put's ctxadmin Checkpoint holds the work open at its cursor (docs/repairs.md,
    "Checkpoints"), replayed from the nearest trusted checkpoint: its pending list and checksum are
    the ones a replay of the whole log from its first event gives, for side effects opened and
    closed by puts and by writes, an approval opened by an interrupt and decided between steps, and
    calls left open across checkpoints."""
    workspace, _ = factories.make_workspace("acme")
    reviewer = factories.make_person(workspace, "rita", "reviewer")
    tools = frozenset({"refund"})

    def put(step: int, forms: list[dict[str, Any]], count: int) -> None:
        langgraph_checkpoint_put(
            workspace=workspace,
            external_id="agent-2",
            checkpoint_ns="",
            checkpoint_id=f"cp-{step:03}",
            parent_checkpoint_id=f"cp-{step - 1:03}" if step else "",
            checkpoint={"v": 4, "id": f"cp-{step:03}", "channel_versions": {"messages": str(step)}},
            metadata={"source": "loop", "step": step},
            messages=MessagesIn(
                channel="messages",
                version=str(step),
                entries=_entries(forms),
                side_effect_tools=tools,
                base_version=str(step - 1) if step else None,
                base_count=count,
            ),
            actor_label="api key test",
        )

    def write(step: int, forms: list[dict[str, Any]], interrupt: str = "") -> None:
        _agent_write(
            workspace, step, forms, external_id="agent-2", interrupt=interrupt, tools=tools
        )

    def result(call: str, text: str = "done") -> dict[str, Any]:
        return message_to_dict(ToolMessage(text, tool_call_id=call, id=f"r-{call}"))

    human = message_to_dict(HumanMessage("refund orders 1 to 3", id="h0"))
    a0 = _tool_call("a0", "refund-1", "lookup-1")  # a side effect and a plain call
    put(0, [human, a0], 0)
    write(0, [result("lookup-1")])  # the plain call closes; refund-1 stays running
    a1 = _tool_call("a1", "refund-2")
    put(1, [result("lookup-1"), a1], 2)
    write(1, [], interrupt="ask-1")  # an approval request, opened by a write
    put(2, [result("refund-1"), _tool_call("a2", "refund-3")], 4)  # closes refund-1 in a put
    approval = ApprovalRequest.objects.select_related("thread", "thread__workspace").get(
        thread__external_id="agent-2"
    )
    # refund-3 (the same tool) is still running: approving beside it needs an acknowledgement.
    approval_decide(
        approval=approval,
        actor=reviewer,
        decision="approve",
        reason="ok",
        acknowledge_unknown=True,
        acknowledge_reason="refund-3 is another order's refund",
    )
    write(2, [result("refund-2"), result("refund-3")])
    put(3, [result("refund-2"), result("refund-3")], 6)
    put(4, [message_to_dict(AIMessage("all refunded", id="a4"))], 8)

    thread = Thread.objects.get(external_id="agent-2")
    rows = LanggraphCheckpoint.objects.filter(thread=thread).select_related(
        "ctxadmin_checkpoint__thread"
    )
    pendings = {}
    for row in rows.order_by("checkpoint_id"):
        stored = row.ctxadmin_checkpoint
        assert stored.pending == pending_at(
            thread=thread, cursor=stored.cursor, from_checkpoint=False
        )
        assert stored.checksum == checkpoint_checksum(stored)
        pendings[row.checkpoint_id] = [
            (p["kind"], p.get("tool_name"), p.get("action")) for p in stored.pending
        ]
    assert pendings == {
        "cp-000": [("side_effect", "refund", None)],
        "cp-001": [("side_effect", "refund", None), ("side_effect", "refund", None)],
        "cp-002": [
            ("side_effect", "refund", None),
            ("side_effect", "refund", None),
            ("approval", None, INTERRUPT_ACTION),
        ],
        "cp-003": [],
        "cp-004": [],
    }


def test_an_interrupt_written_before_its_checkpoint_is_asked_at_the_checkpoints_put() -> None:
    """LangGraph's default durability sends a task's writes beside the background put of the
    checkpoint it ran from: an interrupt whose write comes first waits for that put, and its
    approval request follows the checkpoint's messages (the call it asks about) in the log,
    once even when the write is sent again."""
    workspace, _ = factories.make_workspace("acme")
    human = message_to_dict(HumanMessage("refund order 7", id="h0"))
    call = _tool_call("a0", "refund-7")
    for _ in range(2):
        _agent_write(workspace, 0, [], interrupt="ask-0")
    thread = Thread.objects.get(external_id="agent-1")
    assert not ApprovalRequest.objects.filter(thread=thread).exists()
    assert thread.events.count() == 0
    _agent_put(workspace, 0, _entries([human, call]), 0)
    kinds = list(thread.events.order_by("seq").values_list("kind", flat=True))
    assert kinds == ["message", "message", "tool_call", "approval_request"]
    [approval] = ApprovalRequest.objects.filter(thread=thread)
    assert approval.arguments == {
        "interrupt_id": "ask-0",
        "value": {"ask": 0},
        "checkpoint_ns": "",
        "checkpoint_id": "cp-000",
        # The call the interrupted task was about to run (the checkpoint's last AI message).
        "tool_call_id": "refund-7",
        "tool_name": "refund",
        "tool_arguments": {"call": "refund-7"},
    }
    assert approval.tool_name == "refund"
    assert LanggraphWrite.objects.get(thread=thread).interrupts is None
    # The write again, after its checkpoint: nothing more.
    _agent_write(workspace, 0, [], interrupt="ask-0")
    assert thread.events.count() == 4
    assert ApprovalRequest.objects.filter(thread=thread).count() == 1


@pytest.mark.parametrize("last", ["put", "writes"], ids=["ends-with-a-put", "ends-with-bytes"])
def test_a_batch_writes_its_threads_head_once_as_its_last_append_left_it(last: str) -> None:
    """A saver's batch of puts and writes appends once per put, and an interrupt's approval
    request in the middle: the thread row's head is written once — by the last operation's
    append, or after it when that one appends nothing — and is the log's (every append
    numbered after the one before it, the chain whole)."""
    workspace, _ = factories.make_workspace("acme")
    human = message_to_dict(HumanMessage("refund order 7", id="h0"))
    steps = [[human, _tool_call("a0", "refund-7")], *_steps(5)]
    operations = [
        # The interrupt comes before its checkpoint, as under LangGraph's default durability:
        # the put of step 0 appends its approval request after the step's messages.
        BatchOperation(
            "writes",
            dict(
                checkpoint_ns="",
                checkpoint_id="cp-000",
                task_id="task-0",
                task_path="tools",
                writes=[WriteIn(idx=0, channel="x", type="bytes", data=b"\x01")],
                interrupts=[InterruptIn(id="ask-0", value={"ask": 0})],
            ),
        )
    ]
    count = 0
    for step, forms in enumerate(steps):
        operations.append(BatchOperation("put", _put_arguments(step, _entries(forms), count)))
        count += len(forms)
    if last == "writes":
        step = len(steps) - 1
        write = WriteIn(idx=0, channel="x", type="bytes", data=b"\x02")
        operations.append(
            BatchOperation(
                "writes",
                dict(
                    checkpoint_ns="",
                    checkpoint_id=f"cp-{step:03}",
                    task_id=f"task-{step}",
                    task_path="agent",
                    writes=[write],
                ),
            )
        )
    thread_table = Thread._meta.db_table
    with CaptureQueriesContext(connection) as seen:
        langgraph_batch_put(workspace=workspace, external_id="agent-1", operations=operations)
    head_updates = [
        q["sql"]
        for q in seen.captured_queries
        if q["sql"].startswith(f'UPDATE "{thread_table}"') and "chain_head" in q["sql"]
    ]
    assert len(head_updates) == 1, head_updates
    thread = Thread.objects.get(external_id="agent-1")
    events = list(thread.events.order_by("seq").values_list("seq", "kind", "hash"))
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    assert [kind for _, kind, _ in events[:4]] == [
        "message",
        "message",
        "tool_call",
        "approval_request",
    ]
    assert (thread.last_seq, thread.chain_head) == (events[-1][0], events[-1][2])
    assert integrity_check(thread=thread, full=True).ok
