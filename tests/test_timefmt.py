"""Time formatting: three significant digits, the unit that keeps them, no exponent."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kprof_core.data.timefmt import format_bytes, format_rate, format_time

UNITS = {"ns": 1.0, "µs": 1e3, "ms": 1e6, "s": 1e9}
FORMAT = re.compile(r"^(-?)(\d+(?:\.\d+)?) (ns|µs|ms|s)$")
values = st.floats(min_value=0, max_value=1e13, allow_nan=False, allow_infinity=False)


def parse(text: str) -> tuple[float, str, str]:
    m = FORMAT.match(text)
    assert m, f"{text!r} is not '<number> <unit>'"
    sign, mantissa, unit = m.groups()
    return (-1 if sign else 1) * float(mantissa) * UNITS[unit], mantissa, unit


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (1, "1 ns"),
        (999, "999 ns"),
        (999.4, "999 ns"),
        (999.5, "1 µs"),
        (999.7, "1 µs"),
        (1000, "1 µs"),
        (1234, "1.23 µs"),
        (12_345, "12.3 µs"),
        (123_456, "123 µs"),
        (999_499, "999 µs"),
        (999_500, "1 ms"),
        (1.234e6, "1.23 ms"),
        (999.5e6, "1 s"),
        (42e9, "42 s"),
        (1e12, "1000 s"),
        (-1234, "-1.23 µs"),
    ],
)
def test_examples(ns: float, text: str) -> None:
    assert format_time(ns) == text


def test_not_a_number() -> None:
    assert format_time(float("nan")) == "nan"
    assert format_time(float("inf")) == "inf"
    with pytest.raises(TypeError, match="number of nanoseconds, not bool"):
        format_time(True)


@given(values)
def test_one_to_three_significant_digits_in_the_unit_that_keeps_them(ns: float) -> None:
    value, mantissa, unit = parse(format_time(ns))
    if ns < 999.5:
        assert unit == "ns" and mantissa.isdigit() and abs(value - ns) <= 0.5
        return
    assert unit != "ns"
    if ns < 999.5e9:
        digits = mantissa.replace(".", "").lstrip("0")
        assert 1 <= len(digits) <= 3
        assert 1 <= float(mantissa) < 1000
        assert abs(value - ns) <= 0.005 * ns  # three significant digits: within half a unit
    else:
        assert unit == "s" and mantissa.isdigit()  # whole seconds, never an exponent


@given(values, values)
def test_monotonic(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert parse(format_time(lo))[0] <= parse(format_time(hi))[0]


@given(st.floats(min_value=0, max_value=1e12))
def test_the_unit_switches_at_999_5(ns: float) -> None:
    assert format_time(ns).endswith(" ns") == (ns < 999.5)


def test_bytes_and_rates() -> None:
    assert format_bytes(0) == "0 B" and format_bytes(1023) == "1023 B"
    assert format_bytes(1024) == "1 KiB" and format_bytes(4 * 1024**2) == "4 MiB"
    assert format_rate(1e9, 1e9) == "954 MiB/s" and format_rate(1, 0) == ""
    with pytest.raises(ValueError):
        format_bytes(-1)
