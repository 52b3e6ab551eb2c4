"""A thread's tool definitions (docs/api.md,
"Tool definitions — `PUT` and `GET /api/v1/threads/{id}/tools/`"): agents replace the set with PUT;
agents and people read it with each tool's token count."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.api.auth import agent_of, require_agent, thread_for_request
from threads.api.serializers import ErrorSerializer
from threads.domain.errors import InvalidTools
from threads.models import Thread, ThreadTool
from threads.selectors import thread_tools
from threads.services.tools import thread_tools_set

THREAD_ID = OpenApiParameter(
    "id", str, OpenApiParameter.PATH, description="the thread's UUID or its external_id"
)


class ThreadToolSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="its place in the list sent, from 0")
    name = serializers.CharField()
    token_count = serializers.IntegerField(
        help_text="tiktoken's count of the definition's canonical JSON, in the thread's "
        "encoding (an estimate of what the provider injects)"
    )
    definition = serializers.JSONField(help_text="the definition exactly as sent")


class ThreadToolsSerializer(serializers.Serializer):
    tools = ThreadToolSerializer(many=True)
    count = serializers.IntegerField()
    token_total = serializers.IntegerField(help_text="the set's tokens: budget.sections.tools")
    encoding = serializers.CharField()


class ThreadToolsSetSerializer(ThreadToolsSerializer):
    changed = serializers.BooleanField(
        help_text="false when the thread held exactly this set already (nothing was written)"
    )


def _tools_answer(thread: Thread, tools: list[ThreadTool]) -> dict[str, Any]:
    return {
        "tools": ThreadToolSerializer(tools, many=True).data,
        "count": len(tools),
        "token_total": sum(t.token_count for t in tools),
        "encoding": thread.encoding,
    }


def _submitted_tools(body: Any) -> Any:
    """The list sent: the body itself, or `{"tools": [...]}` and nothing else."""
    if isinstance(body, dict) and "tools" in body:
        extra = sorted(set(body) - {"tools"})
        if extra:
            raise InvalidTools(
                'send a list of tool definitions, or {"tools": [...]} and nothing else',
                fields={name: "unknown field" for name in extra},
            )
        return body["tools"]
    return body


class ThreadToolsApi(APIView):
    """`/api/v1/threads/{id}/tools/`: PUT replaces the set (agents), GET reads it."""

    @extend_schema(
        operation_id="threads_tools_set",
        parameters=[THREAD_ID],
        request={"application/json": {"type": "array", "items": {"type": "object"}}},
        responses={
            200: ThreadToolsSetSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            413: ErrorSerializer,
            415: ErrorSerializer,
        },
        examples=[
            OpenApiExample(
                "OpenAI Chat Completions",
                request_only=True,
                value=[
                    {
                        "type": "function",
                        "function": {
                            "name": "get_order",
                            "description": "Look an order up",
                            "parameters": {
                                "type": "object",
                                "properties": {"order_id": {"type": "string"}},
                            },
                        },
                    }
                ],
            ),
            OpenApiExample(
                "Anthropic",
                request_only=True,
                value=[
                    {
                        "name": "refund",
                        "description": "Refund an order",
                        "input_schema": {"type": "object", "properties": {}},
                    }
                ],
            ),
        ],
        description=(
            "Replace the thread's tool definitions with this list (agents only), in OpenAI "
            'Chat Completions ({"type": "function", "function": {"name", ...}}), OpenAI '
            'Responses ({"type": "function", "name", ...}) or Anthropic ({"name", '
            '"input_schema", ...}) shape; {"tools": [...]} is accepted too. At most 256 tools, '
            "each with a name of its own. The same list again changes nothing (`changed` "
            "false). 400 names each bad `tools[i]`; 413: a definition over "
            "CTXADMIN_MAX_EVENT_BYTES."
        ),
    )
    def put(self, request: Request, id: str) -> Response:
        if agent_of(request) is None:
            # A person: another workspace's thread is 404 before anything else is said.
            thread_for_request(request, id)
        agent = require_agent(request, "set tool definitions")
        thread = thread_for_request(request, id)
        result = thread_tools_set(
            thread=thread, tools=_submitted_tools(request.data), actor_label=agent.label
        )
        return Response({**_tools_answer(thread, result.tools), "changed": result.changed})

    @extend_schema(
        operation_id="threads_tools_list",
        parameters=[THREAD_ID],
        responses={200: ThreadToolsSerializer, 401: ErrorSerializer, 404: ErrorSerializer},
        description="The thread's tool definitions in the order sent, each with its tokens.",
    )
    def get(self, request: Request, id: str) -> Response:
        thread = thread_for_request(request, id)
        return Response(_tools_answer(thread, list(thread_tools(thread=thread))))
