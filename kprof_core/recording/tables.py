"""The record tables one profile's harvest fills, with the interners their id columns index
(names, queues, threads, launch configurations) and the per-row errors and details.

Entries refer to a backend by slot and to a queue by ``id()``: ``decode`` turns them back, and
the queues stay alive (``live_queues``) until the profile ends, so that no other queue can take
an id meanwhile.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kprof_core.data.records import (
    Details,
    DeviceTable,
    HostTable,
    Interner,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.host.backend import Backend, QueueInfo, checked_queue_info
from kprof_core.recording.configs import Configs
from kprof_core.recording.threads import thread_names

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kprof_core.recording.problems import Problems
    from kprof_core.recording.work_ranges import WorkRange

HOST_QUEUE = QueueRecord("host", "host", "host", "host")


class Tables:
    """The device and host tables, and everything their columns index.

    Only the thread holding the harvest's lock changes them."""

    def __init__(self, backends: Sequence[Backend], problems: Problems) -> None:
        self.problems = problems
        self.by_slot = {b.slot: b for b in backends}
        self.table = DeviceTable()
        self.host = HostTable()
        self.names = Interner()
        self.configs = Configs()  # launch configurations, per backend (configs.py)
        self.queues: list[QueueRecord] = []
        self.queue_index: dict[QueueRecord, int] = {}
        # id(queue) -> queue, for every queue an entry refers to (entries hold the id only).
        self.live_queues: dict[int, Any] = {}
        # (id(backend), id(queue)) -> queue id in self.queues.
        self.queue_ids: dict[tuple[int, int], int] = {}
        # id(queue) -> (backend, queue id, device key), for the harvest's fast paths.
        self.fast_queues: dict[int, tuple[Backend, int, str]] = {}
        self.threads: list[ThreadRecord] = []
        self.thread_ids: dict[Any, int] = {}
        self.thread_index: dict[ThreadRecord, int] = {}
        self.errors: dict[int, str] = {}  # row -> why it has no time
        #: Ranges whose device side is the work inside them (work_ranges.py): rows at the end.
        self.work_ranges: list[WorkRange] = []
        #: Row -> what an activity backend said about it (launch configuration, ...).
        self.details = Details()
        #: When the profile started (set by ``profile``): where a row whose times cannot be
        #: kept, and activity records of a device without clock correlation, are placed.
        self.start_ns = time.perf_counter_ns()

    def add_backend(self, backend: Backend) -> None:
        self.by_slot[backend.slot] = backend

    def decode(self, entry: tuple[Any, ...]) -> tuple[Any, ...]:
        """An entry with its backend and queue objects in place of their slot and id."""
        slot, kind, name, qk, *rest = entry  # ENTRY_FIELDS order
        backend = None if slot is None else self.by_slot[slot]
        queue = None if qk is None else self.live_queues.get(qk)
        return (backend, kind, name, queue, *rest)

    def queue_id(self, backend: Backend | None, queue: Any) -> int:
        """The id of ``queue`` (``backend.queue_info`` asked once per queue)."""
        key = (0, 0) if backend is None else (id(backend), id(queue))
        qid = self.queue_ids.get(key)
        if qid is not None:
            return qid
        if backend is None:
            rec = HOST_QUEUE
        else:
            info: QueueInfo | None = None
            try:
                info = backend.queue_info(backend, queue)
                checked_queue_info(info)
            except Exception as exc:
                self.problems.hook_failed(backend, "queue_info", exc, disable=False)
                info = None
            if info is None:
                info = QueueInfo(device=backend.name, label="queue")
            rec = QueueRecord(backend.name, info.device, info.label, f"{backend.name}:{info.key()}")
        qid = self.queue_ids[key] = self.intern_queue(rec)
        if backend is not None:
            self.fast_queues.setdefault(id(queue), (backend, qid, rec.device_key))
        return qid

    def thread_id(self, who: Any) -> int:
        tid = self.thread_ids.get(who)
        if tid is None:
            key, task = who if isinstance(who, tuple) else (who, None)
            ident, name = thread_names[key]
            tid = self.thread_ids[who] = self.intern_thread(ThreadRecord(ident, name, task))
        return tid

    def intern_queue(self, q: QueueRecord) -> int:
        qid = self.queue_index.get(q)
        if qid is None:
            qid = self.queue_index[q] = len(self.queues)
            self.queues.append(q)
        return qid

    def intern_thread(self, th: ThreadRecord) -> int:
        tid = self.thread_index.get(th)
        if tid is None:
            tid = self.thread_index[th] = len(self.threads)
            self.threads.append(th)
        return tid

    def forget_queues(self) -> None:
        """The profile ended: drop every reference to the user's queues."""
        self.queue_ids.clear()
        self.fast_queues.clear()
        self.live_queues.clear()
