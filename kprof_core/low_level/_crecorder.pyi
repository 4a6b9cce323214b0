# The compiled recorder (_crecorder.c): its Python twins are Recorder._launch_py
# (recording/recorder.py), run_columns (recording/harvest_columns.py) and placement.py's
# column arithmetic. Loaded through native.py only, which checks LAYOUT first.
from collections.abc import Callable
from typing import Any

#: The layout.SIGNATURE this module was built with (from _layout.h).
LAYOUT: str
#: The idle helpers' calling convention (idle_columns.IDLE_VERSION must equal it).
IDLE_VERSION: int

class LaunchPath:
    next_harvest: int
    #: kprof.range's compiled path: (backend, current_queue, record_timestamp or None, slot)
    #: per backend, or None (recorder.py's _range_plan).
    range_plan: tuple[tuple[Any, Any, Any, int], ...] | None
    #: The recorder's open_ranges and forked_ranges (the compiled range uses them).
    open_ranges: dict[int, tuple[Any, ...]]
    forked_ranges: dict[int, int]
    def launch(
        self,
        backend: Any,
        kind: int,
        name: str,
        queue: Any,
        start_ns: int,
        end_ns: int,
        start: Any = ...,
        stop: Any = ...,
        nbytes: int = ...,
        config: Any = ...,
    ) -> None: ...

class RangeBase:
    """kprof.range's base where this module is loaded: __enter__/__exit__ in C for the common
    case, annotations.range._enter_py/_exit_py otherwise (_range.c)."""

    name: str
    _top: Any
    _more: list[Any] | None
    flops: int
    nbytes: int
    def __init__(self, name: str, flops: int | None = None, bytes: int | None = None) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...

def range_bind(
    active: Callable[[], Any],
    now: Callable[[], int],
    outside: Any,
    kind_range: int,
    entry_host_range: int,
    flag_approximate: int,
    flag_host_timed: int,
    said: Callable[[Any, str, str], int],
    enter_py: Callable[[Any], Any],
    exit_py: Callable[..., None],
) -> None: ...
def launch_path(
    incoming: list[tuple[Any, ...]],
    live: dict[int, Any],
    timed: frozenset[int],
    slow: Callable[..., None],
    pressure: Callable[[], None],
    tls: Any,
    running_loop: Callable[[], Any],
    who: Callable[[], Any],
    next_harvest: int,
    sites: Any,
) -> LaunchPath: ...
def run_columns(
    chunk: list[tuple[Any, ...]],
    slot: int,
    backend: Any,
    fast_queues: dict[int, tuple[Any, int, str]],
    thread_ids: dict[Any, int],
    name_ids: dict[str, int],
    config_ids: dict[Any, int],
    known: dict[str, Any],
    kind_bound: int,
) -> tuple[Any, ...]: ...
def checked_rel_dur(
    begins: bytes, ends: bytes, refb: bytes, h0s: bytes, h1s: bytes, nbytes: bytes, limit: int
) -> tuple[int, bytes, bytes]: ...
def max_diff(a: bytes, b: bytes, codes: bytes | None, d: int) -> Any: ...
def add_codes(start: bytes, codes: bytes | None, offsets: tuple[int, ...]) -> bytes: ...
def or_const(flags: bytes, bits: int) -> bytes: ...
def idle_window(
    s: bytes,
    e: bytes,
    ls: bytes,
    le: bytes,
    lo: int,
    hi: int,
    w0: int,
    w1: int,
    others: bytes | None,
    keep: bool,
) -> tuple[int, int, int, int, int, int, int, bytes | None, bytes | None]: ...
def idle_stats(
    s: bytes, e: bytes, ls: bytes, le: bytes, spans: bytes, aligned: bool
) -> tuple[int, int, int, int, int, tuple[int, int, int, int, int, int, int] | None]: ...
def idle_order(s: bytes) -> bytes | None: ...
def idle_take(column: bytes, order: bytes) -> bytes: ...
def idle_cover(starts: bytes, ends: bytes, at_least: int) -> int: ...
def idle_pick(
    codes: bytes, wanted: tuple[int, ...], column: bytes, keep: bool, sort: bool
) -> bytes: ...
def idle_ends(s: bytes, d: bytes) -> tuple[bytes, int | None]: ...
