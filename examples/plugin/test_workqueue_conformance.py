"""The example plugin against kprof's conformance kit.

Run it with ``python -m pytest -v test_workqueue_conformance.py`` (pytest: ``pip install pytest``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import kprof_workqueue
import workqueue

from kprof import plugin as kp
from kprof.testing import BackendConformance


def scale(n: int) -> None:  # a "kernel": some work on the device
    time.sleep(n / 1e6)


class TestWorkqueue(BackendConformance):
    backend_name = "workqueue"
    plugin = kprof_workqueue  # registered for these tests unless installed (pip install .)
    records_per_step = 2

    def make_workload(self, backend: kp.Backend) -> Callable[[], Any]:
        self.queue = q = workqueue.Queue("q1")
        return lambda: (q.launch(scale, 100), q.launch(scale, 200))

    def queue_context(self) -> workqueue.Queue:
        return self.queue

    def stall(self) -> Callable[[], None]:
        gate = threading.Event()
        self.queue.wait_for(gate)
        return gate.set
