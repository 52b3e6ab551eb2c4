"""Threads: create (agents), list and read (agents and people), docs/api.md §2."""

from __future__ import annotations

from typing import Any, cast

from django.db import models
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import require_agent, thread_for_request
from threads.api.permissions import workspace_ids_for_request
from threads.api.serializers import (
    ErrorSerializer,
    QueryIntegerField,
    StrictCharField,
    StrictFloatField,
    StrictInputSerializer,
    StrictIntegerField,
    ThreadOutputSerializer,
    external_id_validated,
)
from threads.domain.budget import MAX_TOKENS, THREAD_BUDGET_FIELDS, Budget
from threads.domain.tokens import SUPPORTED_ENCODINGS
from threads.models import SummarizerBackend, Thread, ThreadStatus
from threads.selectors import thread_with_flags, threads_in
from threads.services.threads import thread_get_or_create

BUDGET_FIELDS = (
    "context_window",
    "reserved_output",
    "reasoning_reserve",
    "safety_margin",
    "fixed_tokens",
)
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500

ERRORS = {
    400: ErrorSerializer,
    401: ErrorSerializer,
    403: ErrorSerializer,
    404: ErrorSerializer,
    415: ErrorSerializer,
}


def _model_default(name: str) -> Any:
    return cast(models.Field, Thread._meta.get_field(name)).get_default()


class ThreadListCreateApi(APIView):
    """`/api/v1/threads/`: POST creates (or returns by external_id), GET lists."""

    @extend_schema_serializer(component_name="ThreadCreateInput")
    class CreateInputSerializer(StrictInputSerializer):
        external_id = StrictCharField(max_length=200)
        title = StrictCharField(max_length=300, required=False, allow_blank=True)
        context_window = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        reserved_output = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        reasoning_reserve = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        safety_margin = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        fixed_tokens = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        encoding = serializers.ChoiceField(choices=SUPPORTED_ENCODINGS, required=False)
        high_watermark = StrictFloatField(min_value=0, max_value=1, required=False)
        low_watermark = StrictFloatField(min_value=0, max_value=1, required=False)
        summarizer = serializers.ChoiceField(choices=SummarizerBackend.choices, required=False)

        def validate_external_id(self, value: str) -> str:
            return external_id_validated(value)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            high = attrs.get("high_watermark", _model_default("high_watermark"))
            low = attrs.get("low_watermark", _model_default("low_watermark"))
            if not 0 < low < high <= 1:
                raise serializers.ValidationError(
                    {
                        "low_watermark": f"need 0 < low_watermark < high_watermark <= 1 "
                        f"(got low {low}, high {high})"
                    }
                )
            setting = {
                name: attrs.get(field, _model_default(field))
                for name, field in THREAD_BUDGET_FIELDS.items()
            }
            budget = Budget.from_settings(setting)
            if budget.available < 1:
                # No context could ever be served: every request would be budget_too_small.
                raise serializers.ValidationError(
                    {
                        "context_window": f"leaves no tokens for the context: context_window "
                        f"{budget.window} - fixed_tokens {budget.fixed} - reserved_output "
                        f"{budget.reserved_output} - reasoning_reserve "
                        f"{budget.reasoning_reserve} - safety_margin {budget.safety_margin} "
                        f"= {budget.available}"
                    }
                )
            return attrs

    @extend_schema_serializer(component_name="ThreadListFilter")
    class ListFilterSerializer(serializers.Serializer):
        q = serializers.CharField(
            required=False, allow_blank=True, help_text="external_id or title contains (any case)"
        )
        status = serializers.ChoiceField(choices=ThreadStatus.choices, required=False)
        has_unknown_side_effects = serializers.BooleanField(required=False, default=None)
        verification = serializers.ChoiceField(
            choices=["failed"],
            required=False,
            help_text="failed: the latest decided summary version was rejected, or the chain "
            "is broken",
        )
        pending_approvals = serializers.BooleanField(required=False, default=None)
        limit = QueryIntegerField(min_value=1, max_value=MAX_PAGE_SIZE, default=DEFAULT_PAGE_SIZE)
        # Bounded: an OFFSET past 64 bits fails in the database, not here.
        offset = QueryIntegerField(min_value=0, max_value=2**63 - 1, default=0)

    @extend_schema_serializer(component_name="ThreadPage")
    class ListOutputSerializer(serializers.Serializer):
        count = serializers.IntegerField(help_text="threads matching the filters")
        limit = serializers.IntegerField()
        offset = serializers.IntegerField()
        next_offset = serializers.IntegerField(
            allow_null=True, help_text="offset of the next page; null on the last page"
        )
        results = ThreadOutputSerializer(many=True)

    @extend_schema(
        operation_id="threads_create",
        request=CreateInputSerializer,
        responses={201: ThreadOutputSerializer, 200: ThreadOutputSerializer, **ERRORS},
        description="Create a thread (agents only). Posting an existing external_id returns "
        "that thread unchanged with 200.",
    )
    def post(self, request: Request) -> Response:
        agent = require_agent(request, "create threads")
        serializer = self.CreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        thread, created = thread_get_or_create(
            workspace=agent.workspace, actor_label=agent.label, **serializer.validated_data
        )
        return Response(
            ThreadOutputSerializer(thread_with_flags(thread)).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="threads_list",
        parameters=[ListFilterSerializer],
        responses={200: ListOutputSerializer, **ERRORS},
        description="Threads the caller may see, most recently active first, paged by "
        "limit/offset.",
    )
    def get(self, request: Request) -> Response:
        filters = self.ListFilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        limit, offset = params["limit"], params["offset"]
        threads = threads_in(
            workspace_ids=workspace_ids_for_request(request),
            q=params.get("q", ""),
            status=params.get("status", ""),
            unknown=params.get("has_unknown_side_effects"),
            failed=params.get("verification") == "failed",
            pending=params.get("pending_approvals"),
        )
        count = threads.count()
        page = list(threads[offset : offset + limit])
        return Response(
            {
                "count": count,
                "limit": limit,
                "offset": offset,
                "next_offset": offset + limit if offset + limit < count else None,
                "results": ThreadOutputSerializer(page, many=True).data,
            }
        )


class ThreadDetailApi(APIView):
    """`/api/v1/threads/{id}/`: `{id}` is the thread's UUID or its external_id."""

    @extend_schema(
        operation_id="threads_retrieve",
        parameters=[
            OpenApiParameter(
                "id", str, OpenApiParameter.PATH, description="the thread's UUID or its external_id"
            )
        ],
        responses={200: ThreadOutputSerializer, **ERRORS},
    )
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        return Response(ThreadOutputSerializer(thread_with_flags(thread)).data)
