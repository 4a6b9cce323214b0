"""What a profile holds once captured: compact columnar tables and the record views over them.

A million launches must fit in bounded memory, so rows live in ``array('q')`` columns (8 bytes
per field) with names, queues and threads interned; ``KernelRecord`` and ``RangeRecord`` objects
are built only when asked for.
"""

from __future__ import annotations

from array import array
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from kprof_core.data.details import Details as Details  # its home before: importers use it
from kprof_core.data.sites import Site

# Kinds of device records.
KERNEL, COPY, RANGE = 0, 1, 2
KIND_NAMES = {KERNEL: "kernel", COPY: "copy", RANGE: "range"}
KIND_CODES = {v: k for k, v in KIND_NAMES.items()}

# Flags of device records.
HOST_TIMED = 1  # timed on the host: the backend has no timestamps (or no current queue)
UNRESOLVED = 2  # the device never gave a time (see Profile.unresolved for why)
PLACED = 4  # start is already on the host timeline (rows merged from a nested profile)
# Approximate: the queue gave no device timestamps, so the work's end was observed on the host
# as it completed (without synchronizing) and its start estimated; marked ``~`` in reports.
APPROXIMATE = 8
MARKS = HOST_TIMED | APPROXIMATE  # the flags reports mark (``*``, ``~``) and group rows by
#: Every flag (the loader refuses other bits): a new flag must be added here.
ALL_FLAGS = HOST_TIMED | UNRESOLVED | PLACED | APPROXIMATE


@dataclass(frozen=True)
class QueueRecord:
    """One queue (stream) of one device of one backend, as it appears in reports.

    ``backend``: the backend's name; ``device`` and ``label``: what the plugin's ``queue_info``
    said (for example ``"stream 2"``); ``device_key``: ``"<backend>:<key>"``, the same for every
    queue whose timestamps share a clock.
    """

    backend: str
    device: str
    label: str
    device_key: str

    def row_name(self, thread: str | None = None) -> str:
        """The queue's row title in traces (``"OpenCL <device>, queue 1"``), with a thread."""
        name = f"{self.backend_title} {self.device}, {self.label}"
        return f"{name}, {thread}" if thread else name

    @property
    def backend_title(self) -> str:
        """The backend's name as shown in reports (``"OpenCL"`` for ``opencl``)."""
        return {"opencl": "OpenCL", "cuda": "CUDA", "hip": "HIP"}.get(self.backend, self.backend)


@dataclass(frozen=True)
class ThreadRecord:
    """A thread (and asyncio task, if any) that launched work or entered ranges.

    ``ident``: ``threading.get_ident()`` of the thread; ``name``: its name; ``task``: the
    asyncio task's name, or None.
    """

    ident: int
    name: str
    task: str | None = None

    @property
    def label(self) -> str:
        """How records name it: the thread's name, with its task's (``"MainThread, task t1"``)."""
        return f"{self.name}, task {self.task}" if self.task else self.name


