"""Queues created with profiling: ``pyopencl.CommandQueue`` while kprof captures, or for good.

OpenCL cannot switch profiling on for an existing queue, but a queue can be created with it,
as Intel's OpenCL intercept layer does. While capture is installed (and after
:func:`enable_profiling`), the name ``pyopencl.CommandQueue`` is bound to a stand-in class
(:func:`make_factory`) rather than PyOpenCL's class, so that ``cl.CommandQueue(ctx)`` (what programs, PyOpenCL's
examples and ``pyopencl.tools`` call) returns a queue with ``PROFILING_ENABLE`` added.

Why a factory rather than a subclass: PyOpenCL's class ignores a patched ``__init__``
(nanobind calls its cached constructor), its metaclass cannot be subclassed, and a subclass
bound to ``cl.CommandQueue`` would make ``isinstance(queue, cl.CommandQueue)`` false for every
queue created before (``pyopencl.array.Array(queue, ...)`` checks that). The factory returns
PyOpenCL's own ``CommandQueue`` objects (``type(q)`` is unchanged) and answers ``isinstance``
and ``issubclass`` for PyOpenCL's class; class attributes (``from_int_ptr``, ``finish``...)
are PyOpenCL's. A class that subclasses ``cl.CommandQueue`` while the factory is bound
subclasses PyOpenCL's class itself, and its queues keep the properties they are given.

What differs while it is bound: ``cl.CommandQueue`` is not PyOpenCL's class object itself, so
``type(q) is cl.CommandQueue`` is false (``isinstance`` is right).
Only the name looked up at call time is covered: ``from pyopencl import CommandQueue`` done
before capture was installed keeps PyOpenCL's class (its queues are then timed approximately).

The program still sees the properties it asked for: for a queue that got ``PROFILING_ENABLE``
only from kprof, ``queue.properties`` and ``queue.get_info(PROPERTIES)`` (and
``PROPERTIES_ARRAY``) answer without it, so code that branches on the bit behaves as it did.
Every wrapper of such a queue answers so while the object ``cl.CommandQueue`` returned lives;
C code that calls ``clGetCommandQueueInfo`` itself, and queues the dispatch-table hook changed
(made by C or by PyOpenCL's class itself), show the bit.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kprof.plugin import Patcher

# Nothing of kprof is imported at module level: this module is the `kprof.on_import` entry
# point, which `import kprof` may load while the package importing it is still initializing.

PROFILING_ENABLE = 1 << 1  # CL_QUEUE_PROFILING_ENABLE

_QUEUE_PROPERTIES = 0x1093  # CL_QUEUE_PROPERTIES, a key of clCreateCommandQueueWithProperties
_ON_DEVICE = 1 << 2  # CL_QUEUE_ON_DEVICE: device-side queues are left as they are


def with_profiling(properties: Any) -> Any:
    """``properties`` with ``PROFILING_ENABLE`` added, in the form it was given: a bit field
    (an int or a ``command_queue_properties`` value), or OpenCL 2's flat list of
    ``(key, value)`` pairs; anything else (and device-side queues) unchanged."""
    if isinstance(properties, int):
        if properties & _ON_DEVICE:
            return properties
        return properties | PROFILING_ENABLE
    if isinstance(properties, (list, tuple)) and len(properties) % 2 == 0:
        items = list(properties)
        try:
            keys = [int(k) for k in items[0::2]]
            if _QUEUE_PROPERTIES in keys:
                i = 2 * keys.index(_QUEUE_PROPERTIES) + 1
                bits = int(items[i])
                if bits & _ON_DEVICE:
                    return properties
                items[i] = bits | PROFILING_ENABLE
            else:
                items += [_QUEUE_PROPERTIES, PROFILING_ENABLE]
        except (TypeError, ValueError):
            return properties
        return type(properties)(items)
    return properties


def create_profiling_queue(base: type, *args: Any, **kwargs: Any) -> Any:
    """``base(*args, **kwargs)`` with ``PROFILING_ENABLE`` added to its properties.

    Should OpenCL refuse the added flag (every device must support it, but a driver may err),
    the queue is created exactly as asked, and any error is the one the program would get.
    """
    if "properties" in kwargs:
        given = kwargs["properties"]
        new_kwargs = {**kwargs, "properties": with_profiling(given)}
        new_args = args
    elif len(args) >= 3:
        given = args[2]
        new_args = (*args[:2], with_profiling(given), *args[3:])
        new_kwargs = kwargs
    else:
        given = 0  # PyOpenCL's default
        new_args, new_kwargs = args, {**kwargs, "properties": PROFILING_ENABLE}
    if new_args is args and new_kwargs is kwargs:
        return base(*args, **kwargs)
    added = not _asks_profiling(given)
    try:
        queue = base(*new_args, **new_kwargs)
    except Exception:
        pass
    else:
        _remember(base, queue, added)
        return queue
    # Outside the except block: an error is raised as the program would see it, unchained.
    queue = base(*args, **kwargs)
    _remember(base, queue, False)
    return queue


def _asks_profiling(properties: Any) -> bool:
    """Whether ``properties`` (as :func:`with_profiling` takes them) already ask for profiling
    or leave the queue as it is (device-side queues, forms kprof does not change)."""
    try:
        return bool(with_profiling(properties) == properties)
    except Exception:  # a value whose == raises: kprof did not change it either
        return True


# -- what the program asked for: PROPERTIES answered without the bit kprof added ----------------

_INFO_PROPERTIES = 0x1093  # CL_QUEUE_PROPERTIES as a clGetCommandQueueInfo key
_INFO_PROPERTIES_ARRAY = 0x1098  # CL_QUEUE_PROPERTIES_ARRAY (OpenCL 3)

# Handles of live queues whose PROFILING_ENABLE came only from kprof. PyOpenCL's queues take no
# weak references, so the queue object kprof made carries a _Forget that drops its entry when
# the object goes: OpenCL can hand the address to a new queue only after that.
_added: dict[int, int] = {}  # handle -> id() of its _Forget (holding it would keep it alive)
_masked: type | None = None  # PyOpenCL's class while its get_info answers through _get_info
_mask: Patcher | None = None
_original_get_info: Any = None


class _Forget:
    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __del__(self) -> None:
        # This runs wherever the queue is freed, maybe while _lock is held: never wait for it.
        if _added.get(self.handle) == id(self):
            _added.pop(self.handle, None)
        if not _added and _lock.acquire(blocking=False):
            try:
                if not _added:
                    _remove_mask()
            finally:
                _lock.release()


def _remember(base: type, queue: Any, added: bool) -> None:
    from kprof.plugin import load_plugin_part

    try:
        handle = int(queue.int_ptr)
    except Exception:  # not a PyOpenCL queue (a test double): nothing to answer for
        return
    hook = load_plugin_part("kprof_opencl", "_clhook")
    if hook is not None:  # the dispatch-table hook names its launches with this object
        try:
            hook.remember(queue, handle)
        except Exception:  # no __dict__ to carry the mark: the hook makes its own object
            pass
    if not added:
        _added.pop(handle, None)
        return
    forget = _Forget(handle)
    try:
        queue._kprof_forget = forget
    except AttributeError:  # no __dict__ to carry it: the queue shows the bit
        return
    with _lock:
        _added[handle] = id(forget)
        if _masked is None:
            _install_mask(base)


def _install_mask(base: type) -> None:
    """Answer ``get_info`` and ``properties`` of ``base`` through :func:`_get_info`, while a
    queue kprof changed lives (the last one's :class:`_Forget` puts them back). Under _lock."""
    global _masked, _mask, _original_get_info
    from kprof.plugin import Patcher

    mask = Patcher()
    doc = getattr(vars(base).get("properties"), "__doc__", None)
    _original_get_info = mask.patch(base, "get_info", _get_info)
    mask.patch(base, "properties", property(_properties, doc=doc))
    _mask, _masked = mask, base


def _remove_mask() -> None:
    """Under _lock. _original_get_info stays: a bound ``get_info`` taken meanwhile still works."""
    global _masked, _mask
    if _mask is not None:
        _mask.restore()  # a replacement someone made since is left as it is
    _mask, _masked = None, None


def _get_info(queue: Any, param: Any) -> Any:
    value = _original_get_info(queue, param)
    if _added and param in (_INFO_PROPERTIES, _INFO_PROPERTIES_ARRAY) and queue.int_ptr in _added:
        return _without_profiling(param, value)
    return value


def _properties(queue: Any) -> Any:
    return _get_info(queue, _INFO_PROPERTIES)


def _without_profiling(param: Any, value: Any) -> Any:
    if param == _INFO_PROPERTIES:
        return type(value)(value & ~PROFILING_ENABLE)
    items = list(value)  # (key, value) pairs ending in 0
    for i in range(0, len(items) - 1, 2):
        if items[i] == _QUEUE_PROPERTIES:
            items[i + 1] &= ~PROFILING_ENABLE
    return type(value)(items)


def real_properties(queue: Any) -> Any:
    """``queue.properties`` as OpenCL has them, ``PROFILING_ENABLE`` included where kprof added it."""
    original, masked = _original_get_info, _masked
    if masked is not None and isinstance(queue, masked):
        return original(queue, _INFO_PROPERTIES)
    return queue.properties


class _FactoryMeta(type):
    """Makes the factory class stand for PyOpenCL's ``CommandQueue`` (see the module doc)."""

    _base: type

    def __new__(mcls, name: str, bases: tuple[Any, ...], ns: dict[str, Any], **kw: Any) -> Any:
        # Only class statements deriving from a factory get here (make_factory calls
        # type.__new__): ``class MyQueue(cl.CommandQueue)`` while the factory is bound becomes
        # a subclass of PyOpenCL's class itself (nothing can derive from the factory and be a
        # real queue).
        real = tuple(b._base if isinstance(b, _FactoryMeta) else b for b in bases)
        return type(real[0])(name, real, ns, **kw)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return create_profiling_queue(cls._base, *args, **kwargs)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._base)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, cls._base)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls._base, name)

    def __setattr__(cls, name: str, value: Any) -> None:
        # Code that adds methods to the class (as PyOpenCL's _monkeypatch does) reaches the real one.
        setattr(cls._base, name, value)

    def __delattr__(cls, name: str) -> None:
        delattr(cls._base, name)

    def __repr__(cls) -> str:
        return (
            f"<class {cls._base.__module__}.{cls._base.__qualname__} (kprof adds PROFILING_ENABLE)>"
        )


