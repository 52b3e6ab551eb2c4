"""Side effects over the API (docs/api.md, "Side effects and approvals").

- `GET /api/v1/side-effects/?status=unknown&thread=...&idempotency_key=...`: agents (their
  workspace) and people (theirs).
- `POST /api/v1/side-effects/{id}/resolve/` `{"status", "evidence"}` (operator+, people only):
  appends a `side_effect_resolution` event.
- `POST /api/v1/side-effects/{id}/check/` (operator+, people only): queues the tool's status
  check (`ctxadmin.side_effect_status_check`) and answers 202 with its task id.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.permissions import IsPerson, workspace_ids_for_request
from threads.api.serializers import ErrorSerializer, StrictCharField, StrictInputSerializer
from threads.models import SideEffectStatus
from threads.selectors import side_effect_get_in, side_effect_rows, side_effects_in
from threads.services.side_effects import (
    RESOLUTION_STATUSES,
    side_effect_check_request,
    side_effect_resolve,
)

ERRORS = {400: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer, 409: ErrorSerializer}
MAX_LIST = 1000


class ResolutionSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    status = serializers.CharField()
    evidence = serializers.CharField()
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()


class SecondResultSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    status = serializers.CharField()


class SideEffectOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    thread = serializers.CharField()
    thread_external_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    tool_name = serializers.CharField()
    idempotency_key = serializers.CharField()
    status = serializers.CharField()
    call_seq = serializers.IntegerField()
    result_seq = serializers.IntegerField(allow_null=True)
    request_id = serializers.CharField(allow_blank=True)
    updated_at = serializers.DateTimeField()
    resolutions = ResolutionSerializer(many=True)
    second_results = SecondResultSerializer(
        many=True,
        help_text="results stored for the call after its first (flagged duplicate_of in the "
        "log); they never move the status",
    )


class SideEffectListApi(APIView):
    class FilterSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SideEffectListFilter"

        status = serializers.ChoiceField(choices=SideEffectStatus.values, required=False)
        thread = serializers.CharField(required=False)
        idempotency_key = serializers.CharField(required=False, allow_blank=True, max_length=200)

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=SideEffectStatus.values),
            OpenApiParameter("thread", str, description="a thread's UUID or external_id"),
            OpenApiParameter(
                "idempotency_key",
                {"type": "string", "maxLength": 200},
                description="the record of this key (with `thread`: the ledger's answer for "
                "one call an agent is about to make); empty: any key",
            ),
        ],
        responses={200: SideEffectOutputSerializer(many=True), **ERRORS},
        operation_id="side_effects_list",
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        effects = side_effects_in(
            workspace_ids=workspace_ids_for_request(request),
            status=filters.validated_data.get("status", ""),
            thread=filters.validated_data.get("thread", ""),
            idempotency_key=filters.validated_data.get("idempotency_key", ""),
        )
        return Response(
            SideEffectOutputSerializer(side_effect_rows(effects[:MAX_LIST]), many=True).data
        )


class SideEffectResolveApi(APIView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "SideEffectResolveInput"

        status = serializers.ChoiceField(choices=RESOLUTION_STATUSES)
        evidence = StrictCharField(max_length=10_000)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SideEffectResolveOutput"

        side_effect = SideEffectOutputSerializer()
        seq = serializers.IntegerField(help_text="the side_effect_resolution event's seq")
        hash = serializers.CharField()

    @extend_schema(
        request=InputSerializer,
        responses={200: OutputSerializer, **ERRORS},
        operation_id="side_effect_resolve",
    )
    def post(self, request: Request, id: int) -> Response:
        effect = side_effect_get_in(workspace_ids=workspace_ids_for_request(request), id=id)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        event = side_effect_resolve(
            side_effect=effect,
            actor=request.user,  # type: ignore[arg-type]
            status=body.validated_data["status"],
            evidence=body.validated_data["evidence"],
        )
        effect.refresh_from_db()
        answer = {
            "side_effect": side_effect_rows([effect])[0],
            "seq": event.seq,
            "hash": event.hash,
        }
        return Response(self.OutputSerializer(answer).data)


class SideEffectCheckApi(APIView):
    permission_classes = [IsPerson]

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "SideEffectCheckOutput"

        task_id = serializers.CharField()

    @extend_schema(
        request=None, responses={202: OutputSerializer, **ERRORS}, operation_id="side_effect_check"
    )
    def post(self, request: Request, id: int) -> Response:
        effect = side_effect_get_in(workspace_ids=workspace_ids_for_request(request), id=id)
        run = side_effect_check_request(side_effect=effect, actor=request.user)  # type: ignore[arg-type]
        return Response(
            self.OutputSerializer({"task_id": run.id}).data, status=status.HTTP_202_ACCEPTED
        )
