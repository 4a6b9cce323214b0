"""HIP through hip-python: error checking, the event pool, streams, kernel names.

hip-python is imported lazily (``lib()``), so that importing the plugin costs nothing and
never touches the HIP runtime: hip-python 10 fixes the path of ``libamdhip64.so`` at its
first call, and a probe made too early would pin the wrong one.

Every HIP call returns an error code first. ``check``/``HipError`` turn a non-success code
into an exception; the other outputs of a failed call are garbage and are never used.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any

_hip: Any = None  # the hip-python module, once imported

HIP_SUCCESS = 0
HIP_ERROR_NOT_READY = 600

#: Idle events kept in the pool; a release past this destroys the event instead. A profile
#: holds at most ~2 × ``Recorder.harvest_every`` events in flight in steady state.
POOL_MAX = 4096


def lib() -> Any:
    """The hip-python ``hip`` module (``from hip import hip``); raises ImportError if absent."""
    global _hip
    if _hip is None:
        from hip import hip

        _hip = hip
    return _hip


def error_name(code: Any) -> str:
    """``hipErrorInvalidValue`` for a ``hipError_t`` or an int code."""
    name = getattr(code, "name", None)
    if isinstance(name, str):
        return name
    try:
        return str(lib().hipError_t(int(code)).name)
    except Exception:
        return "unknown HIP error"


class HipError(RuntimeError):
    """A HIP call returned an error code, e.g. ``hipEventRecord failed: hipErrorInvalidValue (1)``.

    ``function`` is the HIP function's name, ``code`` the error code (an int), ``name`` its
    ``hipError_t`` name.
    """

    def __init__(self, function: str, code: Any, note: str = "") -> None:
        self.function = function
        self.code = int(code)
        self.name = error_name(code)
        super().__init__(f"{function} failed: {self.name} ({self.code}){note}")


def check(function: str, result: tuple[Any, ...]) -> tuple[Any, ...]:
    """Return ``result`` (a hip-python tuple) if its error code is hipSuccess, else raise."""
    if result[0]:
        raise HipError(function, result[0])
    return result


# ---------------------------------------------------------------------------------------------
# Handles: hip-python accepts a wrapper object, None (NULL), an int address or a c_void_p.
# ---------------------------------------------------------------------------------------------


def address(obj: Any) -> int:
    """The address of a HIP handle in any form hip-python accepts as an argument."""
    if obj is None:
        return 0
    try:
        return int(obj)  # an int, or a hip-python handle (Pointer subclass)
    except TypeError:
        pass
    if isinstance(obj, ctypes.c_void_p):
        return obj.value or 0
    from rocm.bindings.util.types import Pointer  # other forms (buffers, CUDA array interface)

    return int(Pointer.fromObj(obj))


# ---------------------------------------------------------------------------------------------
# Devices and streams
# ---------------------------------------------------------------------------------------------

#: Devices seen by describe_backend; with more than one, a stream's device is asked for.
device_count = 1
_device_names: dict[int, str] = {}


def device_name(index: int) -> str:
    """``hipDeviceGetName`` of device ``index`` (cached)."""
    name = _device_names.get(index)
    if name is None:
        _, raw = check("hipDeviceGetName", lib().hipDeviceGetName(256, index))
        name = _device_names[index] = raw.decode() if isinstance(raw, bytes) else str(raw)
    return name


def current_device() -> int:
    if device_count <= 1:
        return 0
    return int(check("hipGetDevice", lib().hipGetDevice())[1])


class Stream:
    """A HIP stream as kprof sees it: one object per stream, so records group by stream.

    ``handle`` is what is passed to HIP (``None`` for the NULL stream, else the address).
    ``label`` is ``"default stream"`` or ``"stream N"``, numbered in the order kprof first
    saw each stream in this process.
    """

    __slots__ = ("address", "device", "handle", "label")

    def __init__(self, addr: int, device: int, label: str) -> None:
        self.address = addr
        self.handle: int | None = addr or None
        self.device = device
        self.label = label

    def __repr__(self) -> str:
        return f"<kprof_hip.Stream {self.label} on HIP {self.device} (0x{self.address:x})>"


_streams: dict[Any, Stream] = {}
_streams_lock = threading.Lock()
_numbered = 0


def stream_of(obj: Any) -> Stream:
    """The ``Stream`` for a stream argument (first sight: its device is the current one).

    The NULL stream is per device; a stream address that HIP reuses after
    ``hipStreamDestroy`` keeps the label of the first stream seen there.
    """
    addr = address(obj)
    key: Any = addr if addr else (0, current_device())
    s = _streams.get(key)
    if s is None:
        global _numbered
        dev = key[1] if not addr else current_device()
        with _streams_lock:
            s = _streams.get(key)
            if s is None:
                if addr:
                    _numbered += 1
                    label = f"stream {_numbered}"
                else:
                    label = "default stream"
                s = _streams[key] = Stream(addr, dev, label)
    return s


_local = threading.local()


def current_stream() -> Stream | None:
    """The calling thread's current stream (set with ``use_stream``), or None."""
    return getattr(_local, "stream", None)