def make_factory(base: type) -> type:
    """A stand-in for ``base`` (PyOpenCL's ``CommandQueue``) that creates profiling queues."""
    ns = {"__doc__": base.__doc__, "__module__": base.__module__, "__qualname__": base.__qualname__}
    factory = type.__new__(_FactoryMeta, base.__name__, (), ns)
    type.__setattr__(factory, "_base", base)
    return factory


# -- binding the factory: capture installs it, enable_profiling() keeps it -----------------------

_lock = threading.Lock()
_users = 0
_patcher: Patcher | None = None
_enabled = False
_declined = False  # disable_profiling() was called: on_import() leaves it off


def acquire() -> None:
    """Bind ``pyopencl.CommandQueue`` to the factory (counted: the last ``release`` unbinds)."""
    global _users, _patcher
    import pyopencl as cl

    from kprof.plugin import Patcher

    with _lock:
        _users += 1
        if _patcher is not None:
            return
        current = cl.CommandQueue
        if isinstance(current, _FactoryMeta):  # someone's earlier copy: leave it
            return
        patcher = Patcher()
        patcher.patch(cl, "CommandQueue", make_factory(current))
        _patcher = patcher


def release() -> list[str]:
    """Undo one ``acquire``; returns names someone else replaced meanwhile (left as they are)."""
    global _users, _patcher
    with _lock:
        _users = max(0, _users - 1)
        if _users or _patcher is None:
            return []
        patcher, _patcher = _patcher, None
        return patcher.restore()


