"""Checkpoints, rollback and fork over the API (docs/api.md,
"Checkpoints, integrity, rollback, fork").

- `GET /api/v1/threads/{id}/checkpoints/`: agents and people of the workspace.
- `POST /api/v1/threads/{id}/checkpoints/` `{"label"}`: an on-demand checkpoint (operator+).
- `GET /api/v1/threads/{id}/checkpoints/{cp}/preview/`: what a rollback would do (admin).
- `POST /api/v1/threads/{id}/rollback/` `{"checkpoint", "reason", "pin"}` (admin) → 200 the
  new head; `pin` pauses the thread's folds until `POST /api/v1/threads/{id}/unpin/`
  `{"reason"}` (admin) releases it.
- `POST /api/v1/threads/{id}/fork/` `{"checkpoint", "external_id"}` (reviewer+) → 201 the fork.

Writes are people's work (session + CSRF); agent keys get 403. An unsafe checkpoint is 409
`checkpoint_unsafe`.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.access import require_rollback_role
from threads.api.auth import thread_for_request
from threads.api.permissions import IsPerson, IsPersonForWrites
from threads.api.serializers import (
    ErrorSerializer,
    StrictCharField,
    StrictInputSerializer,
    StrictIntegerField,
    ThreadOutputSerializer,
    external_id_validated,
    optional_body,
)
from threads.api.summaries import SummaryOutputSerializer
from threads.models import Checkpoint
from threads.selectors import (
    checkpoint_get,
    checkpoint_state_owner,
    checkpoints_for_thread,
    rollback_preview,
    thread_with_flags,
)
from threads.services.checkpoints import checkpoint_create
from threads.services.fork import thread_fork
from threads.services.pins import thread_unpin
from threads.services.rollback import checkpoint_rollback

ERRORS = {
    400: ErrorSerializer,
    403: ErrorSerializer,
    404: ErrorSerializer,
    409: ErrorSerializer,
}


class CheckpointOutputSerializer(serializers.ModelSerializer):
    summary_version = serializers.SerializerMethodField()
    thread = serializers.UUIDField(source="thread_id")
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = Checkpoint
        fields = [
            "id",
            "thread",
            "summary_version",
            "cursor",
            "chain_hash",
            "summary_checksum",
            "checksum",
            "pending",
            "safe",
            "unsafe_reason",
            "created_at",
            "created_by",
            "label",
        ]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_summary_version(self, checkpoint: Checkpoint) -> int | None:
        version = checkpoint.summary_version
        return version.version if version is not None else None

    @extend_schema_field(StrictCharField(allow_null=True))
    def get_created_by(self, checkpoint: Checkpoint) -> str | None:
        user = checkpoint.created_by
        return user.get_username() if user is not None else None


class ThreadCheckpointsApi(APIView):
    permission_classes = [IsPersonForWrites]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "ThreadCheckpointsInput"

        # The stubs type Field.label (a field's caption); here it is the checkpoint's label.
        label = StrictCharField(  # type: ignore[assignment]
            required=False, allow_blank=True, max_length=200
        )

    @extend_schema(
        responses={200: CheckpointOutputSerializer(many=True), **ERRORS},
        operation_id="thread_checkpoints_list",
    )
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        return Response(
            CheckpointOutputSerializer(checkpoints_for_thread(thread=thread), many=True).data
        )

    @extend_schema(
        request=InputSerializer,
        responses={201: CheckpointOutputSerializer, **ERRORS},
        operation_id="thread_checkpoints_create",
    )
    def post(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        body = self.InputSerializer(data=optional_body(request))
        body.is_valid(raise_exception=True)
        checkpoint = checkpoint_create(
            thread=thread, label=body.validated_data.get("label", ""), actor=request.user
        )
        return Response(CheckpointOutputSerializer(checkpoint).data, status=status.HTTP_201_CREATED)


class CheckpointPreviewApi(APIView):
    """The first step of a rollback: people who may roll back (admins) only, as on the
    dashboard; agent keys get 403."""

    permission_classes = [IsPerson]

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "CheckpointPreviewOutput"

        checkpoint = serializers.DictField()
        safe = serializers.BooleanField()
        unsafe_reason = StrictCharField(allow_blank=True)
        new_version = serializers.IntegerField(
            allow_null=True, help_text="the version the rollback writes; null when it writes none"
        )
        clears_summary = serializers.BooleanField(
            help_text="the head goes back to no summary (a state checkpoint, none at its cursor)"
        )
        after_rollback = serializers.IntegerField(
            help_text="send it with the rollback: refused if another rollback came first"
        )
        after_version = serializers.IntegerField(
            help_text="the thread's last summary version: send it with the rollback, refused "
            "if a fold wrote another first"
        )
        restores_version = serializers.IntegerField(allow_null=True)
        events_after_cursor = serializers.IntegerField()
        side_effects = serializers.ListField(child=serializers.DictField())
        approvals = serializers.ListField(child=serializers.DictField())
        versions_replaced = serializers.ListField(child=serializers.DictField())

    @extend_schema(
        responses={200: OutputSerializer, **ERRORS}, operation_id="thread_checkpoint_preview"
    )
    def get(self, request: Request, id: str, checkpoint_id: int) -> Response:
        thread = thread_for_request(request, id)
        require_rollback_role(request.user, thread.workspace)
        checkpoint = checkpoint_get(thread=thread, id=checkpoint_id)
        preview: dict[str, Any] = rollback_preview(thread=thread, checkpoint=checkpoint)
        return Response(self.OutputSerializer(preview).data)


class ThreadRollbackApi(APIView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "ThreadRollbackInput"

        checkpoint = StrictIntegerField(min_value=1)
        reason = StrictCharField(max_length=2000)
        after_rollback = StrictIntegerField(
            min_value=0,
            required=False,
            help_text="the preview's `after_rollback`: 409 `rolled_back_since_preview` when "
            "another rollback of the thread came after it",
        )
        after_version = StrictIntegerField(
            min_value=0,
            required=False,
            help_text="the preview's `after_version`: 409 `folded_since_preview` when a fold "
            "wrote another summary version after it",
        )
        pin = serializers.BooleanField(
            required=False,
            default=False,
            help_text="pin the thread: no fold until the pin is released (POST .../unpin/)",
        )

    class OutputSerializer(SummaryOutputSerializer):
        restored_from = serializers.IntegerField(source="restored_from_id")

        class Meta(SummaryOutputSerializer.Meta):
            fields = [*SummaryOutputSerializer.Meta.fields, "restored_from"]
            ref_name = "ThreadRollbackOutput"

    @extend_schema(
        request=InputSerializer,
        responses={200: OutputSerializer, **ERRORS},
        operation_id="thread_rollback",
    )
    def post(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        checkpoint = checkpoint_get(thread=thread, id=body.validated_data["checkpoint"])
        version = checkpoint_rollback(
            thread=thread,
            checkpoint=checkpoint,
            actor=request.user,
            reason=body.validated_data["reason"],
            after_rollback=body.validated_data.get("after_rollback"),
            after_version=body.validated_data.get("after_version"),
            pin=body.validated_data["pin"],
        )
        answer: dict[str, Any] = (
            dict(self.OutputSerializer(version).data)
            if version is not None
            else {"version": None, "restored_from": checkpoint.pk}
        )
        # The state an integration restored with it.
        owner = checkpoint_state_owner(checkpoint)
        if owner is not None and (described := owner.describe(checkpoint)) is not None:
            answer[owner.name] = described
        return Response(answer)


class ThreadUnpinApi(APIView):
    """`POST /api/v1/threads/{id}/unpin/` `{"reason"}`: release a rollback's pin (admin,
    people only); folds go on."""

    permission_classes = [IsPerson]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "ThreadUnpinInput"

        reason = StrictCharField(max_length=2000)

    @extend_schema(
        request=InputSerializer,
        responses={200: ThreadOutputSerializer, **ERRORS},
        operation_id="thread_unpin",
    )
    def post(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        released = thread_unpin(
            thread=thread, actor=request.user, reason=body.validated_data["reason"]
        )
        return Response(ThreadOutputSerializer(thread_with_flags(released)).data)


class ThreadForkApi(APIView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictInputSerializer):
        class Meta:
            ref_name = "ThreadForkInput"

        checkpoint = StrictIntegerField(min_value=1)
        external_id = StrictCharField(max_length=200)

        def validate_external_id(self, value: str) -> str:
            return external_id_validated(value)

    @extend_schema(
        request=InputSerializer,
        responses={201: ThreadOutputSerializer, **ERRORS},
        operation_id="thread_fork",
    )
    def post(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        checkpoint = checkpoint_get(thread=thread, id=body.validated_data["checkpoint"])
        fork = thread_fork(
            thread=thread,
            checkpoint=checkpoint,
            external_id=body.validated_data["external_id"],
            actor=request.user,
        )
        return Response(
            ThreadOutputSerializer(thread_with_flags(fork)).data, status=status.HTTP_201_CREATED
        )
