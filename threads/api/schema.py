"""OpenAPI schema naming: each view nests its own `InputSerializer` / `OutputSerializer`, so a
component is named after its view (`ThreadEventsAppendApi` → `ThreadEventsAppendInput`), never a
bare, colliding `Input`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from threads.api.schema_contract import NO_NUL, NON_BLANK
from threads.api.serializers import StrictCharField


class ViewScopedAutoSchema(AutoSchema):
    def get_serializer_name(self, serializer: Any, direction: Any) -> str:
        name = super().get_serializer_name(serializer, direction)
        qualname = type(serializer).__qualname__
        if "." in qualname:  # nested in a view (or another serializer): qualify it
            owner = qualname.rsplit(".", 1)[0].replace(".", "")
            owner = owner.removesuffix("Api").removesuffix("View")
            name = owner + name.removesuffix("Serializer")
        return name

    def _map_serializer_field(
        self, field: Any, direction: Any, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        result = super()._map_serializer_field(field, direction, bypass_extensions)
        # A CharField that may not be blank refuses "" (and, trimmed, "  "): say so.
        if (
            direction != "request"
            or type(field) not in (serializers.CharField, StrictCharField)
            or result.get("type") != "string"
        ):
            return result
        # A validator may state its rule as a pattern (an integration's id check).
        stated = [v.schema_pattern for v in field.validators if hasattr(v, "schema_pattern")]
        if stated:
            result["pattern"] = f"^$|{stated[0]}" if field.allow_blank else stated[0]
        elif not field.allow_blank:
            result.setdefault("minLength", 1)
            result.setdefault("pattern", NON_BLANK if field.trim_whitespace else NO_NUL)
        else:
            # No string the server takes holds NUL (docs/api.md, "Codes").
            result.setdefault("pattern", NO_NUL)
        return result
