"""Threads: create (agents), list and read (agents and people), docs/api.md, "Threads"."""

from __future__ import annotations

from typing import Any, cast

from django.db import models
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import require_agent, thread_for_request
from threads.api.permissions import IsPersonForWrites, workspace_ids_for_request
from threads.api.serializers import (
    ErrorSerializer,
    QueryIntegerField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictInputSerializer,
    StrictIntegerField,
    ThreadOutputSerializer,
    external_id_validated,
)
from threads.domain.budget import MAX_TOKENS, settings_problems
from threads.domain.run_status import RUN_STATUSES
from threads.domain.tokens import SUPPORTED_ENCODINGS
from threads.models import SummarizerBackend, Thread, ThreadStatus
from threads.selectors import thread_with_flags, threads_in
from threads.services.thread_update import MAX_PAUSE_REASON, thread_update
from threads.services.threads import (
    THREAD_SETTINGS,
    thread_get_or_create,
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


class ThreadSettingsFields(StrictInputSerializer):
    """The settings a thread is created with and an admin may change later (docs/api.md,
    "Create — `POST /api/v1/threads/` (agents)" and "Settings — `PATCH /api/v1/threads/{id}/`"): the
    budget, the watermarks and the summariser. The encoding is set once: the stored events were
    counted in it."""

    context_window = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
    reserved_output = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
    reasoning_reserve = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
    safety_margin = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
    fixed_tokens = StrictIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
    high_watermark = StrictFloatField(min_value=0, max_value=1, required=False)
    low_watermark = StrictFloatField(min_value=0, max_value=1, required=False)
    summarizer = serializers.ChoiceField(choices=SummarizerBackend.choices, required=False)


class ThreadListCreateApi(APIView):
    """`/api/v1/threads/`: POST creates (or returns by external_id), GET lists."""

    @extend_schema_serializer(component_name="ThreadCreateInput")
    class CreateInputSerializer(ThreadSettingsFields):
        external_id = StrictCharField(max_length=200)
        title = StrictCharField(max_length=300, required=False, allow_blank=True)
        encoding = serializers.ChoiceField(choices=SUPPORTED_ENCODINGS, required=False)

        def validate_external_id(self, value: str) -> str:
            return external_id_validated(value)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            settings = {field: attrs.get(field, _model_default(field)) for field in THREAD_SETTINGS}
            problems = settings_problems(settings)
            if problems:
                raise serializers.ValidationError(problems)
            return attrs

    @extend_schema_serializer(component_name="ThreadListFilter")
    class ListFilterSerializer(serializers.Serializer):
        q = serializers.CharField(
            required=False, allow_blank=True, help_text="external_id or title contains (any case)"
        )
        status = serializers.ChoiceField(choices=ThreadStatus.choices, required=False)
        has_unknown_side_effects = serializers.BooleanField(required=False, default=None)
        has_secrets = serializers.BooleanField(
            required=False,
            default=None,
            help_text="true: only threads with an event that holds a secret found at ingest; "
            "false: only those without",
        )
        verification = serializers.ChoiceField(
            choices=["failed"],
            required=False,
            help_text="failed: the latest decided summary version was rejected, or the chain "
            "is broken",
        )
        pending_approvals = serializers.BooleanField(required=False, default=None)
        run_status = serializers.ChoiceField(
            choices=RUN_STATUSES,
            required=False,
            help_text="only threads in this run status "
            '(docs/api.md, "Read — `GET /api/v1/threads/{id}/`")',
        )
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
            secrets=params.get("has_secrets"),
            failed=params.get("verification") == "failed",
            pending=params.get("pending_approvals"),
            run_status=params.get("run_status", ""),
        )
        count = threads.count()
        page = list(threads[offset : offset + limit])
        return Response(
            {
                "count": count,
                "limit": limit,
                "offset": offset,
                "next_offset": offset + limit if offset + limit < count else None,
                "results": ThreadOutputSerializer(page, many=True, context={"listed": True}).data,
            }
        )


class ThreadDetailApi(APIView):
    """`/api/v1/threads/{id}/`: `{id}` is the thread's UUID or its external_id. GET for agents
    and people; PATCH (its settings) for admins, people only."""

    permission_classes = [IsPersonForWrites]

    @extend_schema_serializer(component_name="ThreadSettingsInput")
    class SettingsInputSerializer(ThreadSettingsFields):
        title = StrictCharField(max_length=300, required=False, allow_blank=True)
        folds_paused = StrictBooleanField(
            required=False,
            help_text="true pauses the thread's folds (pause_reason required); false releases "
            "a pause, a rollback's pin too",
        )
        pause_reason = StrictCharField(
            max_length=MAX_PAUSE_REASON,
            required=False,
            allow_blank=True,
            help_text="why the folds pause (required with folds_paused: true), or why they resume",
        )

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

    @extend_schema(
        operation_id="threads_partial_update",
        parameters=[
            OpenApiParameter(
                "id", str, OpenApiParameter.PATH, description="the thread's UUID or its external_id"
            )
        ],
        request=SettingsInputSerializer,
        responses={200: ThreadOutputSerializer, **ERRORS},
        description="Change the thread's title, summariser, budget and watermarks, and pause "
        "or resume its folds (admin, people only). The settings are checked as a whole, as at "
        "creation: 400 and nothing changed when they do not hold. Audited.",
    )
    def patch(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        body = self.SettingsInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        updated = thread_update(thread=thread, actor=request.user, **body.validated_data)
        return Response(ThreadOutputSerializer(thread_with_flags(updated)).data)
