"""What the server checks, said in the OpenAPI schema (docs/api.md, "Auth and errors" and
"Events — `/api/v1/threads/{id}/events/`").

A drf-spectacular postprocessing hook: serializers describe most inputs, but some are validated
by the domain (an event's fields per kind, tool definitions) and every operation can answer the
common errors in the contract's shape. Schemathesis holds the server to this schema
(tests/api/test_schemathesis.py): what the schema allows is accepted, what it forbids is refused.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from threads.domain.events import (
    ANNOTATION_TYPES,
    AUTHORITIES,
    KIND_FIELDS,
    MAX_ID_LENGTH,
    RESULT_STATUSES,
    ROLES,
)
from threads.domain.tools import MAX_NAME_LENGTH, MAX_TOOLS

ERROR_REF = {"$ref": "#/components/schemas/Error"}

# Statuses any operation under /api/ may answer in the error shape: a bad request or parameter,
# no or a bad key, a role that may not, an unknown object or route, a method the route lacks,
# an Accept it cannot satisfy. Writes add an oversize body and an unsupported media type.
COMMON_ERRORS = {
    "400": "invalid input",
    "401": "no or an invalid API key",
    "403": "the caller may not",
    "404": "no such object, or not the caller's",
    "405": "the route does not answer this method",
    "406": "no representation matches Accept",
    "422": "well-formed, but refused in the thread's present state",
    "429": "too many requests for this key (CTXADMIN_API_RATE); Retry-After says when to retry",
    "500": "server_error: a fault of the server, with nothing of the request written",
    "503": "database_unavailable: the database is not taking writes now; Retry-After says when",
}
# Optional event fields the domain reads as absent when null; the others refuse null.
NULLABLE_EVENT_FIELDS = frozenset(
    (
        "client_event_id",
        "created_at",
        "metadata",
        "idempotency_key",
        "result",
        "verified_facts",
        "refers_to",
    )
)
WRITE_ERRORS = {
    "413": "the body is larger than the limit",
    "415": "unsupported Content-Type",
}


# A character Python's str.strip() keeps, as an ECMA-262 pattern: its \s lacks \x1c-\x1f and
# \x85 (Python strips them) and has \ufeff (Python keeps it). With no NUL anywhere: the JSON
# parser refuses NUL in a body (docs/api.md, "Codes") and PostgreSQL's text cannot hold it.
NON_BLANK = r"^[^\x00]*(?:[^\s\x1c-\x1f\x85\x00]|\ufeff)[^\x00]*$"
NO_NUL = r"^[^\x00]*$"


def _text(limit: int = MAX_ID_LENGTH) -> dict[str, Any]:
    # The domain strips before it checks: a text of only whitespace is empty.
    return {"type": "string", "minLength": 1, "maxLength": limit, "pattern": NON_BLANK}


def _enum(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": {}}
TIME = {"type": "string", "format": "date-time"}

# One schema per field of an event, as normalize_event checks it.
EVENT_FIELDS: dict[str, dict[str, Any]] = {
    "client_event_id": _text(),
    "created_at": TIME,
    "metadata": ANY_OBJECT,
    "role": _enum(ROLES),
    "content": {
        "oneOf": [
            {"type": "string", "pattern": NO_NUL},
            {
                "type": "array",
                "items": {"oneOf": [{"type": "string", "pattern": NO_NUL}, ANY_OBJECT]},
            },
        ],
        "description": "a string or a list of parts (strings or objects)",
    },
    "name": _text(),
    "tool_call_id": _text(),
    "tool_name": _text(),
    "arguments": ANY_OBJECT,
    "side_effect": {"type": "boolean"},
    "idempotency_key": _text(),
    "group": _text(),
    "status": _enum(RESULT_STATUSES),
    "result": {},
    "verified_facts": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "minLength": 1, "pattern": NO_NUL},
                "value": {},
            },
            "required": ["key", "value"],
            "additionalProperties": False,
        },
    },
    "request_id": _text(),
    "type": _enum(ANNOTATION_TYPES),
    "authority": _enum(AUTHORITIES),
    "payload": ANY_OBJECT,
    "refers_to": {"type": "array", "items": {"type": "integer", "minimum": 1}},
    "action": _text(300),
    "expires_at": TIME,
    "retracts": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
}
FACT_TYPES = ("fact", "correction")
FACT_PAYLOAD = {
    "type": "object",
    "properties": {"key": {"type": "string", "minLength": 1, "pattern": NO_NUL}, "value": {}},
    "required": ["key", "value"],
}
TEXT_PAYLOAD = {
    "type": "object",
    "properties": {"text": {"type": "string", "pattern": NON_BLANK}},
    "required": ["text"],
}


def _event_variant(kind: str, overrides: dict[str, dict[str, Any]] | None = None) -> dict:
    required, optional = KIND_FIELDS[kind]
    properties: dict[str, Any] = {"kind": {"type": "string", "enum": [kind]}}
    for name in ("client_event_id", "created_at", "metadata", *required, *optional):
        field = dict((overrides or {}).get(name, EVENT_FIELDS[name]))
        if name in NULLABLE_EVENT_FIELDS:
            field["nullable"] = True
        properties[name] = field
    variant = {
        "type": "object",
        "title": kind,
        "properties": properties,
        "required": ["kind", *required],
        "additionalProperties": False,
    }
    if kind == "tool_call":
        # side_effect true needs an idempotency_key
        variant["anyOf"] = [
            {"properties": {"side_effect": {"enum": [False]}}},
            {"required": ["idempotency_key"], "properties": {"idempotency_key": _text()}},
        ]
    return variant


def event_input_schema() -> dict[str, Any]:
    variants = [_event_variant(kind) for kind in KIND_FIELDS if kind != "annotation"]
    variants.append(
        _event_variant(
            "annotation",
            {"type": _enum(FACT_TYPES), "payload": FACT_PAYLOAD},
        )
    )
    variants.append(
        _event_variant(
            "annotation",
            {
                "type": _enum(tuple(t for t in ANNOTATION_TYPES if t not in FACT_TYPES)),
                "payload": TEXT_PAYLOAD,
            },
        )
    )
    return {
        "description": "One event as an agent posts it "
        '(docs/api.md, "Events — `/api/v1/threads/{id}/events/`"): the common fields and '
        "those of its kind; any other field is refused.",
        "oneOf": variants,
    }


TOOL_NAME = _text(MAX_NAME_LENGTH)
TOOLS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_TOOLS,
    "uniqueItems": True,
    "description": "tool definitions, each named once: OpenAI Chat Completions "
    '(`{"type": "function", "function": {"name", ...}}`), OpenAI Responses (`{"type": '
    '"function", "name", ...}`) or Anthropic (`{"name", "input_schema", ...}`)',
    "items": {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "function": {
                        "type": "object",
                        "properties": {"name": TOOL_NAME},
                        "required": ["name"],
                    }
                },
                "required": ["function"],
            },
            {
                "type": "object",
                "properties": {"name": TOOL_NAME},
                "required": ["name"],
                "not": {"required": ["function"]},
            },
        ]
    },
}


# Bodies the server needs (the others default to {} when none is sent).
BODY_REQUIRED = ("/api/v1/threads/{id}/events/", "/api/v1/threads/{id}/tools/")


def schema_operations(schema: dict[str, Any]) -> Any:
    """Each operation of the schema, as (path, method, operation)."""
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                yield path, method, operation


def _document_errors(operation: dict[str, Any], method: str) -> None:
    errors = dict(COMMON_ERRORS)
    if method in ("post", "put", "patch"):
        errors.update(WRITE_ERRORS)
    responses = operation.setdefault("responses", {})
    for code, description in errors.items():
        responses.setdefault(
            code,
            {"content": {"application/json": {"schema": ERROR_REF}}, "description": description},
        )


def _tighten_parameters(path: str, operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        name, schema = parameter.get("name"), parameter.get("schema")
        if name == "thread" and path == "/api/v1/side-effects/" and schema is not None:
            schema["minLength"] = 1


def _close_body(schema: dict[str, Any], components: dict[str, Any], seen: set[str]) -> None:
    """Say `additionalProperties: false` of the serializers' objects a request body names by
    reference, nested ones too: every body serializer refuses a key it does not declare
    (threads.api.serializers.StrictInputSerializer). Inline objects (a free-form dict) and
    the event schemas written here (oneOf, closed per kind) are left as they are."""
    if isinstance(schema.get("items"), dict):
        _close_body(schema["items"], components, seen)
    for part in schema.get("allOf", []) + schema.get("oneOf", []):  # a nullable reference
        if "$ref" in part:
            _close_body(part, components, seen)
    ref = schema.get("$ref", "")
    name = ref.rsplit("/", 1)[-1]
    if not ref or name in seen or "properties" not in components.get(name, {}):
        return
    seen.add(name)
    component = components[name]
    component["additionalProperties"] = False
    for child in component["properties"].values():
        _close_body(child, components, seen)


def _watermarks(component: dict[str, Any]) -> None:
    """A watermark is above 0 (0 < low_watermark < high_watermark <= 1, docs/api.md,
    "Create — `POST /api/v1/threads/` (agents)"); the order of the two is a rule between values JSON
    Schema cannot state."""
    for name in ("low_watermark", "high_watermark"):
        field = component.get("properties", {}).get(name)
        if field is not None and field.get("minimum") == 0:  # a request's, not an answer's
            field["exclusiveMinimum"] = True


def _blank_alternatives(node: Any) -> None:
    """drf-spectacular states a blank-allowed string with a pattern as `oneOf: [the string,
    {maxLength: 0}]`; "" matches both, so by oneOf it would be refused. Say `anyOf`, or just the
    string when its own pattern already takes ""."""
    if isinstance(node, list):
        for item in node:
            _blank_alternatives(item)
        return
    if not isinstance(node, dict):
        return
    options = node.get("oneOf")
    if isinstance(options, list) and len(options) == 2 and options[1] == BLANK:
        inner = options[0]
        del node["oneOf"]
        if "minLength" not in inner and re.search(inner.get("pattern", ""), "") is not None:
            node.update(inner)
        else:
            node["anyOf"] = options
    for value in node.values():
        _blank_alternatives(value)


BLANK = {"type": "string", "maxLength": 0}


def contract_hook(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    _blank_alternatives(result)
    components = result.setdefault("components", {}).setdefault("schemas", {})
    if "EventInput" in components:
        components["EventInput"] = event_input_schema()
    if "EventBatchInput" in components:
        batch = components["EventBatchInput"]
        batch["additionalProperties"] = False
        batch["properties"]["events"].update(
            minItems=1, maxItems=settings.CTXADMIN_MAX_BATCH_EVENTS
        )
    for component in components.values():
        _watermarks(component)
    for path, method, operation in schema_operations(result):
        if "Error" in components:
            _document_errors(operation, method)
        _tighten_parameters(path, operation)
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            _close_body(body["schema"], components, set())
        if path in BODY_REQUIRED and method in ("post", "put"):
            operation["requestBody"]["required"] = True
        if path == "/api/v1/threads/{id}/tools/" and method == "put":
            operation["requestBody"]["content"]["application/json"]["schema"] = TOOLS_SCHEMA
    return result
