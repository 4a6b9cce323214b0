"""A batch of activity rows, column-wise: what an activity backend hands to
``kprof.plugin.deliver_columns`` (see ``recording/activity.py``) to deliver many rows without
a Python object per row."""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from string import Formatter
from typing import Any, ClassVar, cast

__all__ = ["ActivityColumns"]

#: Formats of 8-byte integers a buffer may hold (native or little-endian byte order: kprof runs
#: on little-endian machines); anything else (floats, big-endian) is refused, not reinterpreted.
_INT8_FORMATS = {p + c for p in ("", "@", "=", "<") for c in "qQlLnN"}
#: What a ``detail`` field may say: a column's number, ``!r``/``!s``, and a short spec for an
#: int (fill, align, sign, width under 100, grouping, base): a view formats every row with it.
_FIELD = re.compile(r"\d{1,3}")
_SPEC = re.compile(r"(.?[<>=^])?[+\- ]?#?0?\d{0,2}[,_]?[bdoxXn]?")


def _col(values: Any, field: str) -> array[int]:
    """A column as ``array('q')``: from any buffer of 8-byte integers (numpy int64/uint64,
    ``array('q')``/``('Q')``, bytes from C; unsigned values over 2**63 keep their bits), of
    narrower integers, or from a sequence of ints. Anything else raises ``TypeError`` naming
    the column: a float column's bits read as integers would be times off by years."""
    if type(values) is array and values.typecode == "q":
        return values
    if isinstance(values, str):
        raise TypeError(f"ActivityColumns: column {field!r} is a str, expected ints")
    try:
        mv = memoryview(values)
    except TypeError:
        mv = None
    if mv is not None:
        fmt = mv.format
        if mv.ndim != 1:
            raise TypeError(
                f"ActivityColumns: column {field!r} has {mv.ndim} dimensions; pass one "
                f"value per row (a 1-D buffer)"
            )
        if fmt == "B" and isinstance(values, (bytes, bytearray)):  # raw int64s from C
            if len(values) % 8:
                raise ValueError(
                    f"ActivityColumns: column {field!r} is {len(values)} bytes, not a "
                    f"whole number of 8-byte integers"
                )
            out = array("q")
            out.frombytes(values)
            return out
        if fmt in _INT8_FORMATS and mv.c_contiguous:
            out = array("q")
            out.frombytes(mv.cast("B"))
            return out
        if fmt.lstrip("@=<") not in tuple("bBhHiIlLqQnN"):
            raise TypeError(
                f"ActivityColumns: column {field!r} holds {fmt!r} values (floats, or "
                f"big-endian?), expected integers (numpy int64/uint64, array('q'))"
            )
        values = mv.tolist()  # narrower (or strided) integers: as Python ints
    try:
        return array("q", values)
    except (TypeError, OverflowError):
        pass
    try:  # unsigned 64-bit ids (rocprofiler-sdk's): their bits, as int64
        out = array("q")
        out.frombytes(array("Q", values).tobytes())
        return out
    except (TypeError, OverflowError):
        pass
    try:
        items = list(values)
    except TypeError:
        raise TypeError(
            f"ActivityColumns: column {field!r} is a {type(values).__name__}, expected a "
            f"buffer or sequence of ints"
        ) from None
    # Not all int64, nor all uint64: name the first value that is neither (or, mixed signs
    # beyond both ranges, the first beyond int64).
    bad = [(i, v) for i, v in enumerate(items) if type(v) is not int]
    bad = bad or [(i, v) for i, v in enumerate(items) if not -(2**63) <= v < 2**63]
    if not bad:  # an iterator the attempts above consumed
        raise TypeError(f"ActivityColumns: column {field!r}: pass a sequence, not an iterator")
    i, v = bad[0]
    what = f"a {type(v).__name__}" if type(v) is not int else "beyond int64, with negatives"
    raise TypeError(
        f"ActivityColumns: column {field!r} row {i} is {v!r:.40} ({what}), expected 64-bit ints"
    )


def _listed(values: Any, what: str) -> list[Any]:
    if isinstance(values, str):
        raise TypeError(f"ActivityColumns: {what} is a str, expected a sequence")
    try:
        return list(values)
    except TypeError:
        raise TypeError(
            f"ActivityColumns: {what} is a {type(values).__name__}, expected a sequence"
        ) from None


def _formatted(spec: Any, what: str) -> tuple[str, list[array[int]]] | None:
    """A ``(format, columns)`` field (``detail``, ``config``) checked: columns of ints, a
    format every row can be formatted with."""
    if spec is None:
        return None
    try:
        fmt, columns = spec
        columns = [_col(c, f"{what}[{k}]") for k, c in enumerate(columns)]
    except (TypeError, ValueError) as exc:
        if str(exc).startswith("ActivityColumns"):
            raise
        raise TypeError(
            f"ActivityColumns: {what} must be (format, columns), e.g. "
            '("grid {0}", (grid_column,))'
        ) from None
    _check_detail(fmt, len(columns), what)
    return fmt, columns


