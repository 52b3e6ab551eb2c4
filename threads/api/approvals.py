"""Approvals over the API (docs/api.md, "Side effects and approvals").

- `GET /api/v1/approvals/?status=pending`: agents (their workspace) and people (theirs).
- `POST /api/v1/approvals/{id}/decide/` `{"decision": "approve|reject", "reason"}` (reviewer+,
  people only): appends an `approval_decision` event; a second decision is 409
  `already_decided`, a request past its `expires_at` 409 `approval_expired`; approving beside
  a related side effect that is `unknown` or `running` is 409 `related_side_effect_unknown`
  unless the body says `"acknowledge_unknown": true` with an `acknowledge_reason`.
- `GET /api/v1/threads/{id}/approvals/`: one thread's requests and decisions, which the agent
  polls to read a decision back.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import agent_read_mark, thread_for_request
from threads.api.permissions import IsPerson, workspace_ids_for_request
from threads.api.serializers import ErrorSerializer, StrictCharField, StrictInputSerializer
from threads.models import ApprovalStatus
from threads.selectors import approval_get_in, approval_rows, approvals_in, approvals_of_thread
from threads.selectors.approval_context import approval_contexts
from threads.selectors.run_status import approval_picked_up
from threads.services.approvals import DECISIONS, approval_decide

ERRORS = {400: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer, 409: ErrorSerializer}
MAX_LIST = 1000


class RelatedSideEffectSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    thread = serializers.CharField()
    thread_external_id = serializers.CharField()
    call_seq = serializers.IntegerField()
    tool_name = serializers.CharField()
    tool_call_id = serializers.CharField()
    idempotency_key = serializers.CharField(allow_blank=True)
    status = serializers.CharField()
    match = serializers.ChoiceField(choices=["idempotency_key", "tool"])


class RecentMessageSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    role = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True)


class ConstraintSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True)
    sources = serializers.ListField(child=serializers.IntegerField())


class ApprovalOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    thread = serializers.CharField()
    thread_external_id = serializers.CharField()
    approval_seq = serializers.IntegerField(help_text="seq of the approval_request event")
    action = serializers.CharField()
    tool_name = serializers.CharField(allow_blank=True)
    arguments = serializers.JSONField()
    status = serializers.ChoiceField(choices=ApprovalStatus.values)
    decision = serializers.CharField(allow_null=True, help_text="approve, reject or null")
    reason = serializers.CharField(allow_blank=True)
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_seq = serializers.IntegerField(
        allow_null=True, help_text="seq of the approval_decision event"
    )
    expires_at = serializers.DateTimeField(allow_null=True)
    expired = serializers.BooleanField(
        help_text="still pending and past expires_at: it can no longer be decided"
    )
    created_at = serializers.DateTimeField()
    related_side_effects = RelatedSideEffectSerializer(
        many=True,
        help_text="side effects with the idempotency key the arguments name (any thread of the "
        "workspace) or of the same tool in the thread; approving beside one `unknown` or "
        "`running` is 409 related_side_effect_unknown unless acknowledged",
    )
    recent_messages = RecentMessageSerializer(
        many=True, help_text="the last messages before the request, oldest first"
    )
    active_constraints = ConstraintSerializer(
        many=True,
        help_text="the thread's active constraints (head summary and annotations after it)",
    )
    agent_picked_up = serializers.BooleanField(
        allow_null=True,
        help_text="a decided request: false while the thread's agent has not read its "
        "context, approvals or its saved graph state since the decision, true once it has; null "
        "when there is nothing to say (undecided, closed by ctxadmin, or decided before reads "
        "were recorded)",
    )


def approval_answers(approvals: Any) -> list[dict[str, Any]]:
    """Approval rows with what bears on each (selectors.approval_contexts)."""
    approvals = list(approvals)
    contexts = approval_contexts(approvals)
    rows = approval_rows(approvals)
    for row, approval in zip(rows, approvals, strict=True):
        row.update(contexts[approval.pk])
        row["agent_picked_up"] = approval_picked_up(approval, approval.thread)
    return rows


ANY = "any"


class StatusFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[*ApprovalStatus.values, ANY], required=False, allow_blank=True
    )
    expired = serializers.BooleanField(required=False, default=None)

    def validate_status(self, value: str) -> str:
        return "" if value == ANY else value


STATUS_PARAMETER = OpenApiParameter(
    "status",
    str,
    enum=[*ApprovalStatus.values, ANY],
    description="any (or empty, or left out): every status",
)
EXPIRED_PARAMETER = OpenApiParameter(
    "expired",
    bool,
    description="true: only requests that expired undecided; false: only the others",
)


class ApprovalListApi(APIView):
    @extend_schema(
        parameters=[STATUS_PARAMETER, EXPIRED_PARAMETER],
        responses={200: ApprovalOutputSerializer(many=True), **ERRORS},
        operation_id="approvals_list",
    )
    def get(self, request: Request) -> Response:
        filters = StatusFilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        approvals = approvals_in(
            workspace_ids=workspace_ids_for_request(request),
            status=filters.validated_data.get("status", ""),
            expired=filters.validated_data["expired"],
        )
        return Response(
            ApprovalOutputSerializer(approval_answers(approvals[:MAX_LIST]), many=True).data
        )


class ApprovalDecideApi(APIView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "ApprovalDecideInput"

        decision = serializers.ChoiceField(choices=list(DECISIONS))
        reason = StrictCharField(max_length=2000)
        acknowledge_unknown = serializers.BooleanField(
            required=False,
            default=False,
            help_text="approve although a related side effect is unknown or running",
        )
        acknowledge_reason = StrictCharField(
            max_length=2000, required=False, default="", allow_blank=True
        )

    @extend_schema(
        request=InputSerializer,
        responses={200: ApprovalOutputSerializer, **ERRORS},
        operation_id="approval_decide",
    )
    def post(self, request: Request, id: int) -> Response:
        workspace_ids = workspace_ids_for_request(request)
        approval = approval_get_in(workspace_ids=workspace_ids, id=id)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        approval_decide(
            approval=approval,
            actor=request.user,  # type: ignore[arg-type]
            decision=body.validated_data["decision"],
            reason=body.validated_data["reason"],
            acknowledge_unknown=body.validated_data["acknowledge_unknown"],
            acknowledge_reason=body.validated_data["acknowledge_reason"],
        )
        decided = approval_get_in(workspace_ids=workspace_ids, id=id)
        return Response(ApprovalOutputSerializer(approval_answers([decided])[0]).data)


class ThreadApprovalsApi(APIView):
    @extend_schema(
        parameters=[STATUS_PARAMETER, EXPIRED_PARAMETER],
        responses={200: ApprovalOutputSerializer(many=True), **ERRORS},
        operation_id="thread_approvals_list",
    )
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        filters = StatusFilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        approvals = approvals_of_thread(
            thread=thread,
            status=filters.validated_data.get("status", ""),
            expired=filters.validated_data["expired"],
        )
        answer = ApprovalOutputSerializer(approval_answers(approvals), many=True).data
        agent_read_mark(request, thread)
        return Response(answer)
