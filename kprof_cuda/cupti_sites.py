"""Launch sites of CUPTI's rows, through CUPTI's Callback API.

Activity records arrive later, on CUPTI's thread: their Python frames are gone. So, while a
profile that keeps sites (``profile(sites=True)``, ``stacks=``) has a scope entered, kprof
subscribes to the Callback API (``cuptiSubscribe``) and enables the callbacks of the calls
that enqueue work (``cuptiEnableCallback``, the ids of ``cupti_abi.WORK_*``, and of
``MEMORY_*`` while allocations are recorded). At a call's entry, on the launching thread, the
reader's callback (C in ``_cupti_src/sites.c``, ctypes in ``cupti_pure``) calls
``kprof.plugin.launch_site()`` (the thread's active profile walks its frames: the user's line,
or stack) and keeps the raw id by the call's correlation id; the join gives it to the rows
of that call, as it gives them their scope (``cupti_join``).

Cost: nothing while no such profile runs (no callback is enabled). While one runs, threads
with no site scope entered return from the compiled callback without the GIL; a launching
thread takes the GIL (CuPy calls the driver with it released) for the site's walk. A thread
that is no Python thread gets no site.

One subscriber per process (before CUDA 13.3): when another tool holds it (Nsight Systems,
torch.profiler's Kineto), ``cuptiSubscribe`` fails with
``CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED``; the profile goes on without CUPTI's sites,
and ``reason`` says why (``kprof backends``, the report's notes, one warning).
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

from kprof import plugin as kp

from . import cupti_abi as abi
from .cupti_lib import Cupti

__all__ = ["Sites"]


class Sites:
    """The Callback API for one :class:`~kprof_cuda.activity.CuptiActivity`: subscription,
    which callbacks are enabled, and the site scopes entered."""

    def __init__(self) -> None:
        self.cupti: Cupti | None = None
        self.reader: Any = None
        self._handle = 0
        self._lock = threading.Lock()  # CUPTI: a subscriber serializes its enable calls
        self._count = 0  # site scopes entered, process-wide
        self._memory = False
        self._enabled: set[tuple[int, int]] = set()
        self._tls = threading.local()  # per thread: for each scope entered, was it a site one
        #: Why CUPTI's rows get no launch site (None: they do, or none was asked).
        self.reason: str | None = None
        #: A profile asked for sites while ``reason`` held (said in its report's notes).
        self.missed = False
        self._warned = False

    # -- on and off ---------------------------------------------------------------------------------

    def after_fork(self) -> None:
        """In a child made by ``os.fork()``: the lock may have been held by a thread that is
        not here."""
        self._lock = threading.Lock()

    def start(self, cupti: Cupti, reader: Any) -> None:
        """CUPTI's activity path is on (the first profile): nothing subscribed yet."""
        self.cupti, self.reader = cupti, reader
        self.reason = None

    def stop(self) -> None:
        """The last profile ended: callbacks off, unsubscribed (another tool may subscribe)."""
        with self._lock:
            self._enable(set())
            self._count = 0
            c, handle, self._handle = self.cupti, self._handle, 0
            if c is not None and handle and c.Unsubscribe is not None:
                c.Unsubscribe(handle)
            if self.reader is not None and hasattr(self.reader, "set_sites"):
                self.reader.set_sites(None)
        self.reader = None

    def memory(self, on: bool) -> None:
        """Allocating and freeing calls' callbacks too (while memory is recorded)."""
        with self._lock:
            self._memory = on
            if self._count:
                self._enable(self._wanted())

    # -- scopes -------------------------------------------------------------------------------------

    def enter(self) -> None:
        """A scope of the calling thread's active profile was pushed: a site scope when that
        profile keeps sites."""
        rec = kp.active()
        want = rec is not None and rec.sites_on and self.reader is not None
        stack = self._stack()
        if want and not self._subscribed():
            want = False
            self.missed = True
        stack.append(want)
        if not want:
            return
        self.reader.site_scope(1)
        with self._lock:
            self._count += 1
            if self._count == 1:
                self._enable(self._wanted())

    def exit(self) -> None:
        stack = self._stack()
        if not stack or not stack.pop():
            return
        if self.reader is not None:
            self.reader.site_scope(-1)
        with self._lock:
            self._count = max(0, self._count - 1)
            if not self._count:
                self._enable(set())

    def _stack(self) -> list[bool]:
        stack: list[bool] | None = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    # -- CUPTI ------------------------------------------------------------------------------------

    def _subscribed(self) -> bool:
        """Subscribed now (the first site scope subscribes); False with ``reason`` set."""
        if self._handle:
            return True
        if self.reason is not None:
            return False
        c, r = self.cupti, self.reader
        with self._lock:
            if self._handle:
                return True
            if c is None or c.Subscribe is None or c.EnableCallback is None:
                self.reason = "this libcupti has no callback API (cuptiSubscribe)"
            else:
                code, handle = r.subscribe()
                if code == 0 and handle:
                    self._handle = handle
                    r.set_sites(kp.launch_site)
                    return True
                name = c.result_name(code) if code > 0 else "no cuptiSubscribe"
                if code == abi.ERROR_MULTIPLE_SUBSCRIBERS:
                    self.reason = (
                        f"another tool subscribed to CUPTI's callback API first ({name}: "
                        f"Nsight Systems, torch.profiler, ...); run without it to get them, or "
                        f"set profile(sites=False) to stop asking"
                    )
                else:
                    self.reason = f"cuptiSubscribe failed: {name} ({code})"
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"kprof: CUDA kernels, copies and allocations have no launch site: "
                f"{self.reason}; the profile is recorded without them",
                RuntimeWarning,
                stacklevel=6,
            )
        return False

    def _wanted(self) -> set[tuple[int, int]]:
        ids = {(abi.DOMAIN_DRIVER, i) for i in abi.WORK_DRIVER}
        ids |= {(abi.DOMAIN_RUNTIME, i) for i in abi.WORK_RUNTIME}
        if self._memory:
            ids |= {(abi.DOMAIN_DRIVER, i) for i in abi.MEMORY_DRIVER}
            ids |= {(abi.DOMAIN_RUNTIME, i) for i in abi.MEMORY_RUNTIME}
        return ids

    def _enable(self, ids: set[tuple[int, int]]) -> None:
        """Make the enabled callbacks ``ids`` (lock held)."""
        c, handle = self.cupti, self._handle
        if c is None or not handle or c.EnableCallback is None:
            self._enabled.clear()
            return
        for domain, cbid in sorted(self._enabled - ids):
            c.EnableCallback(0, handle, domain, cbid)
        for domain, cbid in sorted(ids - self._enabled):
            c.EnableCallback(1, handle, domain, cbid)
        self._enabled = set(ids)

    def enabled(self) -> int:
        """How many callbacks are enabled now."""
        return len(self._enabled)

    def stats(self) -> dict[str, int]:
        """The reader's callback counts: delivered, Python calls for a site, sites kept."""
        r = self.reader
        return {} if r is None or not hasattr(r, "callback_stats") else r.callback_stats()
