"""OpenAPI schema naming: each view nests its own `InputSerializer` / `OutputSerializer`, so a
component is named after its view (`ThreadEventsAppendApi` → `ThreadEventsAppendInput`), never a
bare, colliding `Input`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from threads.api.schema_contract import NON_BLANK
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
            direction == "request"
            and type(field) in (serializers.CharField, StrictCharField)
            and not field.allow_blank
            and result.get("type") == "string"
        ):
            result.setdefault("minLength", 1)
            if field.trim_whitespace:
                result.setdefault("pattern", NON_BLANK)
        return result
