"""Automatic capture of PyOpenCL kernel launches and copies while a profile is active.

Where launches and copies end up natively (PyOpenCL 2024-2026):

- ``Kernel.__call__`` (and so every ``pyopencl.array`` operation, reduction and scan) calls
  ``pyopencl._cl.enqueue_nd_range_kernel`` through an attribute lookup at call time; loopy's
  generated code calls ``pyopencl.enqueue_nd_range_kernel``. Both names hold the same native
  function, and neither path calls the other, so patching both counts each launch once.
- ``pyopencl.enqueue_copy`` (used by ``pyopencl.array``'s ``to_device``, ``get``, ``set`` and
  ``copy``) dispatches to ``pyopencl._cl._enqueue_*`` through attribute lookups;
  ``enqueue_fill``/``enqueue_fill_buffer`` end in ``_cl._enqueue_fill_buffer``. No PyOpenCL
  module binds these natives by name early, but ``pyopencl`` re-exports the private ones
  (``pyopencl._enqueue_read_buffer`` ...), so those names are patched too. A wrapper calls the
  native function it replaced, never another wrapper: nothing is recorded twice.

Each wrapper times the native enqueue alone and hands the launch's own event to kprof as both
tokens (``elapsed_time`` reads END − START from it): no marker, no extra enqueue. For copies
that is a plain ``Event`` on the same OpenCL event, never PyOpenCL's ``NannyEvent``, which
holds the host array.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from kprof import plugin as kp
from kprof.plugin import Patcher

from . import observed
from .copy_sizes import COPIES, D2D, P2P, NBytes, p2p_bytes
from .queues import _current, queue_profiles

KERNEL_ENTRY = "enqueue_nd_range_kernel"


def _kernel_name(kernel: Any) -> str:
    """``kernel.function_name``, cached on the kernel: the get_info call is not free."""
    try:
        name = str(kernel.function_name)
    except Exception:
        name = type(kernel).__name__
    try:
        kernel._kprof_name = name
    except AttributeError:
        pass
    return name


# The native signature since PyOpenCL 2021 (the invoker passes all eight positionally).
_NATIVE_SIGNATURE = (
    "global_work_size",
    "local_work_size",
    "global_work_offset",
    "wait_for",
    "g_times_l",
    "allow_empty_ndrange",
)


def _unprofiled(
    rec: Any,
    backend: Any,
    kind: int,
    name: str,
    queue: Any,
    t0: int,
    t1: int,
    ev: Any,
    nbytes: int = -1,
    config: Any = None,
) -> None:
    """A launch on a queue created without profiling: observed on the host as it completes
    (approximate, and never waiting); synchronized and host-timed if the profile asks to
    synchronize (or does not time the device)."""
    if rec.synchronize or not rec.device:
        rec.launch(backend, kind, name, queue, t0, t1, None, None, nbytes, config)
        return
    if type(ev) is _nanny:  # never hold a copy's host array (see copy_wrapper)
        ev = _plain_event(ev.int_ptr)
    rec.launch_observed(
        backend, kind, name, queue, t0, t1, observed.watcher.track(ev, queue, t0), nbytes, config
    )


def _dims(size: Any) -> tuple[Any, ...] | None:
    """A work size as a tuple (PyOpenCL takes any sequence, or None for the local size)."""
    if size is None or type(size) is tuple:
        return size
    try:
        return tuple(size)
    except TypeError:
        return (size,)


def launched_config(global_size: Any, local_size: Any, g_times_l: bool) -> tuple[Any, Any] | None:
    """The configuration of what PyOpenCL enqueued for these arguments, as the dispatch-table
    hook sees it: the global size times the local size with ``g_times_l``; None for an empty
    range (PyOpenCL enqueues a marker then: no kernel ran)."""
    g, loc = _dims(global_size), _dims(local_size)
    if g_times_l and g is not None and loc is not None:
        g = tuple(a * b for a, b in zip(g, loc))
    if g is not None and 0 in g:
        return None
    return (g, loc)


def launch_config(global_size: Any, local_size: Any) -> tuple[Any, Any]:
    """A launch's configuration as kprof keeps it: ``(global size, local size)`` as tuples
    (``launch_config`` in plugin.py makes them text once per profile)."""
    return (_dims(global_size), _dims(local_size))


def _sizes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
    """The global and local sizes of an ``enqueue_nd_range_kernel`` call of an unknown
    signature (after queue and kernel), or None."""
    g = args[0] if args else kwargs.get("global_work_size")
    if g is None:
        return None
    return g, args[1] if len(args) > 1 else kwargs.get("local_work_size")


# pyopencl._cl.NannyEvent and Event.from_int_ptr, bound by install().
_nanny: Any = None
_plain_event: Any = None


def _has_native_signature(fn: Any) -> bool:
    doc = (getattr(fn, "__doc__", None) or "").split("\n", 1)[0]
    names = [part.split(":")[0].split("=")[0].strip() for part in doc.partition("(")[2].split(",")]
    return tuple(names[2:8]) == _NATIVE_SIGNATURE


def quiet(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original``, called so that the dispatch-table hook leaves its enqueues to this capture
    (a thread-local mark in C, ``_clhook.quiet``): a launch is recorded once, with the name and
    size PyOpenCL's arguments give. ``original`` itself where the hook is not built."""
    mod = kp.load_plugin_part("kprof_opencl", "_clhook")
    return original if mod is None else mod.quiet(original)


