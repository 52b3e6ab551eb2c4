"""Folding and summaries over the API (docs/api.md, "Summaries and folding").

`POST /api/v1/threads/{id}/fold/` queues a fold (agents and people, operator and up) and answers
202 with its task id; nothing new to fold is a successful no-op of that task. `GET
.../summaries/` and `.../summaries/{version}/` show every version with its phase, trigger,
verification report and the text the agent receives.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.access import require_role
from threads.api.auth import is_agent, thread_for_request
from threads.api.serializers import StrictCharField, StrictInputSerializer, optional_body
from threads.models import Role, SummaryPhase, SummaryVersion
from threads.selectors import summary_version_get, summary_versions_full
from threads.services.fold_requests import fold_request


class SummaryOutputSerializer(serializers.ModelSerializer):
    class VerificationSerializer(serializers.Serializer):
        class CheckSerializer(serializers.Serializer):
            class Meta:
                ref_name = "VerificationCheck"

            name = StrictCharField()
            ok = serializers.BooleanField()
            detail = StrictCharField(allow_blank=True)

        class Meta:
            ref_name = "Verification"

        ok = serializers.BooleanField(allow_null=True)
        checks = CheckSerializer(many=True)

    verification = serializers.SerializerMethodField()
    failed_checks = serializers.SerializerMethodField()
    # A plain string here: the thread's `summarizer` already names this choice set in the
    # schema, and a second name for it is a drf-spectacular warning (check --deploy fails).
    backend = StrictCharField(help_text="the summariser backend: structured or llm")

    class Meta:
        model = SummaryVersion
        ref_name = "SummaryVersion"
        fields = [
            "version",
            "phase",
            "base_version",
            "covered_from",
            "covered_until",
            "trigger",
            "backend",
            "checksum",
            "chain_hash",
            "content",
            "rendered",
            "tokens",
            "tokens_replaced",
            "verification",
            "failed_checks",
            "created_at",
            "decided_at",
        ]

    @extend_schema_field(VerificationSerializer)
    def get_verification(self, version: SummaryVersion) -> dict[str, Any]:
        # A prepared candidate has not been verified yet: ok is null, no checks.
        report = version.verification or {}
        return {"ok": report.get("ok"), "checks": report.get("checks", [])}

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_failed_checks(self, version: SummaryVersion) -> list[str]:
        """The names of the checks that refused it (empty unless rejected)."""
        checks = (version.verification or {}).get("checks", [])
        return [check["name"] for check in checks if not check.get("ok")]


class ThreadFoldApi(APIView):
    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "FoldRequest"

        reason = StrictCharField(required=False, allow_blank=True, max_length=300)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "FoldTask"

        task_id = StrictCharField()

    @extend_schema(
        request=InputSerializer, responses={202: OutputSerializer}, operation_id="thread_fold"
    )
    def post(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        principal = request.user
        if not is_agent(principal):
            require_role(principal, thread.workspace, Role.OPERATOR)
        body = self.InputSerializer(data=optional_body(request))
        body.is_valid(raise_exception=True)
        who = principal.label if is_agent(principal) else principal.get_username()  # type: ignore[union-attr]
        reason = body.validated_data.get("reason") or f"requested by {who}"
        run = fold_request(
            thread=thread, trigger={"kind": "manual", "reason": reason}, actor=principal
        )
        return Response(
            self.OutputSerializer({"task_id": run.id}).data, status=status.HTTP_202_ACCEPTED
        )


class ThreadSummaryListApi(APIView):
    class FilterSerializer(serializers.Serializer):
        phase = serializers.ChoiceField(choices=SummaryPhase.values, required=False)
        status = serializers.ChoiceField(choices=SummaryPhase.values, required=False)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "status", str, enum=SummaryPhase.values, description="the same as `phase`"
            ),
            OpenApiParameter(
                "phase",
                str,
                enum=SummaryPhase.values,
                description="only the versions in this phase (rejected: the candidates "
                "verification refused, each with its checks)",
            ),
        ],
        responses={200: SummaryOutputSerializer(many=True)},
        operation_id="thread_summaries",
    )
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        filters = self.FilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        versions = summary_versions_full(
            thread=thread,
            phase=filters.validated_data.get("phase") or filters.validated_data.get("status", ""),
        )
        return Response(SummaryOutputSerializer(versions, many=True).data)


class ThreadSummaryDetailApi(APIView):
    @extend_schema(responses={200: SummaryOutputSerializer}, operation_id="thread_summary")
    def get(self, request: Request, id: str, version: int) -> Response:
        thread = thread_for_request(request, id)
        found = summary_version_get(thread=thread, version=version)
        return Response(SummaryOutputSerializer(found).data)
