"""What every audited action shares: the text a person gives for it."""

from __future__ import annotations

import pytest

from threads.domain.errors import InvalidEvent
from threads.services.audit import MAX_REASON, reason_clean, required_text_clean


def test_a_reason_is_stripped_required_and_bounded() -> None:
    assert reason_clean("  because  ") == "because"
    with pytest.raises(InvalidEvent) as blank:
        reason_clean("   ")
    assert blank.value.fields == {"reason": "this field is required"}
    with pytest.raises(InvalidEvent) as long:
        reason_clean("x" * (MAX_REASON + 1))
    assert long.value.message == "reason is too long"
    assert reason_clean("x" * MAX_REASON) == "x" * MAX_REASON


def test_required_text_names_its_field_and_hint() -> None:
    with pytest.raises(InvalidEvent) as missing:
        required_text_clean("", field="note", limit=3, missing="a note is required", hint="h")
    assert missing.value.message == "a note is required"
    with pytest.raises(InvalidEvent) as long:
        required_text_clean("abcd", field="note", limit=3, missing="m", hint="at most 3")
    assert (long.value.message, long.value.fields) == ("note is too long", {"note": "at most 3"})
