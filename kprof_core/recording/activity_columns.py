"""A batch of activity rows, column-wise: what an activity backend hands to
``kprof.plugin.deliver_columns`` (see ``recording/activity.py``) to deliver many rows without
a Python object per row."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

__all__ = ["ActivityColumns"]


def _col(values: Any) -> array[int]:
    """A column as ``array('q')``: from any buffer of 8-byte integers (numpy int64/uint64,
    ``array('q')``/``('Q')``, bytes from C; unsigned values over 2**63 keep their bits), or
    from a sequence of ints."""
    if isinstance(values, array) and values.typecode == "q":
        return values
    try:
        mv = memoryview(values)
    except TypeError:
        mv = None
    if mv is not None and mv.itemsize == 8 and mv.contiguous:
        out = array("q")
        out.frombytes(mv.cast("B"))
        return out
    try:
        return array("q", values)
    except OverflowError:  # unsigned 64-bit ids (rocprofiler-sdk's): their bits, as int64
        out = array("q")
        out.frombytes(array("Q", values).tobytes())
        return out


class ActivityColumns:
    """A batch of completed device work, one column per field: how an activity backend (CUPTI,
    rocprofiler-sdk, Level Zero/PTI) hands many rows to kprof at once with
    :func:`deliver_columns`, without a Python object per row.

    Every column has one entry per row and is an ``array('q')`` or any buffer of 8-byte
    integers (numpy ``int64``/``uint64``, bytes from C). Columns that index a list:

    - ``scope``: the scope each row was launched in (``activity_scope_enter``'s; 64-bit);
    - ``name``: an index into ``names`` (strings, interned by the backend);
    - ``queue``: an index into ``queues``, the backend's queue objects (``queue_info``
      describes them; its ``device_key`` groups the queues that share a clock). The backend
      maps its own key to them: CUPTI's (device, context, stream), rocprofiler's 64-bit HSA
      queue handle, PTI's queue handle.

    Times, in ns on the device records' clock (placed on the host clock by ``activity_align``
    once per device): ``begin``, ``end``, and ``launch_begin``/``launch_end`` (the launching
    host call, 0 when unknown). ``kind``: ``KERNEL`` or ``COPY``; ``nbytes``: bytes moved or set
    (-1 for kernels). ``correlation``: the tracer's 64-bit id of each row's launch (optional;
    kept for the backend's own use). ``detail``: ``(format, columns)`` describing each row,
    formatted only when a view shows it, e.g. ``("grid ({0}, {1}, {2}) block ({3}, {4}, {5})",
    (gx, gy, gz, bx, by, bz))``: the format says the unit (CUDA's grid counts blocks,
    rocprofiler-sdk's work-items). ``clock``: the clock domain of the times in words
    (``"CLOCK_MONOTONIC"``, ``"CLOCK_BOOTTIME"``, ``"CUPTI (CLOCK_REALTIME)"``), for the
    backend's ``activity_align``.
    """

    __slots__ = (
        "begin",
        "clock",
        "correlation",
        "detail",
        "end",
        "kind",
        "launch_begin",
        "launch_end",
        "name",
        "names",
        "nbytes",
        "queue",
        "queues",
        "scope",
    )

    def __init__(
        self,
        *,
        scope: Any,
        kind: Any,
        name: Any,
        names: Sequence[str],
        queue: Any,
        queues: Sequence[Any],
        begin: Any,
        end: Any,
        nbytes: Any = None,
        launch_begin: Any = None,
        launch_end: Any = None,
        correlation: Any = None,
        detail: tuple[str, Sequence[Any]] | None = None,
        clock: str | None = None,
    ) -> None:
        self.scope = _col(scope)
        n = len(self.scope)
        zeros = array("q", bytes(8 * n))
        self.kind = _col(kind)
        self.name = _col(name)
        self.names = list(names)
        self.queue = _col(queue)
        self.queues = list(queues)
        self.begin = _col(begin)
        self.end = _col(end)
        self.nbytes = _col(nbytes) if nbytes is not None else array("q", (-1,)) * n
        self.launch_begin = _col(launch_begin) if launch_begin is not None else zeros
        self.launch_end = _col(launch_end) if launch_end is not None else zeros
        self.correlation = _col(correlation) if correlation is not None else None
        self.detail = None if detail is None else (detail[0], [_col(c) for c in detail[1]])
        self.clock = clock
        for c in (self.kind, self.name, self.queue, self.begin, self.end, self.nbytes):
            if len(c) != n:
                raise ValueError(f"ActivityColumns: columns of {len(c)} and {n} rows")

    def __len__(self) -> int:
        return len(self.scope)

    def take(self, rows: Sequence[int]) -> ActivityColumns:
        """The batch of ``rows`` only (when its rows belong to several profiles)."""

        def pick(c: array[int]) -> array[int]:
            return array("q", map(c.__getitem__, rows))

        return ActivityColumns(
            scope=pick(self.scope),
            kind=pick(self.kind),
            name=pick(self.name),
            names=self.names,
            queue=pick(self.queue),
            queues=self.queues,
            begin=pick(self.begin),
            end=pick(self.end),
            nbytes=pick(self.nbytes),
            launch_begin=pick(self.launch_begin),
            launch_end=pick(self.launch_end),
            correlation=None if self.correlation is None else pick(self.correlation),
            detail=None
            if self.detail is None
            else (self.detail[0], list(map(pick, self.detail[1]))),
            clock=self.clock,
        )
