"""A JSON renderer for the endpoints whose answers are large (a checkpointer's restore: hundreds of
messages, half a megabyte): orjson writes them several times faster than DRF's `JSONRenderer`,
the same document (threads.domain.json_text.json_dumps_compact); what orjson would write
otherwise, and an indented answer (`Accept: application/json; indent=4`), DRF writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import JSONRenderer

from threads.domain.json_text import json_dumps_compact


class LargeJSONRenderer(JSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        compact = self.compact and not self.ensure_ascii and self.strict
        if data is not None and compact:
            indent = self.get_indent(accepted_media_type or "", renderer_context or {})
            if indent is None:
                written = json_dumps_compact(data)
                if written is not None:
                    return written
        return super().render(data, accepted_media_type, renderer_context)