class use_stream:
    """Make ``stream`` the calling thread's current HIP stream for kprof, in a ``with`` block.

    hip-python has no notion of a current stream, so ``kprof.range`` and ``kprof.kernel`` put
    their HIP timestamps on the stream named here (``None`` is the NULL stream); without one,
    they record no HIP device time. Captured launches always use the stream they name.
    Thread-local, like a current stream in HIP's C++ API; blocks nest.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._saved: list[Stream | None] = []

    def __enter__(self) -> Any:
        ref = stream_of(self.stream)
        self._saved.append(current_stream())
        _local.stream = ref
        return self.stream

    def __exit__(self, *exc: object) -> None:
        _local.stream = self._saved.pop()


# ---------------------------------------------------------------------------------------------
# Kernel names
# ---------------------------------------------------------------------------------------------

#: function handle address -> name, filled by hipModuleGetFunction while capture is installed
#: and by name_function; kept for the life of the process.
names: dict[int, str] = {}


def name_function(function: Any, name: str) -> Any:
    """Give kprof the name of a HIP function handle (``hipFunction_t``); returns ``function``.

    Needed only for functions obtained with ``hipModuleGetFunction`` before the first
    ``kprof.profile()`` started: those are otherwise reported as ``kernel@0x...``.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name_function needs a non-empty str name, not {name!r}")
    names[address(function)] = name
    return function


def kernel_name(function: Any) -> str:
    try:
        addr = address(function)
    except Exception:
        return "kernel@?"
    name = names.get(addr)
    if name is None:  # remembered, so the name is formatted once per function
        name = names[addr] = f"kernel@0x{addr:x}"
    return name


# ---------------------------------------------------------------------------------------------
# Events: pooled, so no event is created per launch once the pool is warm
# ---------------------------------------------------------------------------------------------

_pool: list[Any] = []


def take_event() -> Any:
    """An idle event from the pool, or a new one (hipEventCreate: timing enabled)."""
    try:
        return _pool.pop()
    except IndexError:
        return check("hipEventCreate", lib().hipEventCreate())[1]


def give_event(event: Any) -> None:
    """Back to the pool. Recording it again later is fine even if a record is pending:
    in HIP an event reflects its latest record only."""
    if len(_pool) < POOL_MAX:
        _pool.append(event)
    else:
        check("hipEventDestroy", lib().hipEventDestroy(event))


def record_event(stream_handle: Any) -> Any:
    """Take a pooled event and record it on the stream; raises HipError on failure."""
    event = take_event()
    err = _hip.hipEventRecord(event, stream_handle)[0]
    if err:
        _pool.append(event)
        raise HipError("hipEventRecord", err)
    return event


def event_done(event: Any) -> bool:
    """hipEventQuery: True when complete, False while pending, HipError otherwise."""
    err = _hip.hipEventQuery(event)[0]
    if not err:
        return True
    if err == HIP_ERROR_NOT_READY:
        return False
    raise HipError("hipEventQuery", err)


def wait_events(*events: Any) -> None:
    """Wait until every event is complete, cooperatively: poll hipEventQuery and sleep
    (never hipEventSynchronize, which older hip-python calls without releasing the GIL).
    Bounded by KPROF_RESOLVE_TIMEOUT (default 60 s)."""
    from kprof.plugin import resolve_timeout

    timeout = resolve_timeout(None)
    deadline = time.monotonic() + timeout
    pause = 2e-5
    for ev in events:
        while not event_done(ev):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"HIP events did not complete within {timeout:g} s (KPROF_RESOLVE_TIMEOUT)"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.005)


def elapsed_ns(start: Any, stop: Any) -> int:
    """hipEventElapsedTime in integer nanoseconds (HIP gives float32 milliseconds)."""
    err, ms = _hip.hipEventElapsedTime(start, stop)
    if err == HIP_ERROR_NOT_READY:
        wait_events(start, stop)
        err, ms = _hip.hipEventElapsedTime(start, stop)
    if err:
        raise HipError("hipEventElapsedTime", err)
    return round(float(ms) * 1e6)


def loaded_library() -> str | None:
    """The path of the libamdhip64.so this process loaded (Linux), for ``kprof backends``."""
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            for line in maps:
                if "libamdhip64" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    return None
