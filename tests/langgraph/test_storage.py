"""What the server does with what CtxadminSaver sends: bytes stored as sent and deduplicated,
workspaces kept apart, delete / prune / copy that leave the event log and its chain alone."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
import pytest
from ctxadmin_client import Client
from ctxadmin_client.langgraph import CtxadminSaver
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphWrite,
)
from tests import factories
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import run_script, values_form
from tests.langgraph.steps import put_steps
from threads.models import AuditEntry, Checkpoint, Event, Thread
from threads.services.integrity import integrity_check

# Bytes that are neither msgpack nor pickle nor JSON: the server must never try to read them.
OPAQUE = b"\x80\x05\xc1\xff not msgpack \x00\xde\xad\xbe\xef" + os.urandom(64)


class OpaqueSerde:
    """A serializer whose bytes mean nothing to anyone but itself."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return ("opaque+cipher", obj if isinstance(obj, bytes) else OPAQUE + repr(obj).encode())

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        assert data[0] == "opaque+cipher"
        return data[1]


def _put(saver: CtxadminSaver, thread_id: str, values: dict[str, Any], **kw: Any) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    versions: ChannelVersions = {name: saver.get_next_version(None, None) for name in values}
    checkpoint["channel_versions"] = versions
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **kw}}
    return saver.put(config, checkpoint, {"source": "loop", "step": 0, "parents": {}}, versions)


def test_the_server_stores_bytes_it_cannot_read_and_returns_them_unchanged(
    server: Server,
) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key)
    saver.serde = OpaqueSerde()  # type: ignore[assignment]
    stored = _put(saver, "opaque-1", {"state": OPAQUE})
    saver.put_writes(stored, [("state", OPAQUE[::-1]), ("__error__", OPAQUE)], "task-1")
    found = saver.get_tuple(stored)
    assert found is not None
    assert found.checkpoint["channel_values"]["state"] == OPAQUE
    assert sorted(w[2] for w in found.pending_writes or []) == sorted([OPAQUE, OPAQUE[::-1]])
    assert bytes(LanggraphContent.objects.get().data) == OPAQUE
    # The checkpoint's row holds the task's writes: no row of their own.
    assert not LanggraphWrite.objects.exists()
    (task,) = LanggraphCheckpoint.objects.get().task_writes
    assert task.task_id == "task-1" and {w.data for w in task.writes} == {OPAQUE, OPAQUE[::-1]}
    saver.close()


def test_equal_values_are_stored_once(server: Server, saver: CtxadminSaver) -> None:
    big = {"rows": list(range(2000))}
    for thread_id in ("dedup-1", "dedup-2"):
        _put(saver, thread_id, {"big": big, "other": thread_id})
    # big once; each thread's small "other" lives in its checkpoint row: no row of its own
    assert LanggraphContent.objects.count() == 1
    assert set(LanggraphChannelVersion.objects.values_list("channel", flat=True)) == {"big"}
    assert LanggraphChannelVersion.objects.count() == 2
    for thread_id in ("dedup-1", "dedup-2"):
        (row,) = LanggraphCheckpoint.objects.filter(thread__external_id=thread_id)
        assert set(row.small_values) == {"big", "other"}  # big: "in a version row"
        assert row.small_values["big"] is None and row.small_values["other"] is not None
        found = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        assert found is not None
        assert found.checkpoint["channel_values"] == {"big": big, "other": thread_id}


def test_another_workspace_key_sees_nothing(server: Server, saver: CtxadminSaver) -> None:
    stored = _put(saver, "private-1", {"state": "secret"})
    _, other_key = factories.make_workspace("other")
    intruder = CtxadminSaver.from_url(server.url, other_key)
    assert intruder.get_tuple(stored) is None
    assert list(intruder.list(stored)) == [] and list(intruder.list(None)) == []
    headers = {"Authorization": f"Bearer {other_key}"}
    checkpoint_id = stored["configurable"]["checkpoint_id"]
    for path in ("latest", checkpoint_id):
        answer = httpx.get(
            f"{server.url}/api/v1/threads/private-1/langgraph/checkpoints/{path}/",
            headers=headers,
        )
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "not_found"
    # Deleting, pruning or copying another workspace's thread touches nothing.
    intruder.delete_thread("private-1")
    intruder.prune(["private-1"], strategy="delete")
    intruder.copy_thread("private-1", "stolen")
    assert saver.get_tuple(stored) is not None
    assert not Thread.objects.filter(external_id="stolen").exists()
    intruder.close()


