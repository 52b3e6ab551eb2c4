"""A thread's event log: agents append, agents and people page through it (docs/api.md,
"Events — `/api/v1/threads/{id}/events/`").

The append path is the hot path: the body is validated by the domain and answered with plain
dicts, and the service writes a whole batch in a constant number of queries.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import agent_of, require_agent, thread_for_request
from threads.api.serializers import (
    AppendedEventSerializer,
    ErrorSerializer,
    EventBatchInputSerializer,
    EventInputSerializer,
    EventOutputSerializer,
    QueryIntegerField,
)
from threads.domain.canonical import canonical_text
from threads.domain.errors import DomainError, InvalidEvent
from threads.domain.events import NewEvent, normalize_event
from threads.selectors import event_dict, event_dicts
from threads.services.events import Appended, thread_events_append

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
MAX_SEQ = 2**63 - 1  # a 64-bit column: larger numbers would fail in the database, not here

THREAD_ID = OpenApiParameter(
    "id", str, OpenApiParameter.PATH, description="the thread's UUID or its external_id"
)

# One event answers an object, a batch a list of them.
APPEND_RESULT = PolymorphicProxySerializer(
    component_name="EventAppendResult",
    serializers=[AppendedEventSerializer, AppendedEventSerializer(many=True)],
    resource_type_field_name=None,
    many=False,
)


def _batch_bodies(body: Any) -> tuple[list[Any], bool]:
    """The submitted events and whether they came as a batch. Raises InvalidEvent."""
    if isinstance(body, dict) and "events" in body:
        extra = sorted(set(body) - {"events"})
        if extra:
            raise InvalidEvent(
                'a batch is {"events": [...]} and nothing else',
                fields={name: "unknown field in a batch" for name in extra},
            )
        events = body["events"]
        if not isinstance(events, list):
            raise InvalidEvent("events must be a list", fields={"events": "must be a list"})
        limit = settings.CTXADMIN_MAX_BATCH_EVENTS
        if not events:
            raise InvalidEvent(
                "a batch needs at least one event", fields={"events": "must not be empty"}
            )
        if len(events) > limit:
            raise InvalidEvent(
                f"a batch holds at most {limit} events; this one has {len(events)}",
                fields={"events": f"at most {limit} events"},
            )
        return events, True
    if isinstance(body, dict):
        return [body], False
    raise InvalidEvent('send one event object or {"events": [...]}')


def _normalize_all(bodies: list[Any], *, batch: bool) -> list[NewEvent]:
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    out = []
    for index, body in enumerate(bodies):
        try:
            out.append(normalize_event(body, max_bytes=max_bytes))
        except DomainError as exc:
            if not batch:
                raise
            # Name the event: with 1000 in a batch, "invalid message event" alone is useless.
            raise type(exc)(
                f"events[{index}]: {exc.message}",
                fields={f"events[{index}]": exc.fields or exc.message},
            ) from exc
    return out


def _appended_json(appended: Appended) -> str:
    """One event of the answer, as JSON text: a new event's is assembled from the canonical
    pieces its append encoded, a replay's original is encoded from the stored row."""
    row = appended.row
    if appended.chained is None or row is None:
        return canonical_text({**event_dict(appended.event), "replayed": not appended.created})
    # The chained form with the derived fields after it: an answer needs no key order.
    # `secrets` only when the append found some (docs/event-log.md, "Secrets at ingest").
    secrets = f',"secrets":{canonical_text(row.secrets)}' if row.secrets else ""
    return (
        f'{appended.chained[:-1]},"token_count":{row.token_count},'
        f'"hash":{canonical_text(row.hash)}{secrets},"replayed":false}}'
    )


