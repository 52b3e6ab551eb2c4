"""The upload's file part is bytes: a drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS)
that says so of `POST /api/v1/imports/`."""

from __future__ import annotations

from typing import Any

from threads.api.schema_contract import schema_operations


def schema_hook(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    for path, method, operation in schema_operations(result):
        if path == "/api/v1/imports/" and method == "post":
            form = operation["requestBody"]["content"]["multipart/form-data"]
            form["encoding"] = {"file": {"contentType": "application/octet-stream"}}
    return result
