"""Chain verification over the API (docs/api.md, "Checkpoints, integrity, rollback, fork").

`POST /api/v1/threads/{id}/verify/` queues a full recomputation of the thread's hash chain and
answers 202 with the task's id; `GET /api/v1/threads/{id}/integrity/` answers with the verdict
the last check recorded. Agents of the workspace and its members (any role) may do both;
another workspace's thread is 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import is_agent, thread_for_request
from threads.api.serializers import StrictInputSerializer, optional_body
from threads.selectors import thread_integrity
from threads.services.integrity import integrity_verify_request


class CheckpointRefSerializer(serializers.Serializer):
    """A checkpoint as GET /threads/{id}/checkpoints/ lists it."""

    id = serializers.IntegerField()
    summary_version = serializers.IntegerField(allow_null=True)
    cursor = serializers.IntegerField()
    chain_hash = serializers.CharField()
    summary_checksum = serializers.CharField(allow_blank=True)
    safe = serializers.BooleanField()
    created_at = serializers.CharField()
    label = serializers.CharField(allow_blank=True)  # type: ignore[assignment]


class RedactionRefSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    by = serializers.CharField()
    at = serializers.CharField()
    reason = serializers.CharField()


class ThreadVerifyApi(APIView):
    class OutputSerializer(serializers.Serializer):
        task_id = serializers.CharField()

        class Meta:
            ref_name = "ThreadVerifyAccepted"

    @extend_schema(request=None, responses={202: OutputSerializer}, operation_id="thread_verify")
    def post(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        # None is needed; one that is not storable JSON, or names any field, is refused.
        StrictInputSerializer(data=optional_body(request)).is_valid(raise_exception=True)
        principal = request.user
        run = integrity_verify_request(
            thread=thread,
            actor=None if is_agent(principal) else principal,
            actor_label=principal.label if is_agent(principal) else "",  # type: ignore[union-attr]
        )
        return Response(
            self.OutputSerializer({"task_id": run.id}).data, status=status.HTTP_202_ACCEPTED
        )


class ThreadIntegrityApi(APIView):
    class OutputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(
            choices=["ok", "broken", "not_verified"],
            help_text="not_verified: no check has looked at the chain yet (chain_ok is null)",
        )
        verified = serializers.BooleanField(help_text="a check has looked at the chain")
        chain_ok = serializers.BooleanField(
            allow_null=True, help_text="null until a check has looked at the chain"
        )
        first_bad_seq = serializers.IntegerField(allow_null=True)
        verified_until = serializers.IntegerField()
        verified_at = serializers.CharField(allow_null=True)
        fully_verified_at = serializers.CharField(
            allow_null=True, help_text="when a check last walked the whole chain from genesis"
        )
        last_seq = serializers.IntegerField()
        last_safe_checkpoint = CheckpointRefSerializer(allow_null=True)
        redactions = RedactionRefSerializer(
            many=True,
            help_text="events whose content an admin removed, which the last check verified "
            "as redacted (not tampered)",
        )

        class Meta:
            ref_name = "ThreadIntegrity"

    @extend_schema(responses={200: OutputSerializer}, operation_id="thread_integrity")
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        answer: dict[str, Any] = thread_integrity(thread=thread)
        return Response(self.OutputSerializer(answer).data)
