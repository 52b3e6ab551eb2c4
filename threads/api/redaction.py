"""Redacting an event over the API
(docs/api.md, "Redaction — `POST /api/v1/threads/{id}/events/{seq}/redact/`").

`POST /api/v1/threads/{id}/events/{seq}/redact/` `{"reason"}`: people with the admin role of the
thread's workspace (session + CSRF); agent keys get 403 (the contract says admin). 200
with the event as it now reads; 202 with an approval id when the workspace requires a second
admin. 409 `already_redacted` (or `nothing_to_redact` for a marker), 400 without a reason, 404
for another workspace's thread or a seq the thread does not have.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import thread_for_request
from threads.api.events import THREAD_ID
from threads.api.permissions import IsPerson
from threads.api.serializers import (
    ErrorSerializer,
    EventOutputSerializer,
    StrictCharField,
    StrictInputSerializer,
)
from threads.domain.redaction import MAX_REASON
from threads.selectors import event_dict
from threads.selectors.events import event_get
from threads.services.redaction import event_redact_request


class RedactionPendingSerializer(serializers.Serializer):
    approval_id = serializers.IntegerField(
        help_text="the approval request a second admin decides in the approval queue"
    )
    status = serializers.CharField(help_text="`pending`")


class EventRedactApi(APIView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "EventRedactInput"

        reason = StrictCharField(max_length=MAX_REASON, help_text="why; kept with the record")

    @extend_schema(
        operation_id="thread_event_redact",
        parameters=[THREAD_ID],
        request=InputSerializer,
        responses={
            200: OpenApiResponse(
                EventOutputSerializer, description="redacted: the event as it now reads"
            ),
            202: OpenApiResponse(
                RedactionPendingSerializer,
                description="the workspace requires a second admin: an approval request",
            ),
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
        description=(
            "Remove an event's content (admin, people only): it keeps seq, kind, created_at, "
            "client_event_id, hash and its structural fields, loses the rest, and gains "
            '`"redacted": {"by", "at", "reason"}`; the chain still verifies and reports '
            "`redacted at seq N`. 409 `already_redacted`, `nothing_to_redact` (a marker)."
        ),
    )
    def post(self, request: Request, id: str, seq: int) -> Response:
        thread = thread_for_request(request, id)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        event_get(thread=thread, seq=seq)  # 404 before anything else
        outcome: Any = event_redact_request(
            thread=thread, seq=seq, actor=request.user, reason=body.validated_data["reason"]
        )
        if outcome is not None:
            return Response(
                {"approval_id": outcome.pk, "status": outcome.status},
                status=status.HTTP_202_ACCEPTED,
            )
        return Response(event_dict(event_get(thread=thread, seq=seq)))
