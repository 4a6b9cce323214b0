"""Reading a profile's device tokens: each device's reference token (the first seen there,
which every other token on the device is placed from), waiting for work up to a deadline, a
device that let one pass, and giving tokens back (deferred while the end resolves)."""

from __future__ import annotations

import queue
import threading
import warnings
from typing import TYPE_CHECKING, Any

from kprof_core import _clock
from kprof_core.host.backend import Backend, BadReturn

if TYPE_CHECKING:
    from kprof_core.recording.problems import Problems

#: Past the end's deadline, tokens are still given back until the releases made there took
#: this fraction of the timeout (see ``release_deferred``).
RELEASE_GRACE = 0.1


class Waiter:
    """A daemon thread that makes hook calls which may block for good (a read of a backend
    that cannot tell whether its work is done), so that the harvest stops waiting at its
    deadline. A call that never returns leaves the thread ``stuck``: a new one is made."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.stuck = False
        threading.Thread(target=self._run, name="kprof resolve", daemon=True).start()

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, args, box, done = item
            try:
                fn(*args)
                box.append(None)
            except BaseException as exc:  # handed to the caller, raised there
                box.append(exc)
            done.set()

    def call(self, fn: Any, args: tuple[Any, ...], timeout: float) -> bool:
        """Call ``fn(*args)``; whether it returned within ``timeout`` seconds (what it raised
        is raised here)."""
        box: list[BaseException | None] = []
        done = threading.Event()
        self._calls.put((fn, args, box, done))
        if not done.wait(max(0.0, timeout)):
            self.stuck = True
            return False
        if box[0] is not None:
            raise box[0]
        return True

    def close(self) -> None:
        if not self.stuck:
            self._calls.put(None)


def elapsed(backend: Backend, start: Any, stop: Any) -> int:
    """``elapsed_time``, its return checked."""
    ns = backend.elapsed_time(backend, start, stop)
    if type(ns) is not int:
        if isinstance(ns, bool) or not hasattr(ns, "__index__"):
            raise BadReturn(
                f"elapsed_time returned {type(ns).__name__} {ns!r}, expected int nanoseconds"
            )
        ns = int(ns)
    return ns


def device_times(backend: Backend, start: Any, stop: Any) -> tuple[int, int]:
    """``device_times``, its return checked."""
    pair = backend.device_times(backend, start, stop)
    if (
        type(pair) is not tuple
        or len(pair) != 2
        or type(pair[0]) is not int
        or type(pair[1]) is not int
    ):
        raise BadReturn(f"device_times returned {pair!r}, expected a pair of int nanoseconds")
    return pair


class Tokens:
    """The tokens of one profile's pending work: references per device, waits, releases."""

    def __init__(self, timeout: float, problems: Problems) -> None:
        self.timeout = timeout
        self.problems = problems
        # Per device key: the first token seen there (kept alive), its launch window, and the
        # backend; every other token on the device is placed by elapsed_time from it.
        self.refs: dict[str, tuple[Backend, Any, int, int]] = {}
        # Per device key, for backends with device_times: when the reference token's work began.
        self.ref_begin: dict[str, int] = {}
        self.ref_tokens: set[int] = set()
        #: Device key -> why its work is no longer waited for: it let a deadline pass (a hung
        #: device costs one timeout, then back-pressure and the end stop waiting on it).
        self.stuck: dict[str, str] = {}
        self.waiter: Waiter | None = None
        #: While the end resolves: tokens to give back afterwards (``release_deferred``), so
        #: that slow ``release_timestamp`` calls do not eat the time left for resolving.
        self.deferred: list[tuple[Backend, Any]] | None = None

    def set_reference(self, dkey: str, backend: Backend, start: Any, h0: int, h1: int) -> None:
        """``start`` is the first token resolved on device ``dkey``: kept until the end."""
        self.refs[dkey] = (backend, start, h0, h1)
        self.ref_tokens.add(id(start))

    def release(self, backend: Backend, start: Any, stop: Any) -> None:
        """Give tokens back once (``start`` may be ``stop``); reference tokens stay for now.
        While the end resolves, they are given back afterwards (``release_deferred``)."""
        refs = self.ref_tokens
        deferred = self.deferred
        for tok in (start, stop) if stop is not start else (start,):
            if tok is None or id(tok) in refs:
                continue
            if deferred is not None:
                deferred.append((backend, tok))
                continue
            try:
                backend.release_timestamp(backend, tok)
            except Exception as exc:
                self.problems.hook_failed(backend, "release_timestamp", exc)

    def release_deferred(self, deadline: float | None) -> None:
        """Give back the tokens ``release`` deferred while the end resolved. Releases are
        normally quick (µs), and every token is given back even when resolving used the whole
        timeout; but past the deadline, once the releases made there took ``RELEASE_GRACE`` of
        the timeout in all, the rest are left to the plugin (the garbage collector), said
        once: a slow ``release_timestamp`` cannot stretch the end past its bound."""
        deferred, self.deferred = self.deferred or [], None
        clock = _clock.monotonic
        budget = None if deadline is None else deadline + RELEASE_GRACE * self.timeout
        for i, (backend, tok) in enumerate(deferred):
            if budget is not None and clock() >= budget:
                self.problems.unreleased += len(deferred) - i
                warnings.warn(
                    f"kprof: {len(deferred) - i} timestamp(s) were not given back "
                    f"(release_timestamp was slow past the resolve timeout of "
                    f"{self.timeout:g} s); they are left to the plugin",
                    RuntimeWarning,
                    stacklevel=4,
                )
                return
            try:
                backend.release_timestamp(backend, tok)
            except Exception as exc:
                self.problems.hook_failed(backend, "release_timestamp", exc)

    def wait(self, backend: Backend, token: Any, deadline: float) -> str | None:
        """Poll until the token is done, sleeping a little more each time; None when done.

        ``deadline`` is shared by a whole harvest: a device that stopped making progress costs
        one timeout in all, not one per pending entry.
        """
        pause = 1e-5
        while not backend.timestamp_done(backend, token):
            if _clock.monotonic() >= deadline:
                return self.timeout_reason()
            _clock.sleep(pause)  # releases the GIL: other threads keep running
            pause = min(pause * 2, 0.005)
        return None

    def read_in_time(self, backend: Backend, start: Any, stop: Any, deadline: float) -> bool:
        """Whether a read of tokens whose backend cannot tell if they are done
        (``timestamp_done`` returns None) returned by ``deadline``. ``device_times`` or
        ``elapsed_time`` then wait for the device themselves, so the read is made in the
        waiter thread. When it did not return, the call goes on in its thread and its tokens
        are not given back (being still in use). What it raised is raised here."""
        if self.waiter is None or self.waiter.stuck:
            self.waiter = Waiter()
        read = device_times if backend.has_device_times else elapsed
        return self.waiter.call(read, (backend, start, stop), deadline - _clock.monotonic())

    def timeout_reason(self, hook: str | None = None) -> str:
        what = f"{hook} did not return" if hook else "the device did not reach the timestamp"
        return (
            f"{what} within {self.timeout:g} s "
            f"(set profile(timeout=...) or KPROF_RESOLVE_TIMEOUT to wait longer)"
        )

    def stuck_reason(self, hook: str | None = None) -> str:
        return (
            f"{self.timeout_reason(hook)}; the device was not waited for again, having let "
            f"earlier work pass a deadline"
        )

    def end(self) -> None:
        """The profile's end: the reference tokens given back, the waiter thread let go."""
        for backend, tok, _h0, _h1 in self.refs.values():
            self.ref_tokens.discard(id(tok))
            self.release(backend, tok, None)
        self.refs.clear()
        if self.waiter is not None:
            self.waiter.close()
