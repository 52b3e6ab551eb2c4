"""The working context over the API (docs/api.md,
"Working context — `GET /api/v1/threads/{id}/context/`").

`GET /api/v1/threads/{id}/context/` answers the head summary plus the events after it, trimmed
to the budget; query parameters override the thread's budget settings for this one request.
Agents of the workspace and every member role may read it.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import agent_read_mark, thread_for_request
from threads.api.serializers import QueryIntegerField, ReadIntegritySerializer
from threads.domain.budget import MAX_TOKENS
from threads.selectors import integrity_verdict, working_context
from threads.services.metrics import context_request_observed


class ContextSummarySerializer(serializers.Serializer):
    version = serializers.IntegerField()
    covered_until = serializers.IntegerField()
    content = serializers.JSONField()
    checksum = serializers.CharField()
    rendered = serializers.CharField(allow_blank=True)
    tokens = serializers.IntegerField()


class TrimmedUnitSerializer(serializers.Serializer):
    from_seq = serializers.IntegerField()
    to_seq = serializers.IntegerField()
    tokens = serializers.IntegerField()
    reason = serializers.CharField()


class ContextBudgetSerializer(serializers.Serializer):
    window = serializers.IntegerField()
    fixed = serializers.IntegerField()
    reserved_output = serializers.IntegerField()
    reasoning_reserve = serializers.IntegerField()
    safety_margin = serializers.IntegerField()
    available = serializers.IntegerField()
    used = serializers.IntegerField()
    sections = serializers.DictField(child=serializers.IntegerField())


class UnansweredCallSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    tool_call_id = serializers.CharField()
    tool_name = serializers.CharField()
    side_effect = serializers.BooleanField()
    idempotency_key = serializers.CharField(allow_null=True)


class ThreadContextApi(APIView):
    class InputSerializer(serializers.Serializer):
        # Bounded as the thread's own settings are stored (32-bit): a larger number would fail
        # in the database that logs the request, not here.
        window = QueryIntegerField(min_value=1, max_value=MAX_TOKENS, required=False)
        reserved_output = QueryIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        reasoning_reserve = QueryIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        safety_margin = QueryIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)
        fixed_tokens = QueryIntegerField(min_value=0, max_value=MAX_TOKENS, required=False)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkingContext"

        summary = ContextSummarySerializer(allow_null=True)
        reset_at = serializers.IntegerField(
            allow_null=True,
            help_text="the last reset after the head summary: the summary and every event up "
            "to it are left out (summary is null)",
        )
        events = serializers.ListField(
            child=serializers.JSONField(),
            help_text="the events after the summary, each call followed by exactly one result: "
            "a call with no result but a resolution by a result built from it "
            "(`from_resolution`), a second result (`duplicate_of`) left out",
        )
        unanswered_calls = UnansweredCallSerializer(
            many=True,
            help_text="calls in `events` with neither a result nor a resolution: a model must "
            "not read them as they are (a side-effecting one waits for a person)",
        )
        read_until = serializers.IntegerField()
        trimmed_units = TrimmedUnitSerializer(many=True)
        budget = ContextBudgetSerializer()
        needs_fold = serializers.BooleanField()
        integrity = ReadIntegritySerializer()

    @extend_schema(
        parameters=[InputSerializer],
        responses={200: OutputSerializer},
        operation_id="thread_context",
    )
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        params = self.InputSerializer(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        with context_request_observed(thread=thread) as seen:
            answer = seen.answer = working_context(
                thread=thread, overrides=dict(params.validated_data)
            )
        # The answer is plain values already (OutputSerializer documents it); running it through
        # the serializer again would cost more than the read itself on a large window.
        answer["integrity"] = integrity_verdict(thread=thread, read_until=answer["read_until"])
        agent_read_mark(request, thread)
        return Response(answer)
