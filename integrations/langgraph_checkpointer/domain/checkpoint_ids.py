"""The rule for a LangGraph checkpoint_id (docs/api.md,
"Put a checkpoint — `POST /api/v1/threads/{id}/langgraph/checkpoints/`"): an external_id's rule (one
URL path segment, threads.domain.external_ids) at most 64 characters, and not `latest`.

A checkpoint_id is the segment of `.../langgraph/checkpoints/{checkpoint_id}/`, where `latest`
names the namespace's newest checkpoint: a checkpoint called so could never be read by its id.
"""

from __future__ import annotations

from threads.domain.external_ids import segment_problem

MAX_CHECKPOINT_ID = 64
LATEST = "latest"
# The rule as the OpenAPI schema states it.
CHECKPOINT_ID_PATTERN = (
    r"^(?!(?:\.|\.\.|latest)$)[^/\x00]*(?:[^\s\x1c-\x1f\x85/\x00]|\ufeff)[^/\x00]*$"
)


def checkpoint_id_problem(value: str) -> str | None:
    """Why `value` cannot be a LangGraph checkpoint_id, or None when it can."""
    if value == LATEST:
        return f"must not be '{LATEST}', which names the newest checkpoint"
    return segment_problem(value, MAX_CHECKPOINT_ID)