def test_people_cannot_use_the_agent_endpoints(server: Server) -> None:
    answer = httpx.get(f"{server.url}/api/v1/langgraph/checkpoints/")
    assert answer.status_code in (401, 403)


def _mixed_thread(saver: CtxadminSaver, thread_id: str) -> list[RunnableConfig]:
    """Three checkpoints whose messages grow; the middle one with a run_id."""
    steps: list[list[Any]] = [
        [],
        [
            AIMessage(
                "",
                id="a1",
                tool_calls=[{"name": "refund", "args": {"order": 7}, "id": "c1"}],
            )
        ],
        [ToolMessage("refunded", tool_call_id="c1", id="t1")],
    ]
    return put_steps(
        saver,
        thread_id,
        [HumanMessage("refund order 7", id="h1")],
        steps,
        metadata_for=lambda step: {"run_id": "run-1"} if step == 1 else {},
    )


def _log(thread: Thread) -> list[tuple[int, str]]:
    return list(Event.objects.filter(thread=thread).order_by("seq").values_list("seq", "hash"))


def test_delete_and_prune_keep_the_log_and_audit(server: Server, saver: CtxadminSaver) -> None:
    configs = _mixed_thread(saver, "keep-log")
    thread = Thread.objects.get(external_id="keep-log")
    log = _log(thread)
    assert len(log) == 4  # user, assistant, its tool call, the result
    head = saver.get_tuple(configs[-1])
    assert head is not None
    assert [m.id for m in head.checkpoint["channel_values"]["messages"]] == ["h1", "a1", "t1"]

    saver.delete_for_runs(["run-1"])
    assert saver.get_tuple(configs[1]) is None and saver.get_tuple(configs[2]) is not None

    saver.prune(["keep-log"], strategy="keep_latest")
    assert [t.config for t in saver.list({"configurable": {"thread_id": "keep-log"}})] == [
        configs[2]
    ]
    # A config naming a checkpoint lists that one only, as LangGraph's savers do.
    assert [t.config for t in saver.list(configs[2])] == [configs[2]]
    assert list(saver.list(configs[0])) == []
    latest = saver.get_tuple({"configurable": {"thread_id": "keep-log"}})
    assert latest is not None
    assert values_form(latest.checkpoint["channel_values"]) == values_form(
        head.checkpoint["channel_values"]
    )
    assert [w[2] for w in latest.pending_writes or []] == [2]

    saver.delete_thread("keep-log")
    assert saver.get_tuple(configs[2]) is None
    assert not LanggraphCheckpoint.objects.filter(thread=thread).exists()
    assert not LanggraphChannelVersion.objects.filter(thread=thread).exists()
    assert not LanggraphWrite.objects.filter(thread=thread).exists()
    assert not LanggraphContent.objects.exists()
    # The log and its chain are untouched; the ctxadmin checkpoints stay, marked unsafe.
    assert _log(thread) == log
    assert integrity_check(thread=thread, full=True).ok
    checkpoints = Checkpoint.objects.filter(thread=thread)
    assert checkpoints.count() == 3 and not checkpoints.filter(safe=True).exists()
    audit = AuditEntry.objects.filter(thread=thread, action__startswith="langgraph.")
    assert sorted(audit.values_list("action", flat=True)) == [
        "langgraph.delete_for_runs",
        "langgraph.delete_thread",
        "langgraph.prune",
    ]
    assert set(audit.values_list("actor_label", flat=True)) == {f"api key {_key_name(server)}"}

    # Putting again after a delete mirrors nothing twice: the log already holds the messages.
    _mixed_thread(saver, "keep-log")
    assert _log(thread) == log


