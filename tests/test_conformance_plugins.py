"""kprof.testing's conformance kit, run against every plugin kprof ships and its test backend."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from kprof_testbackend import device

from kprof.testing import BackendConformance


class TestTestdevConformance(BackendConformance):
    """The test backend's ``testdev``: pooled markers on a simulated device, with capture."""

    backend_name = "testdev"
    records_per_step = 2

    queue: device.Queue

    def make_workload(self, backend: Any) -> Callable[[], Any]:
        self.queue = q = device.Queue("conformance")

        def step() -> None:
            q.launch("mul2", 50)
            q.launch("add", 80)

        return step

    def queue_context(self) -> contextlib.AbstractContextManager[Any]:
        return self.queue

    def stall(self) -> Callable[[], None]:
        q = self.queue
        q.hang.clear()
        q.launch("hang")
        return q.hang.set
