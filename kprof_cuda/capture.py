"""Automatic capture of CuPy's host-device copies, through the Python-level names that make them.

CuPy has no launch hook, and its kernel types (``RawKernel``, ``ElementwiseKernel``, ``ufunc``,
``ReductionKernel``) are immutable Cython types whose calls reach ``cuLaunchKernel`` through
C-level ``cimport``s: nothing there can be patched. What *can* be replaced without changing
CuPy's behaviour:

- ``cupy.ndarray`` is a plain Python subclass of the Cython ``_ndarray_base``, so ``get`` and
  ``set`` can be overridden on it. Both are ``cpdef`` methods, and Cython dispatches to a
  Python override even when CuPy calls them from its own Cython code, so ``cupy.asnumpy``,
  ``ndarray.tolist()`` and the like are caught too. The wrapper calls the very same method.
- ``cupy.asarray`` and ``cupy.array`` are Python functions looked up on the ``cupy`` module at
  call time; a call whose source is a ``numpy.ndarray`` is a host-to-device copy.

Each copy is timed by pooled events recorded on the stream the copy uses, around the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kprof import plugin as kp
from kprof.plugin import Patcher

__all__ = ["D2H", "H2D", "install"]

H2D = kp.RowNames.HOST_TO_DEVICE
D2H = kp.RowNames.DEVICE_TO_HOST


def _stream_arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int) -> Any:
    """The ``stream`` argument at position ``i`` (after ``self``), or None for the current one."""
    return args[i] if len(args) > i else kwargs.get("stream")


def install(timed: Callable[..., Any], backend: Any, cupy_mod: Any, host_array: type) -> Patcher:
    """Patch ``cupy_mod``'s copy entry points to time each copy with ``timed`` (the plugin's
    ``timed_copy``); return the patcher that undoes it."""
    patcher = Patcher()
    active = kp.active
    nd = getattr(cupy_mod, "ndarray", None)
    if (
        isinstance(nd, type)
        and callable(getattr(nd, "get", None))
        and callable(getattr(nd, "set", None))
    ):
        _patch_ndarray(patcher, nd, backend, active, timed)
    _patch_host_functions(patcher, cupy_mod, backend, active, timed, host_array)
    return patcher


def _patch_ndarray(patcher: Patcher, nd: Any, backend: Any, active: Any, timed: Any) -> None:
    get = nd.get

    def ndarray_get(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return get(self, *args, **kwargs)
        return timed(
            backend, rec, D2H, _stream_arg(args, kwargs, 0), self.nbytes, get, (self, *args), kwargs
        )

    set_ = nd.set

    def ndarray_set(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return set_(self, *args, **kwargs)
        return timed(
            backend,
            rec,
            H2D,
            _stream_arg(args, kwargs, 1),
            self.nbytes,
            set_,
            (self, *args),
            kwargs,
        )

    for attr, fn in (("get", ndarray_get), ("set", ndarray_set)):
        fn.__name__ = fn.__qualname__ = attr
        fn.__doc__ = getattr(nd, attr).__doc__
        _try_patch(patcher, nd, attr, fn)


def _try_patch(patcher: Patcher, owner: Any, attr: str, replacement: Any) -> None:
    """Patch if the owner lets us (a CuPy whose ``ndarray`` became an immutable type would
    not): such a copy is then just not captured, and nothing else changes."""
    try:
        patcher.patch(owner, attr, replacement)
    except (TypeError, AttributeError):
        pass


def _patch_host_functions(
    patcher: Patcher, cupy_mod: Any, backend: Any, active: Any, timed: Any, host_array: type
) -> None:
    def from_host(original: Callable[..., Any], source: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = active()
            if rec is None or backend.broken is not None:
                return original(*args, **kwargs)
            obj = args[0] if args else kwargs.get(source)
            if not isinstance(obj, host_array):  # device data, lists, ...: not a plain copy
                return original(*args, **kwargs)
            return timed(backend, rec, H2D, None, -1, original, args, kwargs)

        wrapper.__name__ = wrapper.__qualname__ = original.__name__
        wrapper.__doc__ = original.__doc__
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    for attr, source in (("asarray", "a"), ("array", "obj")):
        original = getattr(cupy_mod, attr, None)
        if callable(original):
            _try_patch(patcher, cupy_mod, attr, from_host(original, source))
