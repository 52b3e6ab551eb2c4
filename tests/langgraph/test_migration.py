"""Migration 0012 packs the checkpoint JSON of LangGraph checkpoints already stored, and
unpacks it again going back: nothing LangGraph sent is lost on the way."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from integrations.langgraph_checkpointer.domain.messages import checkpoint_unpack

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("threads", "0011_metrics")]
AFTER = [("threads", "0012_lgstore")]
CHECKPOINT = {
    "v": 4,
    "id": "cp-1",
    "channel_versions": {"messages": "00000000000000000000000000000002.0.123", "é": "1"},
    "versions_seen": {"agent": {"messages": "00000000000000000000000000000001.0.9"}},
}


def _migrate(target: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def test_stored_checkpoints_are_packed_and_unpacked_exactly() -> None:
    apps = _migrate(BEFORE)
    workspace = apps.get_model("threads", "Workspace").objects.create(name="acme")
    thread = apps.get_model("threads", "Thread").objects.create(
        workspace=workspace, external_id="old-1", chain_head="0" * 64
    )
    ctxadmin = apps.get_model("threads", "Checkpoint").objects.create(
        thread=thread, cursor=0, chain_hash="0" * 64, checksum="0" * 64
    )
    apps.get_model("threads", "LanggraphCheckpoint").objects.create(
        thread=thread, checkpoint_id="cp-1", checkpoint=CHECKPOINT, ctxadmin_checkpoint=ctxadmin
    )
    apps = _migrate(AFTER)
    row = apps.get_model("threads", "LanggraphCheckpoint").objects.get()
    assert checkpoint_unpack(bytes(row.checkpoint_z)) == CHECKPOINT
    apps = _migrate(BEFORE)
    assert apps.get_model("threads", "LanggraphCheckpoint").objects.get().checkpoint == CHECKPOINT
    _migrate(executor_leaf())


def executor_leaf() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
