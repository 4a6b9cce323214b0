"""kprof's OpenCL backend, on PyOpenCL: the hook implementations.

Tokens are ``pyopencl.Event`` objects: a captured launch's own event (START to END of its
work), or a marker that ``record_timestamp`` enqueues for ``kprof.range``. Importing this
module does not import pyopencl; the hooks import it when they need it.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from kprof import plugin as kp
from kprof.plugin import hookimpl

from . import clock, hook, memory, observed
from .queues import (
    _current,
    device_key,
    device_name,
    platform_title,
    queue_label,
    queue_profiles,
)

# OpenCL constants (Khronos headers).
_START, _END = clock.START, clock.END
_EXECUTION_STATUS = 0x11D3  # CL_EVENT_COMMAND_EXECUTION_STATUS; CL_COMPLETE is 0, errors < 0

# Bound on first use: the cheapest marker call (no Python wrapper around it).
_marker: Any = None


@hookimpl
def describe_backend(backend: kp.Backend) -> kp.BackendInfo:
    try:
        import pyopencl as cl
    except ImportError as exc:
        return kp.BackendInfo(
            status="not installed",
            library="pyopencl",
            timestamps=True,
            detail=f"{exc}; install it with: pip install 'kprof[opencl]' (PyOpenCL and PoCL's CPU device)",
        )
    except Exception as exc:  # a broken install: say so, never raise
        return kp.BackendInfo(
            status=f"error: importing pyopencl failed: {type(exc).__name__}: {exc}",
            library="pyopencl",
            timestamps=True,
        )
    version = getattr(cl, "VERSION_TEXT", None)
    try:
        platforms = cl.get_platforms()
    except Exception as exc:
        return kp.BackendInfo(
            status="no device",
            library="pyopencl",
            library_version=version,
            detail=f"no OpenCL platform ({exc}); pip install pocl-binary-distribution gives a CPU device",
        )
    devices: list[str] = []
    for p in platforms:
        try:
            found = p.get_devices()
        except Exception:  # DEVICE_NOT_FOUND on a platform with no devices
            continue
        devices += [f"{platform_title(p.name)} {device_name(d)}" for d in found]
    if not devices:
        names = ", ".join(p.name for p in platforms)
        return kp.BackendInfo(
            status="no device",
            library="pyopencl",
            library_version=version,
            detail=f"OpenCL platforms ({names}) have no devices",
        )
    capture, detail = _mechanisms()
    return kp.BackendInfo(
        library="pyopencl",
        library_version=version,
        devices=tuple(devices),
        capture=capture,
        capture_detail=detail,
    )


def _mechanisms() -> tuple[str, str]:
    """Which mechanism captures on each platform (``kprof backends``): the dispatch-table hook
    sees C libraries' enqueues too; PyOpenCL's capture alone sees only PyOpenCL's."""
    try:
        platforms = hook.survey()
    except Exception as exc:  # describing is best effort
        return "PyOpenCL's calls", f"hook survey failed: {exc}"
    hooked = [p for p in platforms if p.table is not None]
    what = "PyOpenCL's calls and the ICD dispatch-table hook" if hooked else "PyOpenCL's calls"
    return what, "; ".join(f"{p.title}: {p.why}" for p in platforms)


# -- timestamps ----------------------------------------------------------------------------------


@hookimpl
def record_timestamp(backend: kp.Backend) -> Any:
    global _marker
    q = _current.queue
    if q is None:
        return None
    try:
        profiles = q._kprof_profiles
    except AttributeError:
        profiles = queue_profiles(q)
    if _marker is None:
        import pyopencl._cl as _cl

        _marker = _cl._enqueue_marker_with_wait_list
    if not profiles:
        # No device timestamps: a marker observed as it completes, unless the profile would
        # rather synchronize (then kprof times the range on the host).
        rec = kp.active()
        if rec is None or rec.synchronize:
            return None
        t = kp.now()
        return observed.watcher.track(_marker(q, None), q, t)
    # With no wait list a marker waits for everything enqueued before it on the queue.
    return _marker(q, None)