def _key_name(server: Server) -> str:
    return server.workspace.api_keys.get().name


def test_copy_thread_mirrors_the_messages_into_the_targets_own_log(
    server: Server, saver: CtxadminSaver
) -> None:
    configs = _mixed_thread(saver, "copy-src")
    saver.copy_thread("copy-src", "copy-dst")
    source = Thread.objects.get(external_id="copy-src")
    target = Thread.objects.get(external_id="copy-dst")
    assert [e[0] for e in _log(target)] == [1, 2, 3, 4]
    assert _log(target) != _log(source)  # its own chain
    assert integrity_check(thread=target, full=True).ok
    for config in configs:
        copied = saver.get_tuple(
            {"configurable": {**config["configurable"], "thread_id": "copy-dst"}}
        )
        original = saver.get_tuple(config)
        assert copied is not None and original is not None
        assert values_form(copied.checkpoint["channel_values"]) == values_form(
            original.checkpoint["channel_values"]
        )
        assert copied.pending_writes == original.pending_writes
    assert Checkpoint.objects.filter(thread=target, label__startswith="langgraph:").count() == 3
    assert AuditEntry.objects.filter(thread=target, action="langgraph.copy_thread").exists()


def test_a_graph_resumes_from_a_fresh_saver(server: Server) -> None:
    """A new process (a new saver, no memory of what it sent) continues the same thread."""
    first = CtxadminSaver.from_url(server.url, server.api_key)
    app, config = run_script(first)["tools"]
    first.close()
    second = CtxadminSaver.from_url(server.url, server.api_key)
    thread = Thread.objects.get(external_id=config["configurable"]["thread_id"])
    before = thread.events.count()
    app.checkpointer = second
    app.update_state(config, {"messages": [HumanMessage("thanks", id="m-thanks")]})
    assert thread.events.count() == before + 1
    assert app.get_state(config).values["messages"][-1].id == "m-thanks"
    second.close()


@pytest.mark.django_db
def test_the_endpoints_are_in_the_openapi_schema() -> None:
    GENERATOR_STATS.reset()
    schema = SchemaGenerator().get_schema(request=None, public=True)
    paths = schema["paths"]
    assert set(paths["/api/v1/threads/{id}/langgraph/checkpoints/"]) == {"get", "post"}
    for route in (
        "/api/v1/threads/{id}/langgraph/",
        "/api/v1/threads/{id}/langgraph/checkpoints/{checkpoint_id}/",
        "/api/v1/threads/{id}/langgraph/writes/",
        "/api/v1/threads/{id}/langgraph/copy/",
        "/api/v1/langgraph/checkpoints/",
        "/api/v1/langgraph/prune/",
        "/api/v1/langgraph/delete-for-runs/",
    ):
        assert route in paths, route
    warnings = [w for w in GENERATOR_STATS._warn_cache if "langgraph" in str(w).lower()]
    assert warnings == []


