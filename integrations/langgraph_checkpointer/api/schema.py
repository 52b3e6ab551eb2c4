"""What the checkpointer's endpoints enforce that its serializers cannot say in the OpenAPI
schema: a drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS), run after the core's
(threads.api.schema_contract)."""

from __future__ import annotations

from typing import Any

from threads.api.schema_contract import ANY_OBJECT, schema_operations

# The `next` of a previous page: a checkpoint id, ":", a row number.
PAGE_AFTER = r"^(?:[^\s\x1c-\x1f\x85\x00]|\ufeff)[^\x00]*:[0-9]{1,18}$"

# A write (LanggraphWriteInput) is bytes, `type` and `data`, or `messages`: never both, never
# neither, never half of the bytes.
WRITE_VARIANTS = [
    {"required": ["type", "data"], "not": {"required": ["messages"]}},
    {
        "required": ["messages"],
        "not": {"anyOf": [{"required": ["type"]}, {"required": ["data"]}]},
        "properties": {
            "messages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["message"],
                    # any JSON value but null (in OpenAPI 3.0 no type admits null unless
                    # `nullable` says so)
                    "properties": {
                        "message": {
                            "anyOf": [
                                {"type": t}
                                for t in ("object", "array", "string", "number", "boolean")
                            ]
                        }
                    },
                },
            }
        },
    },
]

# An operation of a batch (LanggraphBatchOperation) is a put or a task's writes: exactly one.
OPERATION_VARIANTS = [
    {"required": ["put"], "not": {"required": ["writes"]}},
    {"required": ["writes"], "not": {"required": ["put"]}},
]


def schema_hook(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    components = result.get("components", {}).get("schemas", {})
    if "LanggraphWriteInput" in components:
        components["LanggraphWriteInput"]["oneOf"] = WRITE_VARIANTS
    if "LanggraphBatchOperation" in components:
        components["LanggraphBatchOperation"]["oneOf"] = OPERATION_VARIANTS
    if "LanggraphBatchResult" in components:
        components["LanggraphBatchResult"]["nullable"] = True  # null for an operation of writes
    for path, _method, operation in schema_operations(result):
        if "/langgraph/" not in path:
            continue
        for parameter in operation.get("parameters", []):
            name, schema = parameter.get("name"), parameter.get("schema")
            if name == "page_after" and schema is not None:
                schema["pattern"] = PAGE_AFTER
            if name == "filter":
                # JSON text of an object, not any string
                parameter.pop("schema", None)
                parameter["content"] = {"application/json": {"schema": ANY_OBJECT}}
    return result