class ThreadEventsApi(APIView):
    """`/api/v1/threads/{id}/events/`: POST appends (agents), GET pages the log."""

    @extend_schema_serializer(component_name="EventPageFilter")
    class PageFilterSerializer(serializers.Serializer):
        after = QueryIntegerField(
            min_value=0, max_value=MAX_SEQ, default=0, help_text="return events with seq > after"
        )
        limit = QueryIntegerField(min_value=1, max_value=MAX_PAGE_SIZE, default=DEFAULT_PAGE_SIZE)

    @extend_schema_serializer(component_name="EventPage")
    class PageOutputSerializer(serializers.Serializer):
        events = EventOutputSerializer(many=True)
        last_seq = serializers.IntegerField(help_text="the thread's last seq at this read")
        next_after = serializers.IntegerField(
            allow_null=True, help_text="pass as `after` for the next page; null at the end"
        )

    @extend_schema(
        operation_id="threads_events_append",
        parameters=[THREAD_ID],
        request=PolymorphicProxySerializer(
            component_name="EventAppendInput",
            serializers=[EventInputSerializer, EventBatchInputSerializer],
            resource_type_field_name=None,
        ),
        responses={
            201: OpenApiResponse(APPEND_RESULT, description="at least one event was new"),
            200: OpenApiResponse(
                APPEND_RESULT,
                description="every event was an idempotent replay: the originals",
            ),
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
            415: ErrorSerializer,
            422: ErrorSerializer,
        },
        examples=[
            OpenApiExample(
                "message",
                request_only=True,
                value={
                    "client_event_id": "m-1",
                    "kind": "message",
                    "role": "user",
                    "content": "Refund order 10086",
                },
            ),
            OpenApiExample(
                "batch",
                request_only=True,
                value={
                    "events": [
                        {
                            "kind": "tool_call",
                            "tool_call_id": "c1",
                            "tool_name": "refund",
                            "arguments": {"order": "10086"},
                            "side_effect": True,
                            "idempotency_key": "refund-10086",
                        },
                        {"kind": "tool_result", "tool_call_id": "c1", "status": "timeout"},
                    ]
                },
            ),
        ],
        description=(
            'Append one event, or {"events": [...]} (1 to 1000, all or nothing). Agents only. '
            "201 with the stored event (a list for a batch); when every event is a replay of "
            "the same client_event_id and body, 200 with the originals. Each answer says "
            "`replayed`. 409: client_event_id reused with another body. 422: a tool_result "
            "with no open call. 413: an event over CTXADMIN_MAX_EVENT_BYTES or a request over "
            "DATA_UPLOAD_MAX_MEMORY_SIZE."
        ),
    )
    def post(self, request: Request, id: str) -> HttpResponse:
        if agent_of(request) is None:
            # A person: another workspace's thread is 404 before anything else is said.
            thread_for_request(request, id)
        agent = require_agent(request, "append events")
        bodies, batch = _batch_bodies(request.data)
        new_events = _normalize_all(bodies, batch=batch)
        # The body is parsed and validated before the thread's lock is taken; the lookup
        # (another workspace's thread is 404) and the lock are one query.
        _, appended = thread_events_append(
            workspace=agent.workspace, thread_id=id, new_events=new_events, batch=batch
        )
        code = status.HTTP_201_CREATED if any(a.created for a in appended) else status.HTTP_200_OK
        # Rendered here rather than by DRF's renderer: the events' JSON exists already.
        body = (
            "[" + ",".join(_appended_json(a) for a in appended) + "]"
            if batch
            else _appended_json(appended[0])
        )
        return HttpResponse(body.encode("utf-8"), status=code, content_type="application/json")

    @extend_schema(
        operation_id="threads_events_list",
        parameters=[THREAD_ID, PageFilterSerializer],
        responses={
            200: PageOutputSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            404: ErrorSerializer,
        },
        description="The log in seq order, `limit` events after `after`.",
    )
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        page = self.PageFilterSerializer(data=request.query_params.dict())
        page.is_valid(raise_exception=True)
        after, limit = page.validated_data["after"], page.validated_data["limit"]
        # One extra row tells whether another page follows, without a count.
        events = event_dicts(thread, after=after, limit=limit + 1)
        more = len(events) > limit
        events = events[:limit]
        return Response(
            {
                "events": events,
                "last_seq": thread.last_seq,
                "next_after": events[-1]["seq"] if more else None,
            }
        )
