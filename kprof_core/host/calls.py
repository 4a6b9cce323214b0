"""A call into a plugin bounded in time: run on a thread of its own, waited for at most the
discovery timeout, so that a wedged driver in ``describe_backend`` or ``install_capture``
cannot hang ``kprof backends``, a profile's start, or the program's ``import`` that starts a
backend.

A call made while the calling thread imports a module (a backend started by the program's
import of its vendor library) holds that import's module locks: a plugin that imports one of
those modules on its thread would wait for them until the bound. Such a wait is seen within
one poll and ends the call at once (``InImport``) instead of costing the whole bound.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

#: Seconds between looks at a call that has not answered yet, for an import it waits on.
POLL_S = 0.02
#: The frame of importlib that holds a module's import lock (``_find_and_load(name, ...)``),
#: the same from Python 3.4 on.
_LOADING_FRAME = "_find_and_load"


class NoAnswer(Exception):
    """A call did not return in time (it goes on in its thread, ignored)."""


class InImport(Exception):
    """A call waits on a module that the calling thread is importing: it cannot go on until
    that import ends, which is after the call returns. ``module`` is the module's name."""

    def __init__(self, module: str) -> None:
        super().__init__(module)
        self.module = module


class PluginRaised(Exception):
    """A plugin raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def bounded(
    fn: Callable[[], T],
    timeout: float | None,
    what: str,
    late: Callable[[bool, Any], None] | None = None,
) -> T:
    """``fn()``, run in a daemon thread and waited for at most ``timeout`` seconds (``None``:
    called on this thread, unbounded).

    Raises ``NoAnswer`` when it did not return in time, ``InImport`` when it waits on a module
    this thread is importing, and what ``fn`` raised otherwise, a ``BaseException``
    (``SystemExit`` from a plugin's import) as a ``PluginRaised``: a plugin can neither hang
    nor exit the process that calls it. A call given up on (either way, or because the wait
    itself was interrupted) keeps its thread, a daemon, and whatever it holds; if it ends
    after all, ``late(ok, value)`` is called once with its outcome (to undo what it did): on
    its thread, or at once where it had just ended as the wait was interrupted.
    """
    if timeout is None:
        try:
            return fn()
        except Exception:
            raise
        except BaseException as exc:
            raise PluginRaised(exc) from exc
    lock = threading.Lock()
    box: list[tuple[bool, Any]] = []
    gave_up: list[bool] = []

    def run() -> None:
        try:
            outcome: tuple[bool, Any] = (True, fn())
        except BaseException as exc:  # SystemExit, KeyboardInterrupt raised by the plugin
            outcome = (False, exc)
        with lock:
            box.append(outcome)
            abandoned = bool(gave_up)
        if abandoned and late is not None:
            late(*outcome)

    t = threading.Thread(target=run, name=f"kprof: {what}", daemon=True)
    held = _importing_here()
    try:
        t.start()
        _wait(t, timeout, held)
    except (NoAnswer, InImport):
        with lock:
            if not box:
                gave_up.append(True)
                raise
        # It answered just as the wait gave up: as if in time.
    except BaseException:  # the wait interrupted (Ctrl-C): the call is given up on
        with lock:
            ended = bool(box)
            if not ended:
                gave_up.append(True)
        if ended and late is not None:  # it had just ended: its outcome is late all the same
            late(*box[0])
        raise
    ok, value = box[0]
    if ok:
        return cast("T", value)  # fn's result, through the thread's box
    if isinstance(value, Exception):
        raise value
    raise PluginRaised(value) from value


def _wait(t: threading.Thread, timeout: float, held: frozenset[str]) -> None:
    """Until ``t`` ends; ``NoAnswer`` after ``timeout``; ``InImport`` once it waits on one of
    the modules ``held`` (those this thread is importing)."""
    if not held:
        t.join(timeout)
        if t.is_alive():
            raise NoAnswer(f"did not answer in {timeout:g} s")
        return
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        t.join(min(POLL_S, max(left, 0.0)))
        if not t.is_alive():
            return
        waits = _waits_on(t, held)
        if waits is not None:
            raise InImport(waits)
        if left <= 0:
            raise NoAnswer(f"did not answer in {timeout:g} s")


def _importing_here() -> frozenset[str]:
    """The modules whose import lock this thread holds: those importlib is loading on it."""
    names = set()
    frame = sys._getframe(1)
    while frame is not None:
        name = _loading(frame)
        if name is not None:
            names.add(name)
        frame = frame.f_back  # type: ignore[assignment]  # None ends the walk
    return frozenset(names)


def _waits_on(t: threading.Thread, held: frozenset[str]) -> str | None:
    """The module of ``held`` that thread ``t`` is waiting to import, if any: it is in
    importlib's loading frame for it, and the module is not there complete (then importlib
    takes the module's lock, which this thread holds)."""
    frame = sys._current_frames().get(t.ident or 0)
    while frame is not None:
        name = _loading(frame)
        if name is not None and name in held and not _complete(name):
            return name
        frame = frame.f_back
    return None


def _loading(frame: Any) -> str | None:
    code = frame.f_code
    if code.co_name != _LOADING_FRAME or not code.co_filename.startswith("<frozen importlib"):
        return None
    name = frame.f_locals.get("name")
    return name if isinstance(name, str) else None


def _complete(name: str) -> bool:
    """Whether importing ``name`` would return at once (importlib's fast path): imported,
    and not initializing."""
    module = sys.modules.get(name)
    if module is None:
        return False
    return not getattr(getattr(module, "__spec__", None), "_initializing", False)


__all__ = ["POLL_S", "InImport", "NoAnswer", "PluginRaised", "bounded"]
