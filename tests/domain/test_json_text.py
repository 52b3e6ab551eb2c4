"""orjson reads and writes what the standard library does: the values, and the bytes but for
the spelling of floats written with an exponent."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given

from tests.strategies import json_values
from threads.domain.json_text import json_dumps_compact, json_loads, json_string_loads


def _stdlib(value: Any) -> bytes:
    """What DRF's JSONRenderer writes (compact, non-ASCII as is, no NaN, U+2028/9 escaped)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


@given(json_values)
def test_a_text_reads_as_the_standard_library_reads_it(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        read = json_loads(text)
        assert read == json.loads(text)
        assert repr(read) == repr(json.loads(text))  # 2**70 stays an int, not an equal float
        assert json_loads(text.encode()) == read
        assert json_string_loads(text) == read


def test_integers_beyond_64_bits_stay_integers() -> None:
    # orjson alone reads them as floats, silently.
    for number in (2**64, -(2**63) - 1, 10**30, -(10**19)):
        assert json_loads(f'{{"n": {number}}}') == {"n": number}
        assert type(json_loads(f"[{number}]")[0]) is int
    assert json_loads("[1e400]") == [float("inf")]  # json's reading: orjson refuses it


@given(json_values)
def test_a_value_is_written_as_the_standard_library_writes_it(value: Any) -> None:
    written = json_dumps_compact(value)
    if written is None:  # refused (an integer beyond 64 bits): the caller writes it with json
        return
    assert json.loads(written) == value
    if not _has_float(value):
        assert written == _stdlib(value)


def test_what_orjson_would_write_otherwise_is_left_to_the_standard_library() -> None:
    class Label(str):
        pass

    assert json_dumps_compact({"n": 2**64}) is None
    assert json_dumps_compact({1: "x"}) is None  # json writes the key as "1"
    assert json_dumps_compact([Label("x")]) is None
    assert json_dumps_compact({"a": "b\u2028c\u2029", "é": "\x1f\n"}) == _stdlib(
        {"a": "b\u2028c\u2029", "é": "\x1f\n"}
    )
