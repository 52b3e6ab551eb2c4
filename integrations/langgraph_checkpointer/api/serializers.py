"""The shapes the LangGraph checkpointer's endpoints share (its api.views): bytes as base64, a
put's values and messages, a checkpoint as the saver rebuilds it, a page of them and its
filter, an interrupt, a count.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from integrations.langgraph_checkpointer.api.fields import checkpoint_id_check
from threads.api.parsers import JSONBodyError, NumberNotRepresentable, strict_json_loads
from threads.api.serializers import (
    QueryIntegerField,
    ReadIntegritySerializer,
    StrictCharField,
    StrictInputSerializer,
    StrictIntegerField,
)

MAX_PAGE = 100


@extend_schema_field(OpenApiTypes.BYTE)
class Base64Field(serializers.Field):
    """Bytes as standard base64 text."""

    def to_internal_value(self, data: Any) -> bytes:
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a base64 string")
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise serializers.ValidationError("is not valid base64") from exc

    def to_representation(self, value: bytes) -> str:
        return base64.b64encode(value).decode("ascii")


class ValueSerializer(StrictInputSerializer):
    channel = StrictCharField(max_length=255)
    version = StrictCharField(max_length=255, help_text="the channel version, as text")
    type = StrictCharField(max_length=64, help_text="the serializer's type tag")
    # The stubs type Serializer.data (the rendered answer); here it is the bytes.
    data = Base64Field()  # type: ignore[assignment]


class MessageEntrySerializer(StrictInputSerializer):
    id = StrictCharField(max_length=180, help_text="the LangChain message id")
    digest = serializers.RegexField(r"^[0-9a-f]{64}$", help_text="SHA-256 of its JSON form")
    message = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="`message_to_dict` form; may be left out when the log holds it already",
    )


def _side_effect_tools() -> serializers.ListField:
    return serializers.ListField(
        child=StrictCharField(max_length=200),
        required=False,
        default=list,
        max_length=1000,
        help_text="tools whose calls are side effects: their tool_call events say so",
    )


class MessagesSerializer(StrictInputSerializer):
    channel = StrictCharField(max_length=255)
    version = StrictCharField(max_length=255)
    entries = MessageEntrySerializer(
        many=True, help_text="every message in order, or with `base_version` those after it"
    )
    side_effect_tools = _side_effect_tools()
    base_version = StrictCharField(
        max_length=255,
        required=False,
        allow_null=True,
        default=None,
        help_text="an earlier version of this channel the server holds: `entries` then lists "
        "only the messages after its first `base_count`",
    )
    base_count = StrictIntegerField(
        min_value=0, required=False, default=0, help_text="how many messages the base holds"
    )


class WriteOutputSerializer(serializers.Serializer):
    task_id = StrictCharField()
    task_path = StrictCharField()
    idx = serializers.IntegerField()
    channel = StrictCharField()
    type = StrictCharField(allow_blank=True, help_text="empty for a write of `messages`")
    # The stubs type Serializer.data (the rendered answer); here it is the bytes.
    data = Base64Field()  # type: ignore[assignment]
    messages = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="a write of LangChain messages to the mirrored channel: their JSON forms, "
        "read from the log (then `type` and `data` are empty)",
    )


class ValueOutputSerializer(serializers.Serializer):
    channel = StrictCharField()
    type = StrictCharField()
    # The stubs type Serializer.data (the rendered answer); here it is the bytes.
    data = Base64Field()  # type: ignore[assignment]


class TupleOutputSerializer(serializers.Serializer):
    """A checkpoint as the saver rebuilds its CheckpointTuple."""

    class Meta:
        ref_name = "LanggraphTuple"

    thread_id = StrictCharField()
    checkpoint_ns = StrictCharField(allow_blank=True)
    checkpoint_id = StrictCharField()
    parent_checkpoint_id = StrictCharField(allow_null=True)
    checkpoint = serializers.DictField(help_text="the checkpoint without channel_values")
    metadata = serializers.DictField()
    values = ValueOutputSerializer(many=True)
    messages = serializers.DictField(
        child=serializers.ListField(child=serializers.DictField()),
        help_text="channel -> the JSON forms of its messages, read from the log",
    )
    writes = WriteOutputSerializer(many=True)
    validator = StrictCharField(
        required=False,
        help_text="one checkpoint's read only: its `ETag`, for `If-None-Match` (304 unchanged)",
    )
    cursor = serializers.IntegerField(help_text="the last mirrored seq it stands on")
    ctxadmin_checkpoint = serializers.IntegerField(help_text="its ctxadmin checkpoint's id")
    integrity = ReadIntegritySerializer(
        help_text="the thread's chain verdict; `reaches_break`: this checkpoint's messages "
        "(its own or its pending writes') reach the first bad seq"
    )
    ledger = serializers.DictField(
        required=False,
        allow_null=True,
        help_text="one checkpoint's read only: the side-effect ledger's word on the calls of "
        "side-effecting tools its messages leave unanswered (`calls`: status, recorded result, "
        "resolution) and `templates` of the tool node's task; null when there are none",
    )


class ListFilterSerializer(serializers.Serializer):
    class Meta:
        ref_name = "LanggraphListFilter"

    checkpoint_ns = StrictCharField(
        required=False, allow_blank=True, help_text="one namespace; all when absent"
    )
    checkpoint_id = StrictCharField(
        required=False, validators=[checkpoint_id_check], help_text="only this checkpoint"
    )
    before = StrictCharField(required=False, help_text="checkpoint_ids below this one")
    filter = StrictCharField(
        required=False, help_text="a JSON object: metadata keys and the values they must equal"
    )
    limit = QueryIntegerField(min_value=1, max_value=MAX_PAGE, default=MAX_PAGE)
    page_after = StrictCharField(required=False, help_text="the `next` of the previous page")

    def validate_filter(self, value: str) -> dict[str, Any]:
        # Parsed as strictly as a body (depth, NaN, NUL...): it is compared with stored JSON.
        try:
            parsed = strict_json_loads(value)
        except (JSONBodyError, NumberNotRepresentable) as exc:
            raise serializers.ValidationError(f"must be a JSON object: {exc}") from exc
        if not isinstance(parsed, dict):
            raise serializers.ValidationError("must be a JSON object")
        return parsed

    def validate_page_after(self, value: str) -> tuple[str, int]:
        checkpoint_id, _, pk = value.rpartition(":")
        # A key the table can hold: ASCII digits ("²".isdigit() too), at most 18 of them.
        if not checkpoint_id or not (pk.isascii() and pk.isdigit()) or len(pk) > 18:
            raise serializers.ValidationError("must be the `next` of a previous page")
        return checkpoint_id, int(pk)


class PageOutputSerializer(serializers.Serializer):
    class Meta:
        ref_name = "LanggraphPage"

    checkpoints = TupleOutputSerializer(many=True)
    next = StrictCharField(allow_null=True, help_text="pass as `page_after`; null at the end")


class InterruptSerializer(StrictInputSerializer):
    class Meta:
        ref_name = "LanggraphInterruptInput"

    id = StrictCharField(max_length=180, help_text="the interrupt's id")
    value = serializers.JSONField(
        allow_null=True, help_text="the interrupt's value as plain JSON (null included)"
    )


class CountOutputSerializer(serializers.Serializer):
    class Meta:
        ref_name = "LanggraphCount"

    checkpoints = serializers.IntegerField(help_text="how many checkpoints it deleted or copied")
