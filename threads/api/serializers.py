"""Serializers shared by several API views, and the shapes the OpenAPI schema documents.

Events are validated by the domain (threads.domain.events.normalize_event) and answered as plain
dicts in their stored form: the serializers below describe them for the schema only, so a batch
of 1000 events never pays for DRF field-by-field serialization.
"""

from __future__ import annotations

import re
from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from threads.domain.events import (
    AGENT_KINDS,
    ANNOTATION_TYPES,
    AUTHORITIES,
    RESULT_STATUSES,
    ROLES,
)
from threads.domain.external_ids import external_id_problem
from threads.domain.run_status import RUN_STATUSES, STALLED, WAITING_FOR_AGENT
from threads.models import Thread
from threads.selectors.problems import listed_problems, thread_problems


def external_id_validated(value: str) -> str:
    """A serializer field's check for an external_id: the rule create and fork share."""
    problem = external_id_problem(value)
    if problem is not None:
        raise serializers.ValidationError(problem)
    return value


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field]:
        # Declared here: a class attribute named `fields` would shadow Serializer.fields.
        fields = super().get_fields()
        fields["fields"] = serializers.DictField(
            child=serializers.JSONField(), help_text="what was wrong, per field"
        )
        return fields


def optional_body(request: Any) -> Any:
    """The body of an operation whose body is optional: {} when none was sent; otherwise what
    was sent, so that `null`, `[]` or `0` meet the serializer's refusal instead of passing as
    "no body"."""
    if not int(request.META.get("CONTENT_LENGTH") or 0):
        return {}
    return request.data


class StrictCharField(serializers.CharField):
    """A JSON string, nothing else: DRF's CharField turns 0 into "0", which the schema (type
    string) forbids. Its max_length bounds the text as sent, as the schema's maxLength does,
    not the text once trimmed."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer, nothing else: DRF's IntegerField also takes "5", 5.0 and true."""

    def to_internal_value(self, data: Any) -> int:
        if type(data) is not int:
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean, nothing else: DRF's BooleanField also takes "yes", 1 and "on"."""

    def to_internal_value(self, data: Any) -> bool:
        if type(data) is not bool:
            self.fail("invalid", input=data)
        return data


_QUERY_INTEGER = re.compile(r"-?[0-9]+")


