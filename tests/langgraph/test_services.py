"""The LangGraph services called server-side, as a repair would: no HTTP, no saver."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, message_to_dict

from tests import factories
from threads.domain.langgraph import message_digest
from threads.models import Checkpoint, LanggraphChannelVersion, Thread
from threads.selectors.langgraph import lg_checkpoint_get, lg_tuple
from threads.services.langgraph import (
    MessageIn,
    MessagesIn,
    MessagesMissing,
    MessagesNotMirrored,
    ValueIn,
    langgraph_checkpoint_put,
    langgraph_checkpoint_put_locked,
)

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
    found = lg_checkpoint_get(thread=thread, checkpoint_ns="", checkpoint_id=None)
    assert found is not None
    assert lg_tuple(found).messages == {"messages": FORMS}

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
    thread = Thread.objects.get(external_id="repair-1")
    assert thread.last_seq == 0  # all or nothing
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
    found = lg_tuple(head)
    assert found.messages == {"messages": FORMS[:1]}
    assert [v[0] for v in found.values] == ["other"]
    latest = lg_checkpoint_get(thread=thread, checkpoint_ns="", checkpoint_id=None)
    assert latest is not None and latest.checkpoint_id == "cp-3"
