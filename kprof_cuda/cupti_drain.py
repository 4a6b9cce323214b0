"""Rows from the CUPTI reader to kprof's profiles: the drain thread, the profile end's flush,
and the accounting of records lost on the way.

The reader (compiled or pure, ``activity._get_reader``) keeps joined rows; ``Drain.take`` hands
whatever is ready to the core as one ``ActivityColumns`` batch (``kprof.plugin.deliver_columns``),
from the drain thread every ``DRAIN_PERIOD_S`` or sooner, and from the thread that ends a
profile (``flush``).
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kprof import plugin as kp


class Owner(Protocol):
    """What a drain reads of the CUPTI client it drains for (``CuptiActivity`` is one)."""

    cupti: Any  # the loaded library, once the kinds were enabled
    backend: kp.Backend | None

    def clock_name(self) -> str: ...

    def host_shift(self) -> int: ...


#: How often the drain thread takes rows when nothing wakes it, in seconds.
DRAIN_PERIOD_S = 0.05

_DETAIL = "grid ({0}, {1}, {2}) block ({3}, {4}, {5}), device {6}, CUPTI stream {7}"
#: Kernels' launch configuration (``summary(by=("name", "config"))``; copies have none).
_CONFIG = "grid {0}x{1}x{2} block {3}x{4}x{5}"
_CONFIG_COLUMNS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
_DETAIL_COLUMNS = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "device",
    "stream",
)


#: Flushes, and seconds, after the devices finished in which the same launches stay without
#: a record before the end stops waiting for them. CUPTI hands over a finished buffer at the
#: next flush, but may still be writing the records of a long burst: any progress restarts
#: both (a stop here only ever costs rows that would come later than this).
_NO_WORK_FLUSHES = 10
_NO_WORK_S = 0.25


class Drain:
    """Takes one CUPTI client's rows from the process's reader to the running profiles.

    ``owner`` is the client (its ``cupti``, ``backend`` and ``clock_name``); ``queue_for``,
    ``devices`` and ``synchronize`` are as :class:`~kprof_cuda.activity.CuptiActivity`'s.
    """

    def __init__(
        self,
        owner: Owner,
        queue_for: Callable[[int, int, int], Any],
        devices: Callable[[], Iterable[int]] | None,
        synchronize: Callable[[tuple[int, ...]], None] | None,
    ) -> None:
        self._owner = owner
        self._queue_for = queue_for
        self._devices = devices
        self._synchronize = synchronize
        self.reader: Any = None  # the process's reader, once the kinds were enabled
        #: Why the last end could not wait for its devices (None: it could, or had none).
        self.idle_error: str | None = None
        #: Launches the last end found without a record once its devices had finished: they
        #: made no device work (captured into a CUDA graph, an empty graph), not waited for.
        self.no_work = 0
        self.dropped_by_cupti = 0
        self.foreign = 0
        self.dropped_since_start = 0
        self._kprof_seen = 0
        self._take_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Kernel, copy and memset rows handed to the core (records per row: ``CuptiActivity``).
        self.rows_taken = 0
        self._queues: list[Any] = []  # reader's queue index -> the plugin's queue
        self._reader_queues = 0
        #: While MEMORY2 records are read (``CuptiActivity.memory_on``): a device id and
        #: CUPTI's memory kind -> the memory device's label; None: memory rows are dropped.
        self.memory_label: Callable[[int, int], str] | None = None

    def after_fork(self) -> None:
        """In a child made by ``os.fork()``: the drain thread is gone, and its lock may have
        been held by a thread that is not here."""
        self._take_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def reset(self, reader: Any) -> None:
        """The kinds are being enabled with ``reader``: its queue indices start over, and what
        it discarded before is no loss of the profiles starting now."""
        self.reader = reader
        self._queues, self._reader_queues = [], 0
        self.dropped_since_start = 0
        counts = reader.stats()
        self._kprof_seen = counts["discarded_records"] + counts.get("dropped_rows", 0)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="kprof-cupti", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the drain thread (the caller takes what is left)."""
        self._stop.set()
        if self.reader is not None:
            self.reader.wake()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # -- the end of a profile -----------------------------------------------------------------

    def flush(self, scopes: tuple[int, ...], timeout: float) -> int:
        """Flush until every launch of ``scopes`` has its device record, or ``timeout``; returns
        how many are still missing. Stops early when, the devices having finished, CUPTI (or
        kprof's buffer bound) dropped at least as many records as launches are missing: those
        records cannot come, and the report says why."""
        c, r = self._owner.cupti, self.reader
        assert c is not None and r is not None
        deadline = time.monotonic() + timeout
        # A flush without the FORCED flag returns no buffer that holds a record of work still
        # running, and with it the API records of every launch written before: "no launch is
        # waiting" proves nothing until the devices finished the work queued before this end.
        # (On an H200, kernels still running at a profile's end were lost without this wait.)
        # A forced flush would return those records unfinished, so the end waits for the
        # devices instead, on a thread of its own, bounded by the timeout like the rest.
        idle, waited = self._wait_for_devices()
        pause = 1e-4
        settled = stuck = 0
        last_left = -1
        stuck_since = time.monotonic()
        self.no_work = 0
        while True:
            was_idle = idle.is_set()
            c.ActivityFlushAll(0)
            self.take(account=True)
            left: int = r.waiting(scopes)
            # Records dropped can never come, but only once the devices finished is a launch
            # still missing one of them: before, it may be work still running (drops counted
            # since the capture started say nothing about this profile's running kernels).
            # So wait for the devices first, then look once more.
            if left and left <= self.dropped_since_start:
                if was_idle:
                    break
                idle.wait(max(0.0, deadline - time.monotonic()))
                continue
            # A graph launch's node records share its correlation id and CUPTI does not say
            # how many there are: its first row proves nothing. They are all in once the
            # devices its rows ran on finished and a flush after that was drained, so the
            # end also waits for those devices (ones it did not know, or none without CuPy).
            graph = _mask_devices(r.graph_devices(scopes)) - waited
            if was_idle and graph:
                idle, more = self._wait_for_devices(tuple(sorted(graph)))
                waited |= more | graph
                was_idle = False
            # Once idle, a few more flushes: CUPTI completes the last records as it learns
            # that their work is done.
            settled = settled + 1 if was_idle and not left else 0
            # Launches still without a record, the same ones flush after flush, once every
            # device they could have run on finished (it was waited for, without an error):
            # they made no device work (a launch captured into a CUDA graph by stream capture,
            # an empty graph launch), and no record will come. Not waited for the timeout.
            known = bool(waited) and self.idle_error is None
            if was_idle and known and left and left == last_left:
                stuck += 1
            else:
                stuck, stuck_since = 0, time.monotonic()
            last_left = left
            if stuck >= _NO_WORK_FLUSHES and time.monotonic() - stuck_since >= _NO_WORK_S:
                self.no_work, left = left, 0
                break
            if settled >= 3 or time.monotonic() >= deadline:
                break
            time.sleep(pause)  # CUPTI's thread can deliver meanwhile
            pause = min(pause * 2, 0.005)
        self.take(release=scopes)
        r.forget(scopes)
        return left

    def _wait_for_devices(
        self, devices: tuple[int, ...] | None = None
    ) -> tuple[threading.Event, set[int]]:
        """An event set once ``devices`` (default: those named by ``devices()``) finished the
        work queued on them until now (at once when there are none, or waiting failed:
        ``idle_error``), and the devices it waits for."""
        idle = threading.Event()
        if devices is None:
            self.idle_error = None
            devices = tuple(sorted(set(self._devices()))) if self._devices is not None else ()
        sync = self._synchronize
        if not devices or sync is None:
            idle.set()
            return idle, set()

        def wait() -> None:
            try:
                sync(devices)
            except Exception as exc:  # a device error: the flush goes on without the wait
                self.idle_error = f"{type(exc).__name__}: {exc}"
            finally:
                idle.set()

        threading.Thread(target=wait, name="kprof-cupti-idle", daemon=True).start()
        return idle, set(devices)

    def _account_drops(self) -> None:
        """Records lost since the last look (CUPTI's count, reset when read; kprof's discarded
        buffers and rows): counted, and reported to the profiles that were running."""
        c, r = self._owner.cupti, self.reader
        if c is None or r is None:
            return
        n_cupti = c.dropped()
        counts = r.stats()
        n_kprof = counts["discarded_records"] + counts.get("dropped_rows", 0)
        new_kprof = n_kprof - self._kprof_seen
        self._kprof_seen = n_kprof
        n = n_cupti + new_kprof
        if not n:
            return
        self.dropped_by_cupti += n_cupti
        self.dropped_since_start += n
        # The bound the reader was given when the kinds were enabled (activity.MAX_BUFFERS...).
        bound = f"{r.max_buffers} buffers of {r.buffer_size} bytes"
        why = []
        if n_cupti:
            why.append(f"CUPTI dropped {n_cupti} for want of a buffer: {bound} were all in use")
        if new_kprof:
            why.append(
                f"kprof discarded {new_kprof} past its memory bound ({bound} waiting to be read)"
            )
        backend = self._owner.backend
        if backend is not None:
            kp.dropped(backend, n, "; ".join(why))
        warnings.warn(
            f"kprof: {n} CUPTI activity record(s) were lost while the profile ran ("
            + "; ".join(why)
            + "): those kernels and copies are missing",
            RuntimeWarning,
            stacklevel=5,
        )

    # -- taking rows ----------------------------------------------------------------------------

    def _loop(self) -> None:
        r = self.reader
        while not self._stop.is_set() and r is not None:
            r.wait(DRAIN_PERIOD_S)
            if self._stop.is_set():
                break
            try:
                self.take()
            except Exception as exc:  # a bug of kprof's: say it, stop using CUPTI's rows
                backend = self._owner.backend
                if backend is not None:
                    backend.disable(f"reading CUPTI records failed: {type(exc).__name__}: {exc}")
                return

    def take(
        self, final: bool = False, release: tuple[int, ...] | None = None, account: bool = False
    ) -> None:
        """Take every ready row from the reader and hand them to the core as one batch."""
        r = self.reader
        if r is None:
            return
        with self._take_lock:
            cols = r.take(final=final, release=release)
            self.foreign = r.join_foreign()
            if release is not None or final or account:
                self._account_drops()
            backend = self._owner.backend
            if cols is None or backend is None:
                return
            cols = self._memory(cols, backend)
            if cols is None:
                return
            self.rows_taken += len(_ints(cols["kind"]))  # (bytes from the compiled reader)
            names = r.names.values
            queues = r.queues
            for dev, ctx, stream in queues[self._reader_queues :]:
                self._queues.append(self._queue_for(dev, ctx, stream))
            self._reader_queues = len(queues)
            batch = kp.ActivityColumns(
                scope=cols["scope"],
                kind=cols["kind"],
                name=cols["name"],
                names=names,
                queue=cols["queue"],
                queues=self._queues,
                begin=cols["begin"],
                end=cols["end"],
                nbytes=cols["nbytes"],
                launch_begin=cols["launch_begin"],
                launch_end=cols["launch_end"],
                correlation=cols["correlation"],
                detail=(_DETAIL, [cols[c] for c in _DETAIL_COLUMNS]),
                config=(_CONFIG, [cols[c] for c in _CONFIG_COLUMNS]),
                site=cols["site"],
                clock=self._owner.clock_name(),
            )
            # Delivered holding the lock: a flush that finds nothing left to take has then
            # seen every row taken before it reach its profile (not arrive late).
            kp.deliver_columns(backend, batch)

    def _memory(self, cols: dict[str, Any], backend: kp.Backend) -> dict[str, Any] | None:
        """Take the allocation and free rows (kinds 2 and 3: MEMORY2 records) out of a batch
        into the profiles' memory (``kp.deliver_memory``, times on the host clock); the rest
        of the batch, or None when nothing is left."""
        import numpy as np

        kind = _ints(cols["kind"])
        mem = kind >= 2
        if not mem.any():
            return cols
        label = self.memory_label
        if label is not None:
            shift = self._owner.host_shift()
            dev = _ints(cols["device"])[mem].tolist()
            mkind = _ints(cols["name"])[mem].tolist()
            kp.deliver_memory(
                backend,
                _ints(cols["scope"])[mem].tolist(),
                (kind[mem] == 2).astype(np.int64).tolist(),  # 1: an allocation, 0: a free
                [label(d, k) for d, k in zip(dev, mkind)],
                _ints(cols["address"])[mem].tolist(),
                _ints(cols["nbytes"])[mem].tolist(),
                (_ints(cols["begin"])[mem] + shift).tolist(),
                _ints(cols["site"])[mem].tolist(),  # the allocating call's, from the callback
            )
        keep = ~mem
        if not keep.any():
            return None
        return {c: _ints(v)[keep] for c, v in cols.items()}


def _ints(col: Any) -> Any:
    """A column as an int64 numpy array (the compiled reader hands bytes, the pure one arrays)."""
    import numpy as np

    if isinstance(col, (bytes, bytearray, memoryview)):
        return np.frombuffer(col, np.int64)
    return np.asarray(col, np.int64)


def _mask_devices(mask: int) -> set[int]:
    """The device ids of a reader's device bit mask."""
    return {d for d in range(64) if mask >> d & 1}
