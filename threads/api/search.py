"""Message search over the API (docs/api.md, "Message search — `GET /api/v1/search/`"):
`GET /api/v1/search/?q=…`, for agents (their workspace) and people (every workspace they belong
to)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.permissions import workspace_ids_for_request
from threads.api.serializers import ErrorSerializer, QueryIntegerField
from threads.domain.search import MAX_QUERY_TERMS, too_many_terms
from threads.selectors import MAX_HITS, SearchHit, events_search

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer}
DEFAULT_HITS = 20


class SnippetPartSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="plain text, as the agent wrote it (not HTML)")
    hit = serializers.BooleanField(help_text="true: this part matched the query")


class SearchHitSerializer(serializers.Serializer):
    event_id = serializers.IntegerField(help_text="the hit's key; pass it as `before`")
    thread = serializers.UUIDField(source="thread_id")
    thread_external_id = serializers.CharField(source="external_id")
    seq = serializers.IntegerField()
    kind = serializers.CharField()
    snippet = SnippetPartSerializer(many=True)


class SearchApi(APIView):
    @extend_schema_serializer(component_name="SearchFilter")
    class FilterSerializer(serializers.Serializer):
        q = serializers.CharField(
            max_length=500,
            allow_blank=True,
            help_text="whitespace-separated terms, all required; a term of several words "
            "(lookup_order) is a phrase; no words: no hits",
        )
        limit = QueryIntegerField(min_value=1, max_value=MAX_HITS, default=DEFAULT_HITS)
        before = QueryIntegerField(
            min_value=1,
            max_value=2**63 - 1,
            required=False,
            help_text="only hits older than this event_id (the last hit of the page before)",
        )

        def validate_q(self, value: str) -> str:
            count = too_many_terms(value)
            if count is not None:
                raise serializers.ValidationError(
                    f"at most {MAX_QUERY_TERMS} terms, every one required; this has {count}"
                )
            return value

    @extend_schema_serializer(component_name="SearchPage")
    class OutputSerializer(serializers.Serializer):
        results = SearchHitSerializer(many=True)
        next_before = serializers.IntegerField(
            allow_null=True, help_text="`before` for the next page; null on the last page"
        )

    @extend_schema(
        operation_id="search_events",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **ERRORS},
        description="Events whose messages, tool calls (name and arguments), tool results, "
        "annotations or approval requests hold every term of q, newest first.",
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params: dict[str, Any] = filters.validated_data
        limit = params["limit"]
        hits: list[SearchHit] = events_search(
            workspace_ids=workspace_ids_for_request(request),
            q=params["q"],
            limit=limit + 1,
            before=params.get("before"),
        )
        page = hits[:limit]
        return Response(
            {
                "results": SearchHitSerializer(page, many=True).data,
                "next_before": page[-1].event_id if len(hits) > limit else None,
            }
        )