@dataclass(frozen=True)
class KernelRecord:
    """One piece of device work: a kernel, a copy, or the device time of a ``kprof.range``.

    Times are nanoseconds on the host clock (``time.perf_counter_ns``), relative to the
    profile's start (``Profile.start_ns``). ``start_ns`` is where the work started on the
    device, placed on that clock (how, and within what error, is in ``Profile.clocks``), and
    ``duration_ns`` its device duration (``end_ns`` = start + duration).
    ``launch_start_ns``/``launch_end_ns`` bracket the host call that enqueued it (for a range,
    the range's host interval). ``host_timed`` records were timed on the host (marked ``*``);
    ``approximate`` ones from completions observed on the host, without synchronizing (``~``).
    ``error`` says why a record has no device time, when it has none. ``site``: the line of
    the user's code that launched it (``kprof.Site``: file, line, function), or None;
    ``config``: its launch configuration as text (``"global 1024 local 64"``), or None;
    ``flops``/``nbytes``: the flops and bytes the user said (``kprof.annotate``), or None.

    ``name``: the kernel's, copy's or range's name; ``kind``: ``"kernel"``, ``"copy"`` or
    ``"range"``; ``backend``, ``device`` and ``queue``: where it ran (the backend's name, and
    the device and queue label from its ``queue_info``); ``thread``: the launching thread's
    label (see ``ThreadRecord.label``); ``nbytes``: a copy's size, else None.
    """

    name: str
    kind: str
    backend: str
    device: str
    queue: str
    thread: str
    start_ns: int
    duration_ns: int
    launch_start_ns: int
    launch_end_ns: int
    nbytes: int | None
    host_timed: bool
    error: str | None = None
    approximate: bool = False
    site: Site | None = None
    config: str | None = None
    flops: int | None = None

    @property
    def end_ns(self) -> int:
        """When the work ended: ``start_ns + duration_ns``."""
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class RangeRecord:
    """A named host range (``kprof.range``, or the host side of a captured launch).

    ``name``; ``thread``: the thread's label; ``start_ns`` and ``duration_ns``: nanoseconds on
    the host clock, relative to ``Profile.start_ns``; ``kind``: ``"range"``, or ``"launch"``
    for the host side of a launch (``Profile.launches``); ``site``: where in the user's code
    it ended (``kprof.Site``), or None.
    """

    name: str
    thread: str
    start_ns: int
    duration_ns: int
    kind: str = "range"
    site: Site | None = None

    @property
    def end_ns(self) -> int:
        """When the range ended: ``start_ns + duration_ns``."""
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class MarkerRecord:
    """A ``kprof.mark`` instant: its ``name``, the ``thread``'s label, and ``time_ns`` (host
    clock, relative to ``Profile.start_ns``)."""

    name: str
    thread: str
    time_ns: int


class Interner:
    """Maps values to small ints and back; rows store the ints."""

    __slots__ = ("index", "values")

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.index: dict[Any, int] = {}

    def __call__(self, value: Any) -> int:
        i = self.index.get(value)
        if i is None:
            i = self.index[value] = len(self.values)
            self.values.append(value)
        return i

    def __len__(self) -> int:
        return len(self.values)


#: The ``stack`` columns' array type: 32-bit, as stack ids are few (one per distinct stack).
STACK_TYPE = "i"


class DeviceTable:
    """Device records, one column per field."""

    COLUMNS = (
        "name",
        "kind",
        "queue",
        "thread",
        "launch_start",
        "launch_end",
        "start",
        "duration",
        "nbytes",
        "flags",
        "site",
        "config",
        "flops",
    )

    def __init__(self) -> None:
        for c in self.COLUMNS:
            setattr(self, c, array("q"))
        self.stack = array(STACK_TYPE)

    name: array[int]
    kind: array[int]
    queue: array[int]
    thread: array[int]
    launch_start: array[int]
    launch_end: array[int]
    start: array[int]
    duration: array[int]
    nbytes: array[int]
    flags: array[int]
    #: The launch site: an index into the profile's ``sites`` (once resolved), -1 for none.
    site: array[int]
    #: The launch configuration: an index into the profile's ``configs``, -1 for none.
    config: array[int]
    flops: array[int]  #: flops the user said (kprof.range, kprof.annotate), -1: not said
    #: The launch stack: an index into the profile's ``stacks``, -1 for none. Not one of the
    #: ``COLUMNS`` rows are recorded with: made at the profile's end from the raw ids in
    #: ``site``, and empty when no row has a stack (``profile(stacks=False)``). 32-bit
    #: (``STACK_TYPE``): 4 bytes a record (files store it as int64, as every column).
    stack: array[int]

    def append(
        self,
        name: int,
        kind: int,
        queue: int,
        thread: int,
        launch_start: int,
        launch_end: int,
        start: int,
        duration: int,
        nbytes: int,
        flags: int,
        site: int = -1,
        config: int = -1,
        flops: int = -1,
    ) -> int:
        # All or nothing: a value a column refuses (a plugin's float, an int past int64)
        # takes back what the others grew, so the columns never differ in length.
        n = len(self.name)
        try:
            self.name.append(name)
            self.kind.append(kind)
            self.queue.append(queue)
            self.thread.append(thread)
            self.launch_start.append(launch_start)
            self.launch_end.append(launch_end)
            self.start.append(start)
            self.duration.append(duration)
            self.nbytes.append(nbytes)
            self.flags.append(flags)
            self.site.append(site)
            self.config.append(config)
            self.flops.append(flops)
        except BaseException:
            _cut(self, self.COLUMNS, n)
            raise
        return n

    def __len__(self) -> int:
        return len(self.name)

    def columns(self) -> tuple[array[int], ...]:
        """The column arrays, in ``COLUMNS`` order."""
        return tuple(getattr(self, c) for c in self.COLUMNS)

    def trim(self) -> None:
        """Give back what the columns over-allocated while growing (up to 1/16 of them): a
        copy of an array is exactly its size. For tables that are complete."""
        _trim(self, self.COLUMNS)

    def row(self, i: int) -> tuple[int, ...]:
        return tuple(getattr(self, c)[i] for c in self.COLUMNS)