class Recording(httpx.HTTPTransport):
    """A transport that keeps the JSON bodies the saver sends, by path."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            body = json.loads(request.content)
            if request.url.path.endswith("/langgraph/batch/"):
                # A pipelined batch: each operation as the request it stands for.
                prefix = request.url.path.removesuffix("batch/")
                for operation in body["operations"]:
                    ((kind, sent),) = operation.items()
                    path = prefix + ("checkpoints/" if kind == "put" else "writes/")
                    self.sent.append((path, sent))
            else:
                self.sent.append((request.url.path, body))
        return super().handle_request(request)


def _recording_saver(server: Server) -> tuple[CtxadminSaver, Recording]:
    recording = Recording()
    client = Client(server.url, server.api_key, transport=recording)  # type: ignore[arg-type]
    return CtxadminSaver(client), recording


def test_puts_send_only_new_messages_and_writes_refer_to_the_log(server: Server) -> None:
    saver, recording = _recording_saver(server)
    app, config = run_script(saver)["tools"]
    thread = Thread.objects.get(external_id=config["configurable"]["thread_id"])
    path = f"/threads/{thread.external_id}/langgraph/checkpoints/"
    puts = [b["messages"] for p, b in recording.sent if p.endswith(path) and b["messages"]]
    assert len(puts) >= 8
    # After the first, every put builds on the version before it: one or two new messages.
    assert all(m.get("base_version") for m in puts[1:])
    assert max(len(m["entries"]) for m in puts[1:]) <= 2
    # Most writes of messages went as JSON forms and are stored as references to the log.
    writes = [
        w
        for row in LanggraphCheckpoint.objects.filter(thread=thread)
        for task in row.task_writes
        for w in task.writes
    ]
    writes += [w for row in LanggraphWrite.objects.filter(thread=thread) for w in row.writes]
    writes = [w for w in writes if w.channel == "messages"]
    referenced = [w for w in writes if w.message_seqs is not None]
    # The others are messages LangGraph had not given an id yet (its reducer does).
    for write in writes:
        if write.message_seqs is None:
            value = saver.serde.loads_typed((write.type, write.data))
            assert any(message.id is None for message in value)
    assert len(referenced) >= 4  # at least the four AI messages, which come with ids
    assert all(w.data == b"" for w in referenced)
    # The log holds each message once, in the conversation's order.
    messages = app.get_state(config).values["messages"]
    carrying = Event.objects.filter(thread=thread, metadata__has_key="langchain").order_by("seq")
    assert [str(i) for i in carrying.values_list("client_event_id", flat=True)] == [
        str(m.id) for m in messages
    ]
    # And the state reads back as the in-memory saver has it.
    memory_app, memory_config = run_script(InMemorySaver())["tools"]
    assert values_form(app.get_state(config).values) == values_form(
        memory_app.get_state(memory_config).values
    )
    saver.close()


def test_a_saver_whose_knowledge_is_stale_resends_the_whole_list(server: Server) -> None:
    saver, recording = _recording_saver(server)
    first: list[Any] = [HumanMessage("refund order 7", id="h1")]
    stored = _put(saver, "stale-1", {"messages": first})
    # Another process deletes the thread's checkpoints: the version the saver would build on.
    other = CtxadminSaver.from_url(server.url, server.api_key)
    other.delete_thread("stale-1")
    other.close()
    recording.sent.clear()
    second = [*first, AIMessage("done", id="a1")]
    _put(
        saver,
        "stale-1",
        {"messages": second},
        checkpoint_id=stored["configurable"]["checkpoint_id"],
    )
    puts = [b["messages"] for _, b in recording.sent]
    assert [bool(m.get("base_version")) for m in puts] == [True, False]  # refused, then all
    assert [len(m["entries"]) for m in puts] == [1, 2]
    found = saver.get_tuple({"configurable": {"thread_id": "stale-1"}})
    assert found is not None
    assert found.checkpoint["channel_values"]["messages"] == second
    saver.close()


def test_a_put_with_an_unknown_base_is_a_conflict_in_the_error_shape(
    server: Server, saver: CtxadminSaver
) -> None:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    answer = httpx.post(
        f"{server.url}/api/v1/threads/base-1/langgraph/checkpoints/",
        headers=headers,
        json={
            "checkpoint_id": "cp-1",
            "checkpoint": {"v": 4, "id": "cp-1", "channel_versions": {"messages": "2"}},
            "messages": {
                "channel": "messages",
                "version": "2",
                "entries": [],
                "base_version": "1",
                "base_count": 3,
            },
        },
    )
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "messages_base_unknown"


def test_copy_thread_keeps_the_side_effect_marking(server: Server) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools=["add"])
    _, config = run_script(saver)["tools"]
    source_id = config["configurable"]["thread_id"]
    saver.copy_thread(source_id, "copy-effects")

    def marked(external_id: str) -> list[tuple[str, bool]]:
        calls = Event.objects.filter(thread__external_id=external_id, kind="tool_call").order_by(
            "seq"
        )
        return [(e.data["tool_name"], bool(e.data.get("side_effect"))) for e in calls]

    assert ("add", True) in marked(source_id)
    assert marked("copy-effects") == marked(source_id)
    saver.close()