class QueryIntegerField(serializers.IntegerField):
    """A whole number in a query string: ASCII digits with an optional leading `-`, nothing
    else. DRF's IntegerField also takes `+5`, ` 5`, `5.0` and full-width or other Unicode
    digits, which Python's int() reads but the schema's `type: integer` does not allow."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not _QUERY_INTEGER.fullmatch(data):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictFloatField(serializers.FloatField):
    """A JSON number, nothing else: DRF's FloatField also takes "0.9" and true."""

    def to_internal_value(self, data: Any) -> float:
        if type(data) not in (int, float):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class StrictInputSerializer(serializers.Serializer):
    """A request body's object: a key it does not declare is refused (400 validation_error
    naming it, docs/api.md, "Codes"), at every level, rather than ignored: a misspelt optional field
    would otherwise be a silent default."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({str(name): "unknown field" for name in unknown})
        return super().to_internal_value(data)


class ErrorSerializer(serializers.Serializer):
    """Every error: `{"error": {"code", "message", "fields"}}` (docs/api.md, "Error shape")."""

    error = ErrorDetailSerializer()


class ProblemSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="threads.domain.problems.PROBLEM_KINDS")
    ref = serializers.CharField(help_text='what it is about: "side_effect:12", "approval:3", ...')
    action_url = serializers.CharField(help_text="the dashboard page that acts on it")


class ThreadOutputSerializer(serializers.Serializer):
    """A thread: its log head, summary head, budget settings, integrity verdict and lineage."""

    id = serializers.UUIDField()
    external_id = serializers.CharField()
    title = serializers.CharField()
    status = serializers.CharField()
    last_seq = serializers.IntegerField()
    chain_head = serializers.CharField()
    token_total = serializers.IntegerField()
    head_version = serializers.IntegerField()
    covered_until = serializers.IntegerField()
    context_window = serializers.IntegerField()
    reserved_output = serializers.IntegerField()
    reasoning_reserve = serializers.IntegerField()
    safety_margin = serializers.IntegerField()
    fixed_tokens = serializers.IntegerField()
    encoding = serializers.CharField()
    high_watermark = serializers.FloatField()
    low_watermark = serializers.FloatField()
    summarizer = serializers.CharField()
    chain_ok = serializers.BooleanField()
    first_bad_seq = serializers.IntegerField(allow_null=True)
    verified_until = serializers.IntegerField()
    pinned_at = serializers.DateTimeField(
        allow_null=True,
        help_text="set while a rollback's pin pauses the thread's folds "
        '(docs/api.md, "Rollback — `POST /api/v1/threads/{id}/rollback/`")',
    )
    pinned_by = serializers.CharField(allow_blank=True, help_text="who pinned it ('' unpinned)")
    pin_reason = serializers.CharField(allow_blank=True, help_text="why ('' unpinned)")
    folds_paused = serializers.SerializerMethodField(help_text="a pin pauses its folds")
    paused_by = serializers.CharField(source="pinned_by", allow_blank=True, help_text="= pinned_by")
    pause_reason = serializers.CharField(
        source="pin_reason", allow_blank=True, help_text="= pin_reason"
    )
    parent_thread = serializers.UUIDField(source="parent_thread_id", allow_null=True)
    parent_checkpoint = serializers.IntegerField(source="parent_checkpoint_id", allow_null=True)
    has_unknown_side_effects = serializers.SerializerMethodField()
    unknown_side_effects = serializers.IntegerField(
        help_text="How many of the thread's side effects are unknown "
        '(docs/api.md, "Read — `GET /api/v1/threads/{id}/`").'
    )
    events_with_secrets = serializers.IntegerField(
        help_text="How many of the thread's events hold a secret found at ingest "
        '(docs/api.md, "Read — `GET /api/v1/threads/{id}/`").'
    )
    pending_approvals = serializers.SerializerMethodField()
    verification_failed = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    run_status = serializers.SerializerMethodField(
        help_text="what the thread waits for: "
        + ", ".join(RUN_STATUSES)
        + ' (docs/api.md, "Read — `GET /api/v1/threads/{id}/`")'
    )
    run_status_since = serializers.SerializerMethodField(
        help_text="waiting_for_agent or stalled: since when the agent has not picked up a "
        "decision, resolution or rollback; null otherwise"
    )
    agent_read_at = serializers.DateTimeField(
        allow_null=True,
        help_text="when the agent last read its context, approvals or its saved graph state (to a "
        "few seconds)",
    )
    problems = serializers.SerializerMethodField(
        help_text="the open problems, most severe first, each with the link that acts on it; "
        'in the list, the kinds its flags show (docs/api.md, "Read — `GET /api/v1/threads/{id}/`")'
    )

    # The flags are annotations (threads.selectors.threads._thread_flags); null when a caller
    # hands in a thread read without them.
    @extend_schema_field(OpenApiTypes.BOOL)
    def get_folds_paused(self, thread: Thread) -> bool:
        return thread.pinned_at is not None

    def get_has_unknown_side_effects(self, thread: Thread) -> bool | None:
        return getattr(thread, "has_unknown", None)

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_pending_approvals(self, thread: Thread) -> bool | None:
        return getattr(thread, "has_pending", None)

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_verification_failed(self, thread: Thread) -> bool | None:
        return getattr(thread, "has_rejected", None)

    @extend_schema_field(serializers.ChoiceField(choices=RUN_STATUSES, allow_null=True))
    def get_run_status(self, thread: Thread) -> str | None:
        return getattr(thread, "run_status", None)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_run_status_since(self, thread: Thread) -> str | None:
        since = thread.agent_owed_since
        if since is None or getattr(thread, "run_status", None) not in (WAITING_FOR_AGENT, STALLED):
            return None
        return serializers.DateTimeField().to_representation(since)

    @extend_schema_field(ProblemSerializer(many=True))
    def get_problems(self, thread: Thread) -> list[dict[str, str]]:
        timeline = reverse("thread-timeline", args=[thread.pk])
        return [
            {
                "kind": p.kind,
                "ref": p.ref,
                # An anchor of the thread page (the pin box, the run-status chip) as a path.
                "action_url": f"{timeline}{p.target}" if p.target.startswith("#") else p.target,
            }
            for p in (
                # A list page: from each row's flags, no query per thread.
                listed_problems(thread=thread)
                if self.context.get("listed")
                else thread_problems(thread=thread)
            )
        ]


class EventInputSerializer(serializers.Serializer):
    """One event as an agent posts it. Documentation only: the domain validates (docs/api.md,
    "Events — `/api/v1/threads/{id}/events/`"); fields not listed for the event's kind are
    refused."""

    client_event_id = serializers.CharField(
        required=False, max_length=200, help_text="idempotency key, unique per thread"
    )
    kind = serializers.ChoiceField(choices=AGENT_KINDS)
    created_at = serializers.DateTimeField(required=False, help_text="client time, RFC 3339")
    metadata = serializers.DictField(required=False, child=serializers.JSONField())
    role = serializers.ChoiceField(choices=ROLES, required=False, help_text="message")
    content = serializers.JSONField(
        required=False, help_text="message: a string or a list of parts"
    )
    name = serializers.CharField(required=False, help_text="message")
    tool_call_id = serializers.CharField(required=False, help_text="tool_call, tool_result")
    tool_name = serializers.CharField(required=False, help_text="tool_call, approval_request")
    arguments = serializers.DictField(
        required=False, child=serializers.JSONField(), help_text="tool_call, approval_request"
    )
    side_effect = serializers.BooleanField(required=False, help_text="tool_call")
    idempotency_key = serializers.CharField(
        required=False, help_text="tool_call; required when side_effect"
    )
    group = serializers.CharField(required=False, help_text="tool_call: parallel calls")
    status = serializers.ChoiceField(
        choices=RESULT_STATUSES, required=False, help_text="tool_result"
    )
    result = serializers.JSONField(required=False, help_text="tool_result")
    verified_facts = serializers.ListField(
        child=serializers.DictField(), required=False, help_text='tool_result: [{"key", "value"}]'
    )
    request_id = serializers.CharField(required=False, help_text="tool_result")
    type = serializers.ChoiceField(choices=ANNOTATION_TYPES, required=False, help_text="annotation")
    authority = serializers.ChoiceField(choices=AUTHORITIES, required=False, help_text="annotation")
    payload = serializers.DictField(
        required=False,
        child=serializers.JSONField(),
        help_text='annotation: {"key", "value"} or {"text"}',
    )
    refers_to = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        help_text="annotation: seq numbers",
    )
    action = serializers.CharField(required=False, help_text="approval_request")
    expires_at = serializers.DateTimeField(required=False, help_text="approval_request")
    retracts = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="retraction: the seq of the item that leaves the working context",
    )


class EventBatchInputSerializer(serializers.Serializer):
    events = EventInputSerializer(many=True, help_text="1 to 1000 events, all or nothing")


class SecretFlagSerializer(serializers.Serializer):
    """A secret found in an event's text at ingest: what kind and where, never the secret."""

    type = serializers.CharField(
        help_text="the detect-secrets plugin's secret type: AWS Access Key, GitHub Token, "
        "Private Key, Basic Auth Credentials, ..."
    )
    field = serializers.CharField(
        help_text="where in the event: content, arguments.api_key, result.headers.*, "
        "content[0].text, metadata.* (* a key that is no plain name or holds the secret)"
    )
    removed = serializers.BooleanField(
        required=False,
        help_text="true: the workspace redacts secrets at ingest, and the event was stored "
        "with this secret replaced by a placeholder; absent: the event holds it",
    )


