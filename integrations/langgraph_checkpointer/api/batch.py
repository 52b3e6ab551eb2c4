"""`POST /api/v1/threads/{id}/langgraph/batch/`: a thread's puts and writes in order, applied
in one transaction (docs/api.md, "LangGraph checkpointer"): what `CtxadminSaver` sends when it
pipelines its writes (docs/langgraph.md, "Pipelined writes")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from integrations.langgraph_checkpointer.api.arguments import put_arguments, writes_arguments
from integrations.langgraph_checkpointer.api.bodies import put_body_read, writes_body_read
from integrations.langgraph_checkpointer.api.views import (
    ERRORS,
    THREAD_ID,
    ThreadLanggraphCheckpointsApi,
    ThreadLanggraphWritesApi,
)
from integrations.langgraph_checkpointer.services.batch import (
    MAX_OPERATIONS,
    BatchOperation,
    langgraph_batch_put,
)
from threads.api.auth import require_agent
from threads.api.serializers import StrictCharField, StrictInputSerializer

KINDS = ("put", "writes")


def _fast_read(data: Any) -> list[BatchOperation] | None:
    """The operations, read without DRF's fields when each is plainly well-formed (as the put
    and writes endpoints read theirs); None: the serializer decides."""
    if not isinstance(data, dict) or set(data) != {"operations"}:
        return None
    items = data["operations"]
    if type(items) is not list or not 0 < len(items) <= MAX_OPERATIONS:
        return None
    operations = []
    for item in items:
        if type(item) is not dict or len(item) != 1:
            return None
        kind, body = next(iter(item.items()))
        if kind == "put":
            read = put_body_read(body)
            if read is None:
                return None
            operations.append(BatchOperation("put", put_arguments(read)))
        elif kind == "writes":
            read = writes_body_read(body)
            if read is None:
                return None
            operations.append(BatchOperation("writes", writes_arguments(read)))
        else:
            return None
    return operations


class ThreadLanggraphBatchApi(APIView):
    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "LanggraphBatchInput"

        class OperationSerializer(StrictInputSerializer):
            class Meta:
                ref_name = "LanggraphBatchOperation"

            put = ThreadLanggraphCheckpointsApi.InputSerializer(required=False)
            writes = ThreadLanggraphWritesApi.InputSerializer(required=False)

            def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
                if len(attrs) != 1:
                    raise serializers.ValidationError(
                        {"put": "each operation is either a `put` or a `writes`"}
                    )
                return attrs

        operations = serializers.ListField(
            child=OperationSerializer(), min_length=1, max_length=MAX_OPERATIONS
        )

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "LanggraphBatchOutput"

        class ResultSerializer(serializers.Serializer):
            class Meta:
                ref_name = "LanggraphBatchResult"

            checkpoint_ns = StrictCharField(allow_blank=True)
            checkpoint_id = StrictCharField()
            cursor = serializers.IntegerField()
            ctxadmin_checkpoint = serializers.IntegerField()

        results = serializers.ListField(
            child=ResultSerializer(allow_null=True),
            help_text="in the operations' order: a put's stored checkpoint, null for writes",
        )

    @extend_schema(
        operation_id="langgraph_batch_put",
        parameters=[THREAD_ID],
        request=InputSerializer,
        responses={200: OutputSerializer, **ERRORS},
        description=(
            "Apply a thread's puts and writes (each the body of `langgraph_checkpoint_put` or "
            f"`langgraph_writes_put`; at most {MAX_OPERATIONS}) in order, in one transaction: "
            "all or none. A refusal is the refused operation's own (its codes as on its "
            "endpoint), with its index in `fields.operation`; nothing of the batch is stored."
        ),
    )
    def post(self, request: Request, id: str) -> Response:
        agent = require_agent(request, "put LangGraph checkpoints")
        operations = _fast_read(request.data)
        if operations is None:  # not plainly well-formed: the serializer reads it, or 400
            body = self.InputSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            operations = [
                BatchOperation("put", put_arguments(item["put"]))
                if "put" in item
                else BatchOperation("writes", writes_arguments(item["writes"]))
                for item in body.validated_data["operations"]
            ]
        rows = langgraph_batch_put(
            workspace=agent.workspace,
            external_id=id,
            operations=operations,
            actor_label=agent.label,
        )
        return Response(
            {
                "results": [
                    None
                    if row is None
                    else {
                        "checkpoint_ns": row.checkpoint_ns,
                        "checkpoint_id": row.checkpoint_id,
                        "cursor": row.cursor,
                        "ctxadmin_checkpoint": row.ctxadmin_checkpoint_id,
                    }
                    for row in rows
                ]
            }
        )
