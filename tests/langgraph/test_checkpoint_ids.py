"""CtxadminSaver against a live server: a checkpoint id its URL could not reach (`latest`, `a/b`,
`..`) is refused with the 400 the saver raises as ValidationError, and nothing is stored; the
ids LangGraph makes (uuid6) pass and read back, `latest` still naming the newest
(docs/clients.md, docs/api.md,
"Put a checkpoint — `POST /api/v1/threads/{id}/langgraph/checkpoints/`")."""

from __future__ import annotations

import pytest
from ctxadmin_client.errors import ValidationError
from ctxadmin_client.langgraph import CtxadminSaver
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from tests.langgraph.conftest import Server


def _put(saver: CtxadminSaver, checkpoint_id: str | None) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    if checkpoint_id is not None:
        checkpoint["id"] = checkpoint_id
    config: RunnableConfig = {"configurable": {"thread_id": "ids-1", "checkpoint_ns": ""}}
    return saver.put(config, checkpoint, {"source": "loop", "step": 0, "parents": {}}, {})


@pytest.mark.parametrize("bad", ["latest", "a/b", ".."])
def test_the_saver_cannot_store_a_checkpoint_its_url_cannot_reach(
    server: Server, saver: CtxadminSaver, bad: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        _put(saver, bad)
    assert refused.value.code == "validation_error"
    assert "checkpoint_id" in refused.value.fields
    assert not LanggraphCheckpoint.objects.exists()

    stored = _put(saver, None)
    newest = saver.get_tuple({"configurable": {"thread_id": "ids-1", "checkpoint_ns": ""}})
    assert newest is not None
    assert (
        newest.config["configurable"]["checkpoint_id"] == (stored["configurable"]["checkpoint_id"])
    )
    assert LanggraphCheckpoint.objects.count() == 1
