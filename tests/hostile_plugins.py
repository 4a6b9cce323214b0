"""Hostile values a plugin can hand kprof (see tests/test_reliability_values.py): wrapped-around
and uninitialized integers, negative durations, ends before begins, values past int64, floats,
non-str names and queue descriptions, alignments off the clock."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Times and durations a buggy plugin or driver hands back: an unsigned wrap-around (2**64),
#: int64's edges, the file format's edge (2**61) and kprof's (2**59), negative values.
EDGE_INTS = [
    0,
    1,
    -1,
    -(10**9),
    2**59 - 1,
    2**59,
    -(2**59),
    -(2**59) - 1,
    2**61 + 3,
    2**62,
    2**63 - 1,
    -(2**63),
    2**64,
    2**64 + 5,
    -(2**64),
]
HOSTILE_INT = st.one_of(st.sampled_from(EDGE_INTS), st.integers(-(2**66), 2**66))
#: Names that are not str: bytes (a C string), None, an int, a str subclass.


class Shouty(str):
    def __str__(self) -> str:  # a subclass whose str() lies
        return "not the name"


HOSTILE_NAMES: list[Any] = [b"kern_\xff", None, 12, ("a", 1), Shouty("shouty"), "ok"]
