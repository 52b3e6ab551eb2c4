"""Canonical JSON: the pieces the append path assembles must equal one encode of the whole."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import json_values
from threads.domain.canonical import canonical_json, canonical_text, join_canonical


def reference(value: Any) -> str:
    """The definition: json.dumps with sorted keys, no spaces, no ASCII escaping, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@given(json_values)
def test_canonical_text_is_the_reference_encoding(value: Any) -> None:
    assert canonical_text(value) == reference(value)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=8))
def test_an_object_joined_from_encoded_members_is_its_canonical_text(value: dict[str, Any]) -> None:
    members = {name: canonical_text(member) for name, member in value.items()}
    assert join_canonical(members) == canonical_text(value) == reference(value)


def test_characters_that_need_escaping_are_escaped_as_json_dumps_does() -> None:
    value = {"q": 'a "quote" \\ back\nslash\t\x01\x7f é 😀 \u2028', "\n": "key"}
    assert canonical_text(value) == reference(value)
    assert join_canonical({k: canonical_text(v) for k, v in value.items()}) == reference(value)


def test_times_are_utc_with_microseconds() -> None:
    moment = datetime(2026, 1, 31, 13, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    assert canonical_text({"at": moment}) == '{"at":"2026-01-31T12:00:00.000000Z"}'
    assert canonical_json([moment.astimezone(UTC)]) == b'["2026-01-31T12:00:00.000000Z"]'


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_have_no_canonical_form(number: float) -> None:
    with pytest.raises(ValueError):
        canonical_text({"x": [number]})


def test_values_json_has_no_form_for_are_refused() -> None:
    with pytest.raises(TypeError):
        canonical_text({"x": {1, 2}})
    with pytest.raises(ValueError):
        canonical_text({"at": datetime(2026, 1, 1)})  # naive: no canonical time
