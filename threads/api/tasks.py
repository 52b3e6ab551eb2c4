"""Task status: `GET /api/v1/tasks/{task_id}/`, the same for every task (fold, verify, import)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.permissions import workspace_ids_for_request
from threads.api.serializers import ErrorSerializer
from threads.models import TaskState
from threads.selectors import task_run_get_in


class TaskProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class TaskDetailApi(APIView):
    @extend_schema_serializer(component_name="TaskStatus")
    class OutputSerializer(serializers.Serializer):
        task_id = serializers.CharField(source="id")
        kind = serializers.CharField()
        state = serializers.ChoiceField(choices=TaskState.choices)
        progress = TaskProgressSerializer(source="*")
        result = serializers.JSONField(allow_null=True)
        thread = serializers.UUIDField(source="thread_id", allow_null=True)
        created_at = serializers.DateTimeField()
        updated_at = serializers.DateTimeField()

    @extend_schema(
        operation_id="tasks_retrieve",
        responses={200: OutputSerializer, 401: ErrorSerializer, 404: ErrorSerializer},
        description="A task run of the caller's workspace(s); any other id is 404.",
    )
    def get(self, request: Request, task_id: str) -> Response:
        run = task_run_get_in(workspace_ids=workspace_ids_for_request(request), id=task_id)
        return Response(self.OutputSerializer(run).data)
