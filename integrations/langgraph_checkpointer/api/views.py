"""The LangGraph checkpointer's endpoints (docs/api.md, "LangGraph checkpointer"), called by
`ctxadmin_client.langgraph.CtxadminSaver` with a workspace's agent key.

A LangGraph `thread_id` is the thread's `external_id` (the `{id}` of these routes; never its
UUID). Channel values and writes travel as base64 of the bytes LangGraph serialised, and come
back byte-identical: nothing here decodes them.
"""

from __future__ import annotations

import base64
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from integrations.langgraph_checkpointer.api.arguments import put_arguments, writes_arguments
from integrations.langgraph_checkpointer.api.bodies import put_body_read, writes_body_read
from integrations.langgraph_checkpointer.api.fields import checkpoint_id_check
from integrations.langgraph_checkpointer.api.serializers import (
    Base64Field,
    CountOutputSerializer,
    InterruptSerializer,
    ListFilterSerializer,
    MessageEntrySerializer,
    MessagesSerializer,
    PageOutputSerializer,
    TupleOutputSerializer,
    ValueSerializer,
    _side_effect_tools,
)
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    LanggraphTuple,
    PendingWrite,
    langgraph_checkpoint_find,
    langgraph_checkpoints_list,
    langgraph_tuple,
    langgraph_tuple_validator,
    langgraph_tuples,
)
from integrations.langgraph_checkpointer.selectors.ledger import langgraph_ledger
from integrations.langgraph_checkpointer.services.checkpoint_put import langgraph_checkpoint_put
from integrations.langgraph_checkpointer.services.threads import (
    PRUNE_STRATEGIES,
    langgraph_runs_delete,
    langgraph_thread_copy,
    langgraph_thread_delete,
    langgraph_threads_prune,
)
from integrations.langgraph_checkpointer.services.writes import langgraph_writes_put
from threads.api.auth import agent_read_mark, require_agent
from threads.api.renderers import LargeJSONRenderer
from threads.api.serializers import (
    ErrorSerializer,
    StrictCharField,
    StrictInputSerializer,
    StrictIntegerField,
)
from threads.domain.errors import NotFound
from threads.selectors.integrity import integrity_verdict
from threads.selectors.run_status import thread_owed_mark

ERRORS = {
    400: ErrorSerializer,
    401: ErrorSerializer,
    403: ErrorSerializer,
    404: ErrorSerializer,
    409: ErrorSerializer,
    422: ErrorSerializer,
}
THREAD_ID = OpenApiParameter(
    "id",
    str,
    OpenApiParameter.PATH,
    description="the LangGraph thread_id: the thread's external_id",
)

IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="the `ETag` of an earlier answer: 304 when the answer would be the same",
)


def _plain_ns(request: Request) -> str | None:
    """A read's `checkpoint_ns` when the query is plainly what the serializer would take as it
    is (printable ASCII, no surrounding spaces, at most 255; absent: ""), as the put's fast
    reader does (api/bodies.py); None: the serializer decides."""
    params = request.query_params
    if not set(params) <= {"checkpoint_ns"} or len(params.getlist("checkpoint_ns")) > 1:
        return None
    value = params.get("checkpoint_ns", "")
    if len(value) > 255 or not value.isascii() or not value.isprintable():
        return None
    return value if value == value.strip() else None


def _last_seq_read(found: LanggraphTuple) -> int:
    """The last seq of the log this answer serves: the checkpoint's cursor (its mirrored
    messages end there) or a pending write's message after it."""
    written = (int(seq) for write in found.writes for seq in write.message_seqs or ())
    return max(found.row.cursor, *written, 0)


def _tuple_json(found: LanggraphTuple) -> dict[str, Any]:
    row = found.row
    return {
        "thread_id": found.external_id,
        "checkpoint_ns": row.checkpoint_ns,
        "checkpoint_id": row.checkpoint_id,
        "parent_checkpoint_id": row.parent_checkpoint_id or None,
        "checkpoint": row.checkpoint,
        "metadata": row.metadata,
        "values": [
            {"channel": c, "type": t, "data": base64.b64encode(d).decode("ascii")}
            for c, t, d in found.values
        ],
        "messages": found.messages,
        "writes": [_write_json(w, found.write_messages.get(w.pk)) for w in found.writes],
        "cursor": row.cursor,
        "ctxadmin_checkpoint": row.ctxadmin_checkpoint_id,
        "integrity": integrity_verdict(thread=row.thread, read_until=_last_seq_read(found)),
    }