def kernel_wrapper(original: Callable[..., Any], backend: Any) -> Callable[..., Any]:
    """A replacement for ``enqueue_nd_range_kernel`` that records each launch while profiling.

    Where the native signature is the known one, the wrapper spells it out: taking and passing
    ``*args, **kwargs`` costs ~0.15 µs more per call, inside a profile or not.
    """
    signature_known = _has_native_signature(original)
    native_fn, original = original, quiet(original)
    active = kp.active
    now = kp.now
    KERNEL = kp.KERNEL
    current = _current
    kernel_name = _kernel_name
    profiles = queue_profiles

    unprofiled = _unprofiled

    def record(rec: Any, queue: Any, kernel: Any, t0: int, t1: int, ev: Any, cfg: Any) -> None:
        try:
            name = kernel._kprof_name
        except AttributeError:
            name = kernel_name(kernel)
        current.queue = queue
        try:
            prof = queue._kprof_profiles
        except AttributeError:
            prof = profiles(queue)
        if prof:
            rec.launch(backend, KERNEL, name, queue, t0, t1, ev, ev, -1, cfg)
        else:
            unprofiled(rec, backend, KERNEL, name, queue, t0, t1, ev, -1, cfg)

    if not signature_known:

        def enqueue_nd_range_kernel_any(queue: Any, kernel: Any, *args: Any, **kwargs: Any) -> Any:
            rec = active()
            if rec is None:
                return original(queue, kernel, *args, **kwargs)
            t0 = now()
            ev = original(queue, kernel, *args, **kwargs)
            t1 = now()
            sizes = _sizes(args, kwargs)
            record(rec, queue, kernel, t0, t1, ev, None if sizes is None else launch_config(*sizes))
            return ev

        enqueue_nd_range_kernel_any.__wrapped__ = native_fn  # type: ignore[attr-defined]
        return _compiled(original, enqueue_nd_range_kernel_any, backend)

    def enqueue_nd_range_kernel(
        queue: Any,
        kernel: Any,
        global_work_size: Any,
        local_work_size: Any,
        global_work_offset: Any = None,
        wait_for: Any = None,
        g_times_l: bool = False,
        allow_empty_ndrange: bool = False,
    ) -> Any:
        rec = active()
        if rec is None:
            return original(
                queue,
                kernel,
                global_work_size,
                local_work_size,
                global_work_offset,
                wait_for,
                g_times_l,
                allow_empty_ndrange,
            )
        t0 = now()
        ev = original(
            queue,
            kernel,
            global_work_size,
            local_work_size,
            global_work_offset,
            wait_for,
            g_times_l,
            allow_empty_ndrange,
        )
        t1 = now()
        # Inlined rather than a call to record(): this is the hot path.
        try:
            name = kernel._kprof_name
        except AttributeError:
            name = kernel_name(kernel)
        current.queue = queue
        try:
            prof = queue._kprof_profiles
        except AttributeError:
            prof = profiles(queue)
        # The launch configuration as the call has it (text once per profile: launch_config).
        if g_times_l or allow_empty_ndrange:  # what was enqueued, as the hook records it
            launched = launched_config(global_work_size, local_work_size, g_times_l)
            if launched is None:  # an empty range: a marker, no kernel
                return ev
            cfg = launched
        elif type(global_work_size) is tuple and (
            local_work_size is None or type(local_work_size) is tuple
        ):
            cfg = (global_work_size, local_work_size)
        else:
            cfg = launch_config(global_work_size, local_work_size)
        if prof:
            rec.launch(backend, KERNEL, name, queue, t0, t1, ev, ev, -1, cfg)
        else:
            unprofiled(rec, backend, KERNEL, name, queue, t0, t1, ev, -1, cfg)
        return ev

    enqueue_nd_range_kernel.__wrapped__ = native_fn  # type: ignore[attr-defined]
    return _compiled(original, enqueue_nd_range_kernel, backend)


def _compiled(
    original: Callable[..., Any], wrapper: Callable[..., Any], backend: Any
) -> Callable[..., Any]:
    """The compiled wrapper (``_clnative.Launcher``), where built: it does the wrapper's common
    case in C (a launch in a profile, by position, of a named kernel on a profiling queue) and
    calls ``wrapper`` for everything else; ``wrapper`` itself where it is not built."""
    mod = kp.load_plugin_part("kprof_opencl", "_clnative")
    if mod is None:
        return wrapper
    launcher: Callable[..., Any] = mod.launcher(
        original, wrapper, kp.active, kp.now, _current, backend, kp.KERNEL, kp.launch_capsules()
    )
    return launcher


