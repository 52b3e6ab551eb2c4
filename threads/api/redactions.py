"""Erasure by subject over the API (docs/api.md, "Erasure by subject — `POST /api/v1/redactions/`").

`POST /api/v1/redactions/` `{"query", "reason", "dry_run", "workspace"}` (people with the admin
role) answers 202 with the task's id; `GET /api/v1/tasks/{id}/` answers its report when done.
`workspace` (a name) is needed only by an admin of several workspaces.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.permissions import IsPerson
from threads.api.serializers import ErrorSerializer, StrictInputSerializer
from threads.domain.errors import InvalidEvent, NotFound, PermissionDenied
from threads.models import ROLE_RANK, Role, Workspace
from threads.selectors import memberships_for_user
from threads.services.subject_erasure import MAX_VALUE, subject_erasure_start

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}


class RedactionsApi(APIView):
    permission_classes = [IsPerson]

    class InputSerializer(StrictInputSerializer):
        query = serializers.CharField(
            max_length=MAX_VALUE,
            help_text="the value to erase: an e-mail address, a customer id (any case)",
        )
        reason = serializers.CharField(help_text="why; recorded with every redaction")
        dry_run = serializers.BooleanField(
            default=False, help_text="true: report what would be touched, change nothing"
        )
        workspace = serializers.CharField(
            required=False,
            help_text="the workspace's name; needed only by an admin of several workspaces",
        )

    class OutputSerializer(serializers.Serializer):
        task_id = serializers.CharField()
        dry_run = serializers.BooleanField()

        class Meta:
            ref_name = "RedactionsAccepted"

    @extend_schema(
        request=InputSerializer,
        responses={202: OutputSerializer, **ERRORS},
        operation_id="redactions_create",
        description="Erase a value from every event of a workspace that mentions it (admins).",
    )
    def post(self, request: Request) -> Response:
        body = self.InputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data: dict[str, Any] = body.validated_data
        workspace = _admin_workspace(request.user, data.get("workspace"))
        run = subject_erasure_start(
            workspace=workspace,
            actor=request.user,
            query=data["query"],
            reason=data["reason"],
            dry_run=data["dry_run"],
        )
        return Response(
            self.OutputSerializer({"task_id": run.id, "dry_run": data["dry_run"]}).data,
            status=status.HTTP_202_ACCEPTED,
        )


def _admin_workspace(user: Any, name: str | None) -> Workspace:
    memberships = memberships_for_user(user=user)
    if name is not None:
        for membership in memberships:
            if membership.workspace.name == name:
                return membership.workspace
        raise NotFound(f"no workspace {name!r}")
    admin = [m for m in memberships if ROLE_RANK[Role(m.role)] >= ROLE_RANK[Role.ADMIN]]
    if not admin:
        raise PermissionDenied("this needs the admin role in a workspace")
    if len(admin) > 1:
        raise InvalidEvent(
            "you are an admin of several workspaces: name one",
            fields={"workspace": "required for an admin of several workspaces"},
        )
    return admin[0].workspace
