"""A batch of a thread's LangGraph puts and writes, applied in order in one transaction: what a
saver that pipelines its writes sends (docs/langgraph.md, "Pipelined writes")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from integrations.langgraph_checkpointer.services.checkpoint_put import (
    _locked_thread,
    langgraph_checkpoint_put_locked,
)
from integrations.langgraph_checkpointer.services.writes import langgraph_writes_put_locked
from threads.domain.errors import DomainError
from threads.models import Workspace
from threads.services.event_rows import head_deferred

MAX_OPERATIONS = 64


@dataclass(frozen=True)
class BatchOperation:
    """One put (`kind` "put": `langgraph_checkpoint_put`'s arguments) or one task's writes
    (`kind` "writes": `langgraph_writes_put`'s), without the workspace and thread."""

    kind: str
    arguments: dict[str, Any]


def langgraph_batch_put(
    *,
    workspace: Workspace,
    external_id: str,
    operations: Sequence[BatchOperation],
    actor_label: str = "",
) -> list[LanggraphCheckpoint | None]:
    """Apply `operations` to the thread `external_id` (created on first use) in order, in one
    transaction holding the thread's lock: each as its own request would, all or none. The
    stored checkpoint of each put (None for writes). An operation's refusal is raised with its
    index in `fields.operation`, and nothing of the batch is stored."""
    results: list[LanggraphCheckpoint | None] = []
    with transaction.atomic(durable=True):
        thread = _locked_thread(workspace, external_id, actor_label)
        # The thread row's head written once for the batch, by its last operation's append
        # (or after it), not once per put's messages.
        with head_deferred(thread) as head:
            for index, operation in enumerate(operations):
                if index == len(operations) - 1:
                    head.resume()
                try:
                    if operation.kind == "put":
                        results.append(
                            langgraph_checkpoint_put_locked(thread=thread, **operation.arguments)
                        )
                    else:
                        langgraph_writes_put_locked(thread=thread, **operation.arguments)
                        results.append(None)
                except DomainError as exc:
                    exc.fields = {**exc.fields, "operation": index}
                    raise
    return results