def copy_wrapper(
    original: Callable[..., Any], backend: Any, name: str, nbytes_of: NBytes, queue_at: int = 0
) -> Callable[..., Any]:
    """A replacement for a native copy or fill that records it (with its byte count)."""
    import pyopencl._cl as _cl

    active = kp.active
    now = kp.now
    COPY = kp.COPY
    current = _current
    profiles = queue_profiles
    nanny = _cl.NannyEvent
    plain_event = _cl.Event.from_int_ptr
    marked = quiet(original)
    # The hook's object for the queue where it names launches itself (hook.canonical): one
    # object per cl_command_queue for the rows and the watcher of queues without profiling.
    hook_mod = kp.load_plugin_part("kprof_opencl", "_clhook")
    canonical = getattr(hook_mod, "canonical", None)

    def enqueue_copy(*args: Any, **kwargs: Any) -> Any:
        rec = active()
        if rec is None:
            return original(*args, **kwargs)
        t0 = now()
        ev = marked(*args, **kwargs)
        t1 = now()
        queue = args[queue_at] if len(args) > queue_at else kwargs["queue"]
        if canonical is not None:
            queue = canonical(queue)
        rest = args[queue_at + 1 :]
        try:
            n = nbytes_of(rest, kwargs)
        except Exception:  # an unusual argument form: keep the row, without its size
            n = -1
        current.queue = queue
        if profiles(queue):
            # A copy's NannyEvent keeps its host array alive until the event is dropped: kprof
            # keeps a plain Event on the same cl_event (retained, ~0.2 µs), so the array goes
            # when the program lets it go (200 reads into fresh 16 MB arrays peaked at 3.3 GB).
            tok = plain_event(ev.int_ptr) if type(ev) is nanny else ev
            rec.launch(backend, COPY, name, queue, t0, t1, tok, tok, n)
        else:
            _unprofiled(rec, backend, COPY, name, queue, t0, t1, ev, n)
        return ev

    enqueue_copy.__name__ = getattr(original, "__name__", "enqueue_copy")
    enqueue_copy.__wrapped__ = original  # type: ignore[attr-defined]
    return enqueue_copy


def patch_targets() -> list[tuple[Any, str]]:
    """Every (module, attribute) that ``install`` replaces on this PyOpenCL."""
    import pyopencl as cl
    import pyopencl._cl as _cl

    names = [KERNEL_ENTRY, *(n for n, _, _ in COPIES), P2P]
    targets = []
    for name in names:
        native = getattr(_cl, name, None)
        if native is None:
            continue
        targets.append((_cl, name))
        # pyopencl re-exports most natives; patch the re-export only where it is the same object
        # (pyopencl.enqueue_fill_buffer, say, is a Python function calling the _cl one).
        if getattr(cl, name, None) is native:
            targets.append((cl, name))
    return targets


#: The wrappers made for one backend, by (native function, compiled parts on): made once, not
#: at every profile's start (they hold nothing of a profile). Another backend object (the
#: registry renewed) starts over.
_made: dict[tuple[Any, bool], Callable[..., Any]] = {}
_made_for: list[Any] = [None]


def install(backend: Any, kernels_hooked: bool = False) -> Patcher:
    """Patch every launch and copy entry point of PyOpenCL; returns the patcher to undo it.
    ``kernels_hooked``: the dispatch-table hook records every kernel launch
    (``hook.records_every_kernel``): the kernel entry is left as it is."""
    global _nanny, _plain_event
    import pyopencl._cl as _cl

    _nanny, _plain_event = _cl.NannyEvent, _cl.Event.from_int_ptr
    if _made_for[0] is not backend:
        _made.clear()
        _made_for[0] = backend
    compiled = kp.compiled_enabled()
    patcher = Patcher()
    makers: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
        KERNEL_ENTRY: lambda f: kernel_wrapper(f, backend),
        P2P: lambda f: copy_wrapper(f, backend, D2D, p2p_bytes, queue_at=1),
    }
    for name, row, nbytes in COPIES:
        makers[name] = (lambda r, nb: lambda f: copy_wrapper(f, backend, r, nb))(row, nbytes)
    wrappers: dict[int, Callable[..., Any]] = {}
    try:
        for owner, name in patch_targets():
            if kernels_hooked and name == KERNEL_ENTRY:
                continue
            original = getattr(owner, name)
            # One wrapper per native function, shared by its names: it calls the native itself.
            wrapper = wrappers.get(id(original))
            if wrapper is None:
                wrapper = _made.get((original, compiled))
                if wrapper is None:
                    wrapper = _made[original, compiled] = makers[name](original)
                wrappers[id(original)] = wrapper
            patcher.patch(owner, name, wrapper)
    except BaseException:
        patcher.restore()
        raise
    return patcher


def remove(patcher: Patcher, conflicts: list[str] | None = None) -> None:
    conflicts = [*(conflicts or []), *patcher.restore()]
    for wrapper in _made.values():  # kept for the next install: without the program's objects
        forget = getattr(wrapper, "forget", None)
        if forget is not None:
            forget()
    if conflicts:
        warnings.warn(
            "kprof: these PyOpenCL functions were replaced by someone else while kprof was "
            f"capturing, so kprof left them as they are: {', '.join(conflicts)}",
            RuntimeWarning,
            stacklevel=3,
        )
