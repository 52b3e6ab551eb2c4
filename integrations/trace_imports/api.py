"""Imports of recorded traces over the API (docs/api.md, "Imports — `/api/v1/imports/`").

- `POST /api/v1/imports/` (multipart `file`, `format`, optional `side_effect_tools`, and for a
  person in several workspaces `workspace`): agents of the workspace, and people with the
  admin role; an agent only where the workspace lets its agents import. Stores the upload and
  queues its import: 202 `{"task_id", "import_id"}`.
- `GET /api/v1/imports/{id}/`: the import's state, progress, counts and per-conversation
  report.
- `POST /api/v1/imports/{id}/cancel/`: people with the admin role; stops the import between
  two conversations (audited).
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from integrations.trace_imports.models import ImportOutcome, ImportState, TraceImport
from integrations.trace_imports.readers import FILE_FORMATS, upload_side_effect_tools
from integrations.trace_imports.selectors import (
    import_workspace_for_member,
    trace_import_get_for_member,
    trace_import_get_for_workspace,
)
from integrations.trace_imports.services.uploads import (
    UPLOAD_FORM_OVERHEAD,
    import_cancel,
    import_start,
)
from threads.api.auth import agent_of
from threads.api.serializers import ErrorSerializer
from threads.domain.errors import PayloadTooLarge, PermissionDenied
from threads.models import TaskState

ERRORS = {
    400: ErrorSerializer,
    401: ErrorSerializer,
    403: ErrorSerializer,
    404: ErrorSerializer,
    413: ErrorSerializer,
}


def _import_of(request: Request, id: str) -> TraceImport:
    agent = agent_of(request)
    if agent is not None:
        return trace_import_get_for_workspace(workspace=agent.workspace, id=id)
    return trace_import_get_for_member(user=request.user, id=id)


class ImportCreateApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(
            allow_empty_file=True, help_text="JSON array or JSONL, gzip ok"
        )
        format = serializers.ChoiceField(choices=FILE_FORMATS)
        side_effect_tools = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=5000,
            help_text="comma-separated tool names whose calls are side effects; `none` for "
            "no tool; empty for the default (tau-bench airline's booking tools)",
        )
        workspace = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=100,
            help_text="people only: the workspace to import into, when they are an admin of "
            "several",
        )

    class OutputSerializer(serializers.Serializer):
        task_id = serializers.CharField()
        import_id = serializers.UUIDField()
        state = serializers.ChoiceField(choices=ImportState.choices)

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={202: OutputSerializer, **ERRORS},
        operation_id="imports_create",
        description="Store an uploaded trace file and queue its import; poll "
        "`/api/v1/tasks/{task_id}/` for progress (conversations done / total) and "
        "`/api/v1/imports/{import_id}/` for the report. People with the admin role, and agents "
        "where the workspace lets its agents import (403 otherwise).",
    )
    def post(self, request: Request) -> Response:
        limit = settings.CTXADMIN_MAX_IMPORT_BYTES
        # Refuse an announced oversize body before it is read (and spooled to disk).
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit + UPLOAD_FORM_OVERHEAD:
            raise PayloadTooLarge(
                f"the file is larger than {limit} bytes (CTXADMIN_MAX_IMPORT_BYTES)",
                fields={"limit": limit},
            )
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        upload = data["file"]
        agent = agent_of(request)
        if agent is not None:
            workspace, actor, label = agent.workspace, None, agent.label
        else:
            workspace = import_workspace_for_member(
                user=request.user, name=data.get("workspace", "")
            )
            actor, label = request.user, ""
        trace_import = import_start(
            workspace=workspace,
            actor=actor,  # type: ignore[arg-type]
            actor_label=label,
            fmt=data["format"],
            file_name=upload.name or "",
            content=upload.read(),
            side_effect_tools=upload_side_effect_tools(data.get("side_effect_tools")),
        )
        answer = {
            "task_id": trace_import.task_run_id,
            "import_id": trace_import.pk,
            "state": trace_import.state,
        }
        return Response(self.OutputSerializer(answer).data, status=status.HTTP_202_ACCEPTED)


class ImportDetailApi(APIView):
    class OutputSerializer(serializers.Serializer):
        class ConversationsSerializer(serializers.Serializer):
            total = serializers.IntegerField(source="conversations_total")
            done = serializers.IntegerField(source="conversations_done")

        class CountsSerializer(serializers.Serializer):
            created = serializers.IntegerField(source="created_count")
            updated = serializers.IntegerField(source="updated_count")
            skipped = serializers.IntegerField(source="skipped_count")
            refused = serializers.IntegerField(source="refused_count")

        class ReportLineSerializer(serializers.Serializer):
            index = serializers.IntegerField(help_text="position in the file, from 0")
            external_id = serializers.CharField(allow_blank=True)
            thread = serializers.UUIDField(allow_null=True)
            outcome = serializers.ChoiceField(choices=ImportOutcome.choices)
            events = serializers.IntegerField(help_text="events the conversation converts to")
            appended = serializers.IntegerField(help_text="of which this import appended")
            reason = serializers.CharField(allow_blank=True, help_text="why it was refused")

        id = serializers.UUIDField()
        task_id = serializers.CharField(source="task_run_id", allow_null=True)
        task_state = serializers.ChoiceField(
            choices=TaskState.choices, source="task_run.state", allow_null=True, default=None
        )
        state = serializers.ChoiceField(choices=ImportState.choices)
        format = serializers.CharField()
        file_name = serializers.CharField(allow_blank=True)
        size = serializers.IntegerField()
        sha256 = serializers.CharField()
        side_effect_tools = serializers.ListField(child=serializers.CharField(), allow_null=True)
        created_by = serializers.CharField(source="actor_label")
        conversations = ConversationsSerializer(source="*")
        counts = CountsSerializer(source="*")
        events_appended = serializers.IntegerField(
            help_text="events appended so far (updated while it runs)"
        )
        error = serializers.CharField(
            allow_blank=True, help_text="why it failed or was cancelled (a limit is named)"
        )
        cancel_requested_at = serializers.DateTimeField(allow_null=True)
        cancelled_by = serializers.CharField(allow_blank=True)
        report = ReportLineSerializer(many=True)
        created_at = serializers.DateTimeField()
        started_at = serializers.DateTimeField(allow_null=True)
        finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema(
        responses={200: OutputSerializer, 401: ErrorSerializer, 404: ErrorSerializer},
        operation_id="imports_retrieve",
        description="An import of the caller's workspace(s): state, counts and one report "
        "line per conversation; any other id is 404.",
    )
    def get(self, request: Request, id: str) -> Response:
        return Response(self.OutputSerializer(_import_of(request, id)).data)


class ImportCancelApi(APIView):
    @extend_schema(
        request=None,
        responses={
            200: ImportDetailApi.OutputSerializer,
            **ERRORS,
            409: ErrorSerializer,
        },
        operation_id="imports_cancel",
        description="Cancel an import (people with the admin role; audited). A pending import "
        "ends `cancelled` at once; a running one stops before its next conversation, keeping "
        "those it imported, and then ends `cancelled`. 409 once it has ended.",
    )
    def post(self, request: Request, id: str) -> Response:
        trace_import = _import_of(request, id)
        if agent_of(request) is not None:
            raise PermissionDenied("cancelling an import needs a person with the admin role")
        import_cancel(trace_import=trace_import, actor=request.user)  # type: ignore[arg-type]
        fresh = _import_of(request, id)
        return Response(ImportDetailApi.OutputSerializer(fresh).data)