def enable_profiling() -> None:
    """Create every later ``pyopencl.CommandQueue`` with ``PROFILING_ENABLE``, profile or not.

    kprof reads exact device times only from queues created with profiling, so this is on by
    default: from the moment both kprof and PyOpenCL are imported, in either order (the
    ``kprof.on_import`` entry point :func:`on_import`). Call it again after
    :func:`disable_profiling` (idempotent). Queues made this way are PyOpenCL's own objects;
    on PoCL a profiling queue costs a tiny unprofiled launch nothing beyond the machine's
    wall-time spread, and 1 to 6 % more CPU (BENCHMARKS.md); only queues created after the call
    are affected.
    """
    global _enabled, _declined
    with _lock:
        _declined = False
        if _enabled:
            return
        _enabled = True
    acquire()


def disable_profiling() -> None:
    """Stop adding ``PROFILING_ENABLE`` outside profiles (queues already created keep their
    properties); before PyOpenCL is imported, it keeps :func:`on_import` from turning it on.
    Queues created later, outside a profile, are timed approximately inside one (``~``)."""
    global _enabled, _declined
    with _lock:
        _declined = True
        if not _enabled:
            return
        _enabled = False
    release()


def on_import() -> None:
    """The ``kprof.on_import`` entry point for ``pyopencl``: :func:`enable_profiling` once
    kprof and PyOpenCL are both imported, unless the program called :func:`disable_profiling`."""
    if not _declined:
        enable_profiling()


def declined() -> bool:
    """Whether the program called :func:`disable_profiling` (and not ``enable_profiling`` since)."""
    return _declined


def profiling_enabled() -> bool:
    """Whether ``pyopencl.CommandQueue`` now creates profiling queues."""
    return _patcher is not None