def _compiled_range_hooks() -> None:
    """kprof's compiled range calls a hook's ``kprof_compiled`` twin where it has one
    (``_clnative.range_hook``: the same answers without a Python frame), and before it the
    timestamp's raw twin (``kprof_raw_stamp``, the hook's ``raw_stamp()``): on the queues
    whose launches the hook records raw, a range's timestamps are raw events in the same
    batch, read with them."""
    mod = kp.load_plugin_part("kprof_opencl", "_clnative")
    if mod is not None:
        for fn, stamp in ((current_queue, False), (record_timestamp, True)):
            fn.kprof_compiled = mod.range_hook(_current, fn, stamp)  # type: ignore[attr-defined]
    clhook = hook.module()
    if clhook is not None:
        record_timestamp.kprof_raw_stamp = clhook.raw_stamp()  # type: ignore[attr-defined]


@hookimpl
def timestamp_done(backend: kp.Backend, token: Any) -> bool:
    # Errors (< 0) count as done: elapsed_time then says what failed rather than waiting.
    return bool(token.get_info(_EXECUTION_STATUS) <= 0)


@hookimpl
def elapsed_time(backend: kp.Backend, start: Any, stop: Any) -> int:
    # get_profiling_info is ~15x cheaper than Event.profile.*; kprof asks only once stop is done.
    try:
        return int(stop.get_profiling_info(_END) - start.get_profiling_info(_START))
    except Exception as exc:
        status = [t.get_info(_EXECUTION_STATUS) for t in (start, stop)]
        raise RuntimeError(
            f"OpenCL gave no profiling times (command status {status}; 0 is "
            f"COMPLETE, negative is a failed command): {exc}"
        ) from exc


@hookimpl
def device_times(backend: kp.Backend, start: Any, stop: Any) -> tuple[int, int]:
    # OpenCL's profiling counters are absolute device-clock times: one call gives both the
    # duration and the placement (two elapsed_time calls would read stop's END twice).
    try:
        return int(start.get_profiling_info(_START)), int(stop.get_profiling_info(_END))
    except Exception as exc:
        status = [t.get_info(_EXECUTION_STATUS) for t in (start, stop)]
        raise RuntimeError(
            f"OpenCL gave no profiling times (command status {status}; 0 is "
            f"COMPLETE, negative is a failed command): {exc}"
        ) from exc


@hookimpl
def device_times_batch(
    backend: kp.Backend, starts: tuple[Any, ...], stops: tuple[Any, ...]
) -> tuple[Any, Any]:
    global _batch
    if _batch is None:
        from .reader import device_times_batch

        _batch = device_times_batch
    return _batch(starts, stops)


#: reader.device_times_batch, imported on first use (it imports ctypes).
_batch: Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, Any]] | None = None


# No release_timestamp: events are not pooled (a capture's event is the user's own), so
# dropping kprof's reference, which the recorder does, is all there is to it.


# -- queues ----------------------------------------------------------------------------------------


@hookimpl
def current_queue(backend: kp.Backend) -> Any:
    if "pyopencl" not in sys.modules:
        return None
    return _current.queue


_compiled_range_hooks()


@hookimpl
def queue_info(backend: kp.Backend, queue: Any) -> kp.QueueInfo:
    device = queue.device
    return kp.QueueInfo(
        device=device_name(device), label=queue_label(queue), device_key=device_key(device)
    )