class HostTable:
    """Host ranges and markers (markers have kind MARK and end == start).

    LAUNCH rows are the host calls of launches profiled with ``device=False`` (with device
    timing on, a launch's host call lives in its ``DeviceTable`` row instead).
    """

    RANGE, MARK, LAUNCH = 0, 1, 2
    COLUMNS = ("name", "kind", "thread", "start", "end", "site")

    def __init__(self) -> None:
        for c in self.COLUMNS:
            setattr(self, c, array("q"))
        self.stack = array(STACK_TYPE)

    name: array[int]
    kind: array[int]
    thread: array[int]
    start: array[int]
    end: array[int]
    site: array[int]  # as DeviceTable.site
    stack: array[int]  # as DeviceTable.stack

    def trim(self) -> None:
        """As ``DeviceTable.trim``."""
        _trim(self, self.COLUMNS)

    def append(
        self, name: int, kind: int, thread: int, start: int, end: int, site: int = -1
    ) -> None:
        n = len(self.name)
        try:  # all or nothing, as DeviceTable.append
            self.name.append(name)
            self.kind.append(kind)
            self.thread.append(thread)
            self.start.append(start)
            self.end.append(end)
            self.site.append(site)
        except BaseException:
            _cut(self, self.COLUMNS, n)
            raise

    def __len__(self) -> int:
        return len(self.name)


def _cut(table: Any, columns: tuple[str, ...], n: int) -> None:
    """Every column back to ``n`` rows (an append that failed part way)."""
    for c in columns:
        del getattr(table, c)[n:]


def _trim(table: Any, columns: tuple[str, ...]) -> None:
    for c in columns:
        setattr(table, c, array("q", getattr(table, c)))


@dataclass
class DeviceClock:
    """How one device's timestamps were placed on the host timeline (``Profile.clocks``).

    ``backend`` and ``device``: whose; ``method``: the ``Alignment.method`` the plugin's
    ``align_clock`` reported, or the fallback (the first work assumed to start at its launch);
    ``error_ns``: the alignment's error bound, or None when unknown; ``shift_ns``: how far the
    whole device was moved later so that no work starts before its launch (0 normally).
    """

    backend: str
    device: str
    method: str
    error_ns: int | None
    shift_ns: int = 0

    def describe(self) -> str:
        """The method and error bound in words, as the trace prints them."""
        err = "unknown error bound" if self.error_ns is None else f"error ≤ {self.error_ns} ns"
        extra = (
            f", shifted {self.shift_ns} ns so no work starts before its launch"
            if self.shift_ns
            else ""
        )
        return f"{self.method} ({err}{extra})"


@dataclass(frozen=True)
class Recording:
    """What a recorder hands up when its profile ends (``Recorder.recording()``): the final
    tables and the lists and maps their columns index. ``ProfileData`` is built from it; the
    recorder keeps nothing a profile reads afterwards."""

    table: DeviceTable
    host: HostTable
    names: list[str]
    queues: list[QueueRecord]
    threads: list[ThreadRecord]
    sites: list[Site]
    configs: list[str]
    stacks: tuple[tuple[Site, ...], ...]
    errors: dict[int, str]
    details: MutableMapping[int, str]
    clocks: dict[str, DeviceClock]
    #: backend name -> (activity records its tracer dropped while the profile ran, why).
    dropped: dict[str, tuple[int, str]]