def _check_detail(fmt: Any, ncols: int, what: str = "detail") -> None:
    """Refuse a ``detail`` format that a view could not apply to every row (a field past the
    columns, an attribute lookup, a non-str), or that would make huge texts (a wide spec)."""
    if type(fmt) is not str:
        raise TypeError(f"ActivityColumns: {what}'s format is a {type(fmt).__name__}, not a str")
    try:
        fields = list(Formatter().parse(fmt))
    except ValueError as exc:
        raise ValueError(f"ActivityColumns: {what}'s format {fmt!r:.60}: {exc}") from None
    auto = 0
    for _text, name, spec, conversion in fields:
        if name is None:
            continue
        if name == "":
            name = str(auto)
            auto += 1
        if (
            not _FIELD.fullmatch(name)
            or int(name) >= ncols
            or conversion not in (None, "r", "s")
            or not _SPEC.fullmatch(spec or "")
        ):
            raise ValueError(
                f"ActivityColumns: {what}'s format {fmt!r:.60} has the field "
                f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
                f": fields must be a column's number (0 to {ncols - 1}) with at most a short "
                f"int format"
            )


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
    rocprofiler-sdk's work-items). ``config``: the launch configuration the same way, a
    format over columns (``("grid {0}x{1}x{2} block {3}x{4}x{5}", (gx, gy, gz, bx, by, bz))``),
    interned per distinct tuple of values and formatted once each: what
    ``summary(by=("name", "config"))`` groups by; it describes kernels: a copy row's
    configuration is none, whatever its columns hold. ``site``: each row's launch site, the
    raw id :func:`launch_site` returned on the launching thread when the tool called the
    backend there (CUPTI's callback at a launch's API entry), -1 unknown; an id that is not
    one is taken as -1. ``clock``: the clock domain of the times in words
    (``"CLOCK_MONOTONIC"``, ``"CLOCK_BOOTTIME"``, ``"CUPTI (CLOCK_REALTIME)"``), for the
    backend's ``activity_align``.

    What kprof checks: the batch's shape on construction (and again in
    :func:`deliver_columns`): every column of ints (a float, big-endian or 2-D buffer, or a
    value beyond 64 bits, is refused, never reinterpreted), of one entry per row, and a
    ``detail`` format every row can be formatted with; a ``TypeError`` or ``ValueError`` names
    the column, and nothing is delivered. Each row's values as :func:`deliver` checks a
    ``DeviceRecord``'s (times within ±2**59 ns, the end not before the begin, ``nbytes`` -1 or
    a count, and here ``name``/``queue`` indexes within their lists): a row that fails is kept
    unresolved, with the reason, and the batch's other rows are kept as they are.
    """

    _REQUIRED: ClassVar[tuple[str, ...]] = ("kind", "name", "queue", "begin", "end")
    scope: array[int]
    kind: array[int]
    name: array[int]
    names: list[Any]
    queue: array[int]
    queues: list[Any]
    begin: array[int]
    end: array[int]
    nbytes: array[int]
    launch_begin: array[int]
    launch_end: array[int]
    correlation: array[int] | None
    detail: tuple[str, list[array[int]]] | None
    config: tuple[str, list[array[int]]] | None
    clock: str | None
    site: array[int] | None
    __slots__ = (
        "begin",
        "clock",
        "config",
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
        "site",
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
        config: tuple[str, Sequence[Any]] | None = None,
        site: Any = None,
    ) -> None:
        # As handed over, made columns (or refused) by check().
        self.scope = scope
        self.kind = kind
        self.name = name
        self.names = _listed(names, "names")  # a snapshot: the backend's lists may grow
        self.queue = queue
        self.queues = _listed(queues, "queues")
        self.begin = begin
        self.end = end
        self.nbytes = nbytes
        self.launch_begin = launch_begin
        self.launch_end = launch_end
        self.correlation = correlation
        self.detail = cast(Any, detail)
        self.config = cast(Any, config)
        self.clock = clock
        self.site = site
        self.check()

    def check(self) -> None:
        """Make every column an ``array('q')`` of one entry per row, or raise ``TypeError`` /
        ``ValueError`` saying which column is not (columns of different lengths, floats, a
        value beyond 64 bits, a ``detail`` format a view could not apply). Called on
        construction, and again by ``deliver_columns`` (a column replaced since is checked
        too); values that are ints but wrong for their row (an end before the begin, an index
        past ``names``) are the harvest's: that row is kept unresolved, with the reason."""
        self.scope = _col(self.scope, "scope")
        n = len(self.scope)
        for field in self._REQUIRED:
            setattr(self, field, _col(getattr(self, field), field))
        for field, default in (("nbytes", -1), ("launch_begin", 0), ("launch_end", 0)):
            v = getattr(self, field)
            setattr(self, field, array("q", (default,)) * n if v is None else _col(v, field))
        if self.correlation is not None:
            self.correlation = _col(self.correlation, "correlation")
        if self.site is not None:
            self.site = _col(self.site, "site")
        if type(self.names) is not list:
            self.names = _listed(self.names, "names")
        if type(self.queues) is not list:
            self.queues = _listed(self.queues, "queues")
        self.detail = _formatted(self.detail, "detail")
        self.config = _formatted(self.config, "config")
        if self.clock is not None and type(self.clock) is not str:
            raise TypeError(f"ActivityColumns: clock is a {type(self.clock).__name__}, not a str")
        for field in (
            *self._REQUIRED,
            "nbytes",
            "launch_begin",
            "launch_end",
            "correlation",
            "site",
        ):
            c = getattr(self, field)
            if c is not None and len(c) != n:
                raise ValueError(
                    f"ActivityColumns: column {field!r} has {len(c)} rows, 'scope' {n}: "
                    f"every column needs one entry per row"
                )
        for what in ("detail", "config"):
            spec = getattr(self, what)
            for k, c in enumerate(spec[1] if spec is not None else ()):
                if len(c) != n:
                    raise ValueError(
                        f"ActivityColumns: column {what}[{k}] has {len(c)} rows, 'scope' {n}: "
                        f"every column needs one entry per row"
                    )

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
            config=None
            if self.config is None
            else (self.config[0], list(map(pick, self.config[1]))),
            site=None if self.site is None else pick(self.site),
        )