@hookimpl
def synchronize(backend: kp.Backend, queue: Any) -> None:
    """Wait for the queue's work, at most the profile's ``timeout``: a launch that waits on a
    ``UserEvent`` the program sets later must not hang it (``queue.finish()`` would)."""
    q = queue if queue is not None else _current.queue
    if q is None:
        return
    rec = kp.active()
    if rec is None:
        q.finish()
        return
    global _marker
    if _marker is None:
        import pyopencl._cl as _cl

        _marker = _cl._enqueue_marker_with_wait_list
    done = _marker(q, None)  # completes when everything enqueued before it has
    q.flush()
    deadline = time.monotonic() + rec.timeout
    pause = 1e-5
    while done.get_info(_EXECUTION_STATUS) > 0:
        if time.monotonic() >= deadline:
            warnings.warn(
                f"kprof: gave up waiting for OpenCL {queue_label(q)} after {rec.timeout:g} s "
                f"(profile(timeout=...)); its work is still pending (a launch waiting on an "
                f"event not set yet?), so the host time of this record ends where kprof stopped "
                f"waiting",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        time.sleep(pause)  # releases the GIL: the thread that sets the event keeps running
        pause = min(pause * 2, 0.005)


# -- capture -----------------------------------------------------------------------------------------


@hookimpl
def launch_config(backend: kp.Backend, config: Any) -> str | None:
    """``(global size, local size)`` (``capture.launch_config``) as reports show it:
    ``"global 1024x1024 local 16x16"``; no local size: ``"global 1024x1024"``."""
    if type(config) is not tuple or len(config) != 2:
        return None
    g, loc = config
    text = "global " + "x".join(map(str, g))
    return text if loc is None else f"{text} local {'x'.join(map(str, loc))}"


@hookimpl
def install_capture(backend: kp.Backend) -> None:
    from . import capture, profiled_queues

    # Enqueues from C libraries too (VkFFT, CLBlast), through the ICD's dispatch table; where it
    # records every kernel launch into the compiled recorder, PyOpenCL's too: its kernel entry
    # is then left as it is (one capture path per launch).
    backend.state["hooked"], backend.state["mechanisms"] = hook.install(backend)
    kernels = hook.records_every_kernel(backend.state["hooked"], backend.state.get("survey", []))
    backend.state["kernels_hooked"] = kernels
    backend.state["patcher"] = capture.install(backend, kernels_hooked=kernels)
    # Queues created from now on (through pyopencl.CommandQueue) profile: device times for them.
    profiled_queues.acquire()
    backend.state["queues"] = True
    # The clock offset now, to bound how far it drifts (NTP slews CLOCK_MONOTONIC) by the end.
    backend.state["raw_offset"] = clock.raw_offset()
    # What the watcher has tracked so far: the report counts this capture's observed commands.
    backend.state["observed_from"] = list(observed.watcher.counts)


@hookimpl
def remove_capture(backend: kp.Backend) -> None:
    from . import capture, profiled_queues

    conflicts = profiled_queues.release() if backend.state.pop("queues", False) else []
    conflicts += hook.remove(backend.state.pop("hooked", []))
    backend.state.pop("kernels_hooked", None)
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        capture.remove(patcher, conflicts)
    observed.watcher.retire()  # no thread of kprof's outside a profile
    for fn in (current_queue, record_timestamp):  # nor a queue of the program's kept alive
        compiled = getattr(fn, "kprof_compiled", None)
        if compiled is not None:
            compiled.forget()
    clhook = hook.module()
    if clhook is not None:
        clhook.stamp_forget()


@hookimpl
def memory_install(backend: kp.Backend) -> bool:
    return memory.install(backend)


@hookimpl
def memory_remove(backend: kp.Backend) -> None:
    memory.remove(backend)


@hookimpl
def align_clock(
    backend: kp.Backend, token: Any, launch_window: tuple[int, int]
) -> kp.Alignment | None:
    try:
        return clock.align(token, launch_window, backend.state.get("raw_offset"))
    except Exception:  # no correlation is an answer kprof handles (and reports)
        return None


@hookimpl
def demo_workload(backend: kp.Backend, size: int) -> Any:
    from .demo import workload

    return workload(size)


@hookimpl
def report_notes(backend: kp.Backend) -> list[str] | None:
    # While capture is installed the hook's state is known; a C-launching library imported
    # where no platform is hooked means its kernels ran unseen.
    mechanisms = backend.state.get("mechanisms")
    notes = [hook.unseen(mechanisms) if mechanisms else None]
    stamped0, polled0 = backend.state.get("observed_from", (0, 0))
    stamped, polled = observed.watcher.counts
    # max(): a forked child's watcher counts afresh from 0.
    notes.append(observed.accuracy_note(max(0, stamped - stamped0), max(0, polled - polled0)))
    return [n for n in notes if n] or None


@hookimpl
def capture_modules(backend: kp.Backend) -> list[str]:
    # C libraries that enqueue OpenCL work (VkFFT, CLBlast) come with PyOpenCL in Python.
    return ["pyopencl"]


@hookimpl
def exec_environment(backend: kp.Backend) -> dict[str, str] | None:
    # Where a platform's table cannot be hooked: kprof's interposer, preloaded at exec.
    return hook.exec_environment()
