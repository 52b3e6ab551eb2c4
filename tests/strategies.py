"""Hypothesis strategies that several test modules draw from."""

from __future__ import annotations

from hypothesis import strategies as st

# JSON documents as Python values: integers beyond 64 bits, floats without NaN or infinities,
# any text, nested lists and objects.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)