def _write_json(write: PendingWrite, messages: list[dict[str, Any]] | None) -> dict[str, Any]:
    answer = {
        "task_id": write.task_id,
        "task_path": write.task_path,
        "idx": write.idx,
        "channel": write.channel,
        "type": write.type,
        "data": base64.b64encode(bytes(write.data)).decode("ascii"),
    }
    if messages is not None:
        answer["messages"] = messages
    return answer


def _list(request: Request, external_id: str | None) -> Response:
    agent = require_agent(request, "read LangGraph checkpoints")
    query = ListFilterSerializer(data=request.query_params.dict())
    query.is_valid(raise_exception=True)
    data = query.validated_data
    limit = data["limit"]
    # Read before the list: what it owed then is what the list shows the agent (run status).
    owed = (
        thread_owed_mark(workspace=agent.workspace, external_id=external_id)
        if external_id is not None
        else None
    )
    rows = langgraph_checkpoints_list(
        workspace=agent.workspace,
        external_id=external_id,
        checkpoint_ns=data.get("checkpoint_ns"),
        checkpoint_id=data.get("checkpoint_id"),
        metadata_filter=data.get("filter"),
        before=data.get("before"),
        after_page=data.get("page_after"),
        limit=limit + 1,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    answer = {
        "checkpoints": [_tuple_json(found) for found in langgraph_tuples(rows)],
        "next": f"{rows[-1].checkpoint_id}:{rows[-1].pk}" if more else None,
    }
    agent_read_mark(request, owed)
    return Response(answer)


class ThreadLanggraphCheckpointsApi(APIView):
    """`/api/v1/threads/{id}/langgraph/checkpoints/`: POST puts a checkpoint, GET lists them."""

    renderer_classes = [LargeJSONRenderer]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "LanggraphPutInput"

        checkpoint_ns = StrictCharField(max_length=255, allow_blank=True, default="")
        checkpoint_id = StrictCharField(max_length=64, validators=[checkpoint_id_check])
        parent_checkpoint_id = StrictCharField(
            max_length=64,
            allow_blank=True,
            allow_null=True,
            default="",
            validators=[checkpoint_id_check],
        )
        checkpoint = serializers.DictField(help_text="the checkpoint without channel_values")
        metadata = serializers.DictField(default=dict)
        values = ValueSerializer(many=True, default=list)
        messages = MessagesSerializer(required=False, allow_null=True, default=None)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "LanggraphPutOutput"

        thread_id = StrictCharField()
        checkpoint_ns = StrictCharField(allow_blank=True)
        checkpoint_id = StrictCharField()
        cursor = serializers.IntegerField()
        ctxadmin_checkpoint = serializers.IntegerField()

    @extend_schema(
        operation_id="langgraph_checkpoint_put",
        parameters=[THREAD_ID],
        request=InputSerializer,
        responses={201: OutputSerializer, **ERRORS},
        description=(
            "Store a LangGraph checkpoint (the thread is created on first put). `values` are the "
            "channel versions that changed, as the saver serialised them; `messages` lists the "
            "mirrored channel's messages by id and digest (all of them, or those after a "
            "`base_version`), with the JSON forms of those the log may not hold. 409 "
            "`messages_missing` (fields.missing): send those forms. 409 `messages_base_unknown`: "
            "send the whole list. 422 `messages_not_mirrored`: store that channel in `values` "
            "instead."
        ),
    )
    def post(self, request: Request, id: str) -> Response:
        agent = require_agent(request, "put LangGraph checkpoints")
        data = put_body_read(request.data)
        if data is None:  # not plainly well-formed: the serializer reads it, or answers 400
            body = self.InputSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            data = body.validated_data
        row = langgraph_checkpoint_put(
            workspace=agent.workspace,
            external_id=id,
            **put_arguments(data),
            actor_label=agent.label,
        )
        return Response(
            {
                "thread_id": id,
                "checkpoint_ns": row.checkpoint_ns,
                "checkpoint_id": row.checkpoint_id,
                "cursor": row.cursor,
                "ctxadmin_checkpoint": row.ctxadmin_checkpoint_id,
            },
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        operation_id="langgraph_thread_checkpoints_list",
        parameters=[THREAD_ID, ListFilterSerializer],
        responses={200: PageOutputSerializer, **ERRORS},
        description="The thread's checkpoints newest first, a page at a time.",
    )
    def get(self, request: Request, id: str) -> Response:
        return _list(request, id)


class ThreadLanggraphCheckpointApi(APIView):
    """`/api/v1/threads/{id}/langgraph/checkpoints/{checkpoint_id}/` (or `latest`)."""

    renderer_classes = [LargeJSONRenderer]

    class QuerySerializer(serializers.Serializer):
        class Meta:
            ref_name = "LanggraphTupleQuery"

        checkpoint_ns = StrictCharField(required=False, allow_blank=True, default="")

    @extend_schema(
        operation_id="langgraph_checkpoint_get",
        parameters=[THREAD_ID, QuerySerializer, IF_NONE_MATCH],
        responses={200: TupleOutputSerializer, 304: None, **ERRORS},
        description="One checkpoint with its values, messages and pending writes; `latest` for "
        "the namespace's newest. 404 when there is none. The answer's `ETag` (also "
        "`validator`) changes with anything it holds: sent back in `If-None-Match`, a 304 with "
        "no body says nothing changed (a rollback made since is a new head: a 200).",
    )
    def get(self, request: Request, id: str, checkpoint_id: str) -> Response:
        agent = require_agent(request, "read LangGraph checkpoints")
        checkpoint_ns = _plain_ns(request)
        if checkpoint_ns is None:  # not plainly well-formed: the serializer reads it, or 400
            query = self.QuerySerializer(data=request.query_params.dict())
            query.is_valid(raise_exception=True)
            checkpoint_ns = query.validated_data["checkpoint_ns"]
        row = langgraph_checkpoint_find(
            workspace=agent.workspace,
            external_id=id,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=None if checkpoint_id == "latest" else checkpoint_id,
        )
        if row is None:
            raise NotFound("checkpoint not found")
        validator = langgraph_tuple_validator(row)
        # The thread row came with the checkpoint, in the same statement (run status).
        if validator in request.headers.get("If-None-Match", "").split(", "):
            agent_read_mark(request, row.thread)
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": validator})
        found = langgraph_tuple(row)
        answer = {**_tuple_json(found), "ledger": langgraph_ledger(found), "validator": validator}
        agent_read_mark(request, row.thread)
        return Response(answer, headers={"ETag": validator})


class ThreadLanggraphWritesApi(APIView):
    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "LanggraphWritesInput"

        class WriteSerializer(StrictInputSerializer):
            class Meta:
                ref_name = "LanggraphWriteInput"

            # The column is a 32-bit integer: a larger idx would fail in PostgreSQL, not here.
            idx = StrictIntegerField(
                min_value=-(2**31), max_value=2**31 - 1, help_text="negative for special channels"
            )
            channel = StrictCharField(max_length=255)
            type = StrictCharField(max_length=64, required=False)
            data = Base64Field(required=False)  # type: ignore[assignment]
            messages = MessageEntrySerializer(
                many=True,
                required=False,
                help_text="instead of `type` and `data`: a write of LangChain messages to the "
                "mirrored channel, each with its JSON form; mirrored into the log",
            )

            def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
                has_bytes = "type" in attrs and "data" in attrs
                if has_bytes == ("messages" in attrs):
                    raise serializers.ValidationError(
                        {"messages": "send either `type` and `data` or `messages`"}
                    )
                if "messages" in attrs and any(e.get("message") is None for e in attrs["messages"]):
                    raise serializers.ValidationError(
                        {"messages": "each message of a write comes with its JSON form"}
                    )
                return attrs

        checkpoint_ns = StrictCharField(max_length=255, allow_blank=True, default="")
        checkpoint_id = StrictCharField(max_length=64, validators=[checkpoint_id_check])
        task_id = StrictCharField(max_length=200)
        task_path = StrictCharField(max_length=500, allow_blank=True, default="")
        writes = WriteSerializer(many=True)
        interrupts = InterruptSerializer(many=True, required=False, default=list)
        side_effect_tools = _side_effect_tools()

    @extend_schema(
        operation_id="langgraph_writes_put",
        parameters=[THREAD_ID],
        request=InputSerializer,
        responses={204: None, **ERRORS},
        description="Store a task's pending writes after a checkpoint. A write of `messages` "
        "is mirrored into the log and stored as a reference to it. 409 `messages_unordered` "
        "or 422 `messages_not_mirrored`: send that write as bytes instead.",
    )
    def post(self, request: Request, id: str) -> Response:
        agent = require_agent(request, "put LangGraph writes")
        data = writes_body_read(request.data)
        if data is None:  # not plainly well-formed: the serializer reads it, or answers 400
            body = self.InputSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            data = body.validated_data
        langgraph_writes_put(
            workspace=agent.workspace,
            external_id=id,
            **writes_arguments(data),
            actor_label=agent.label,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class ThreadLanggraphApi(APIView):
    @extend_schema(
        operation_id="langgraph_thread_delete",
        parameters=[THREAD_ID],
        responses={200: CountOutputSerializer, **ERRORS},
        description="Delete the thread's LangGraph checkpoints, versions and writes; the event "
        "log stays. Audited.",
    )
    def delete(self, request: Request, id: str) -> Response:
        agent = require_agent(request, "delete LangGraph checkpoints")
        count = langgraph_thread_delete(
            workspace=agent.workspace, external_id=id, actor_label=agent.label
        )
        return Response({"checkpoints": count})


class ThreadLanggraphCopyApi(APIView):
    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "LanggraphCopyInput"

        target_thread_id = StrictCharField(max_length=200)

    @extend_schema(
        operation_id="langgraph_thread_copy",
        parameters=[THREAD_ID],
        request=InputSerializer,
        responses={200: CountOutputSerializer, **ERRORS},
        description="Copy the thread's checkpoints, versions and writes to `target_thread_id` "
        "(created if needed; its messages are mirrored into its own log). Audited.",
    )
    def post(self, request: Request, id: str) -> Response:
        agent = require_agent(request, "copy LangGraph threads")
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        count = langgraph_thread_copy(
            workspace=agent.workspace,
            source_external_id=id,
            target_external_id=body.validated_data["target_thread_id"],
            actor_label=agent.label,
        )
        return Response({"checkpoints": count})


class LanggraphCheckpointsApi(APIView):
    """`/api/v1/langgraph/checkpoints/`: the workspace's checkpoints, every thread."""

    renderer_classes = [LargeJSONRenderer]

    @extend_schema(
        operation_id="langgraph_checkpoints_list",
        parameters=[ListFilterSerializer],
        responses={200: PageOutputSerializer, **ERRORS},
        description="Every thread's checkpoints newest first, a page at a time.",
    )
    def get(self, request: Request) -> Response:
        return _list(request, None)


class LanggraphPruneApi(APIView):
    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "LanggraphPruneInput"

        thread_ids = serializers.ListField(
            child=StrictCharField(max_length=200), allow_empty=True, max_length=1000
        )
        strategy = serializers.ChoiceField(choices=PRUNE_STRATEGIES, default="keep_latest")

    @extend_schema(
        operation_id="langgraph_prune",
        request=InputSerializer,
        responses={200: CountOutputSerializer, **ERRORS},
        description="`keep_latest`: keep each namespace's newest checkpoint; `delete`: delete "
        "all. The event logs stay. Audited per thread.",
    )
    def post(self, request: Request) -> Response:
        agent = require_agent(request, "prune LangGraph checkpoints")
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        count = langgraph_threads_prune(
            workspace=agent.workspace,
            external_ids=body.validated_data["thread_ids"],
            strategy=body.validated_data["strategy"],
            actor_label=agent.label,
        )
        return Response({"checkpoints": count})


class LanggraphDeleteForRunsApi(APIView):
    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "LanggraphDeleteForRunsInput"

        run_ids = serializers.ListField(
            child=StrictCharField(max_length=200), allow_empty=True, max_length=1000
        )

    @extend_schema(
        operation_id="langgraph_delete_for_runs",
        request=InputSerializer,
        responses={200: CountOutputSerializer, **ERRORS},
        description="Delete the checkpoints (and writes) whose metadata `run_id` is listed. "
        "Audited per thread.",
    )
    def post(self, request: Request) -> Response:
        agent = require_agent(request, "delete LangGraph runs")
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        count = langgraph_runs_delete(
            workspace=agent.workspace,
            run_ids=body.validated_data["run_ids"],
            actor_label=agent.label,
        )
        return Response({"checkpoints": count})
