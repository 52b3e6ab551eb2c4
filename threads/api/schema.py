"""OpenAPI schema naming: each view nests its own `InputSerializer` / `OutputSerializer`, so a
component is named after its view (`ThreadEventsAppendApi` → `ThreadEventsAppendInput`), never a
bare, colliding `Input`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema


class ViewScopedAutoSchema(AutoSchema):
    def get_serializer_name(self, serializer: Any, direction: Any) -> str:
        name = super().get_serializer_name(serializer, direction)
        qualname = type(serializer).__qualname__
        if "." in qualname:  # nested in a view (or another serializer): qualify it
            owner = qualname.rsplit(".", 1)[0].replace(".", "")
            owner = owner.removesuffix("Api").removesuffix("View")
            name = owner + name.removesuffix("Serializer")
        return name