class RedactedSerializer(serializers.Serializer):
    """Who removed an event's content, when and why (docs/event-log.md, "Redaction")."""

    by = serializers.CharField(help_text="the admin's username")
    at = serializers.DateTimeField()
    reason = serializers.CharField()


class EventOutputSerializer(serializers.Serializer):
    """An event as stored: the common fields, the kind's own fields (as posted, plus `call_seq`
    on a tool_result: the seq of the call it bound to), and what the server derived."""

    seq = serializers.IntegerField()
    kind = serializers.CharField()
    created_at = serializers.DateTimeField()
    client_event_id = serializers.CharField(required=False)
    metadata = serializers.DictField(child=serializers.JSONField())
    hash = serializers.CharField(help_text="the chain's hash after this event")
    token_count = serializers.IntegerField()
    call_seq = serializers.IntegerField(required=False, help_text="tool_result")
    secrets = SecretFlagSerializer(
        many=True,
        required=False,
        help_text="present only when the append found secrets in the event's text "
        '(docs/api.md, "Append — `POST` (agents)"); absent: none found',
    )
    redacted = RedactedSerializer(
        required=False,
        help_text="present only on a redacted event, whose content fields are gone (its "
        "structural ones stay: role, tool_call_id, call_seq, status, ...)",
    )


class AppendedEventSerializer(EventOutputSerializer):
    replayed = serializers.BooleanField(
        help_text="true when client_event_id matched an earlier event with the same body"
    )


def thread_data(thread: Thread) -> dict[str, Any]:
    return ThreadOutputSerializer(thread).data  # type: ignore[return-value]


class ReadIntegritySerializer(serializers.Serializer):
    """The thread's chain verdict as the last integrity check recorded it, and whether what
    this read served reaches past the break: a resume path read from a broken chain says so
    (docs/api.md, "Working context — `GET /api/v1/threads/{id}/context/`" and
    "Read — `GET /api/v1/threads/{id}/langgraph/checkpoints/{checkpoint_id}/`")."""

    class Meta:
        ref_name = "ReadIntegrity"

    chain_ok = serializers.BooleanField()
    first_bad_seq = serializers.IntegerField(allow_null=True)
    verified_until = serializers.IntegerField()
    verified_at = serializers.CharField(
        allow_null=True, help_text="when the last check ran; null: never verified"
    )
    reaches_break = serializers.BooleanField(
        help_text="the chain is broken at or before the last seq this read served"
    )
