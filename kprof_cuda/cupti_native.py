"""The compiled CUPTI reader (``kprof_cuda._cupti``), behind the same interface as
:class:`kprof_cuda.cupti_pure.PureReader`: C callbacks, decoding and the join in C, rows
taken by Python as whole columns (see ``_cupti_src/module.c``)."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from kprof import plugin as kp

from . import cupti_abi as abi
from .cupti_layout import MAX_LAUNCHES, ROW_COLUMNS, SIGNATURE
from .cupti_lib import Cupti
from .cupti_records import Interner

__all__ = ["NativeReader", "compiled_reader"]


def compiled_reader() -> ModuleType | None:
    """The compiled reader module, or None where kprof runs pure Python, it is not built, or
    it was built from another ``cupti_layout`` (its ``LAYOUT``: a stale build after the
    formats changed; rebuild with ``pip install -e .``): the pure-Python reader runs then."""
    mod = kp.load_plugin_part("kprof_cuda", "_cupti")
    if mod is None or getattr(mod, "LAYOUT", None) != SIGNATURE:
        return None
    return mod


class NativeReader:
    compiled = True

    def __init__(self, mod: ModuleType, cupti: Cupti) -> None:
        self.mod = mod
        self.cupti = cupti
        self.buffer_size = 1 << 20
        self.max_buffers = 64
        self.max_rows = 1 << 20
        self.max_launches = MAX_LAUNCHES  # live launches kept (the oldest eighth go past it)
        self.refuse_ok = cupti.api_version >= abi.REFUSE_BUFFERS_FROM_API
        self.names = Interner()
        self.queues: list[tuple[int, int, int]] = []
        self.timestamp_callback = False
        self.time_base = 0
        mod.configure(
            (
                cupti.address("cuptiActivityGetNextRecord"),
                cupti.address("cuptiActivityRegisterCallbacks"),
                cupti.address("cuptiActivityRegisterTimestampCallback"),
                cupti.address("cuptiSubscribe"),
            ),
            abi.layout(),
            sorted(abi.WORK_DRIVER),
            sorted(abi.WORK_RUNTIME),
            sorted(abi.SEVERAL_DRIVER),
            sorted(abi.SEVERAL_RUNTIME),
            sorted(abi.MEMORY_DRIVER),
            sorted(abi.MEMORY_RUNTIME),
            abi.EXT_KIND_CUSTOM2,
        )

    def after_fork(self) -> None:
        """In a child made by ``os.fork()``: the C reader's lock is reset by its own fork
        handler (``_cupti_src/module.c``); nothing here."""

    def register(self) -> None:
        """kprof's callbacks, registered at every capture's start: CUPTI keeps one set per
        process, and another tool (torch.profiler's Kineto registers at every trace) may have
        replaced kprof's since the last capture."""
        self.cupti.check(self.mod.register(), "cuptiActivityRegisterCallbacks")
        # CUPTI's records on the host's monotonic clock; a CUPTI without the callback keeps
        # its own clock, calibrated (Profile.clocks says which). Checked, not assumed: only
        # the clock CUPTI actually reads is given that label.
        self.timestamp_callback = self.mod.register_timestamp() == 0 and self.on_host_clock()
        # Without the callback CUPTI keeps its default clock (CLOCK_REALTIME), beyond kprof's
        # value limit: timestamps are handed relative to this base (cupti_clock adds it back).
        self.restart_clock()

    def on_host_clock(self) -> bool:
        """Whether CUPTI's timestamps are the host's monotonic clock now (kprof's callback, not
        another tool's): cuptiGetTimestamp read between two readings of that clock."""
        before = time.monotonic_ns()
        t = self.cupti.timestamp()
        return before - 1_000_000 <= t <= time.monotonic_ns() + 1_000_000

    def restart_clock(self) -> None:
        """The first profile starts: timestamps are handed relative to CUPTI's clock now
        (unless they are on the host clock already)."""
        self.time_base = 0 if self.timestamp_callback else self.cupti.timestamp()

    def apply_limits(self) -> None:
        """Hand the limits set on this object to the C reader now (else at the next take)."""
        self._limits()

    def _limits(self) -> None:
        self.mod.set_limits(
            self.buffer_size, self.max_buffers, self.max_rows, self.refuse_ok, self.max_launches
        )

    def wait(self, timeout: float) -> None:
        self._limits()
        self.mod.wait(timeout)

    def wake(self) -> None:
        self.mod.wake()

    def take(
        self, final: bool = False, release: tuple[int, ...] | None = None
    ) -> dict[str, Any] | None:
        self._limits()
        cols, names, queues = self.mod.take(final, release)
        self.names.extend(names)
        self.queues.extend(queues)
        if not cols[0]:
            return None
        out = dict(zip(ROW_COLUMNS, cols))
        if self.time_base:
            import numpy as np

            from .cupti_join import TIME_COLUMNS, rebase

            times = {c: np.frombuffer(out[c], np.int64) for c in TIME_COLUMNS}
            rebase(times, self.time_base)
            out.update({c: times[c].tobytes() for c in TIME_COLUMNS})
        return out

    # -- the callback API: launch sites (_cupti_src/sites.c's on_callback) ----------------------

    def subscribe(self) -> tuple[int, int]:
        """``cuptiSubscribe`` with the C callback: (CUptiResult, handle)."""
        code, handle = self.mod.subscribe()
        return int(code), int(handle)

    def set_sites(self, fn: Any) -> None:
        """The launch-site function (``kp.launch_site``), or None: off. The C callback calls
        the active profile's compiled catcher itself (``Recorder.launch_site``, no Python
        frame in between), ``fn`` for any other."""
        self.mod.set_sites(fn, None if fn is None else kp.active)

    def site_scope(self, delta: int) -> int:
        return int(self.mod.site_scope(delta))

    def callback_stats(self) -> dict[str, int]:
        return dict(self.mod.callback_stats())

    def waiting(self, scopes: tuple[int, ...]) -> int:
        return int(self.mod.waiting(scopes))

    def graph_devices(self, scopes: tuple[int, ...]) -> int:
        return int(self.mod.graph_devices(scopes))

    def forget(self, scopes: tuple[int, ...]) -> None:
        self.mod.forget(scopes)

    def join_foreign(self) -> int:
        return int(self.mod.stats()["foreign"])

    def stats(self) -> dict[str, int]:
        s = dict(self.mod.stats())
        s["discarded_records"] = 0
        return s

    def reset(self) -> None:
        self.mod.reset()
        self.queues.clear()
