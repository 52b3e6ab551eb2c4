"""The serializer check for a checkpoint_id (integrations.langgraph_checkpointer.domain
.checkpoint_ids), which states its pattern for the OpenAPI schema (`schema_pattern`, read by
threads.api.schema)."""

from __future__ import annotations

from rest_framework import serializers

from integrations.langgraph_checkpointer.domain.checkpoint_ids import (
    CHECKPOINT_ID_PATTERN,
    checkpoint_id_problem,
)


class CheckpointIdCheck:
    schema_pattern = CHECKPOINT_ID_PATTERN

    def __call__(self, value: str) -> None:
        problem = checkpoint_id_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)


checkpoint_id_check = CheckpointIdCheck()
