"""Interrupts: KeyboardInterrupt in the profiled block, and while kprof waits for the device."""

from __future__ import annotations

import _thread
import threading
from typing import Any

import pytest
from kprof_testbackend import device, plugin

import kprof

pytestmark = pytest.mark.usefixtures("testbackends")


def test_keyboard_interrupt_in_the_block(tdq: Any) -> None:
    q, pq = tdq(), tdq(plain=True)
    originals = (device.Queue.launch, device.PlainQueue.launch)
    interrupt = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as ei:
        with kprof.profile() as p:
            with q, kprof.range("r"):
                q.launch("a", 10)
                q.launch("b", 10)
            with pq:
                pq.launch("c")
            raise interrupt
    assert ei.value is interrupt
    assert [k.name for k in p.kernels] == ["a", "b", "c"]
    assert all(k.error is None for k in p.kernels)
    assert [r.name for r in p.ranges] == ["r"]
    assert (device.Queue.launch, device.PlainQueue.launch) == originals
    assert device.Queue.launch is originals[0] and device.PlainQueue.launch is originals[1]
    assert not plugin.live
    assert kprof.capture.active() is None


def test_keyboard_interrupt_while_resolving(tdq: Any) -> None:
    """Ctrl-C while the profile waits for a device that does not progress: the interrupt
    propagates, resolved records are kept and placed, tokens go back, capture is removed."""
    q = tdq()
    original = device.Queue.launch
    q.hang.clear()
    timer = threading.Timer(0.5, _thread.interrupt_main)
    with pytest.raises(KeyboardInterrupt):
        with kprof.profile(timeout=30) as p, q:
            q.launch("done", 10)
            q.finish()  # "done" completes: it can be resolved before the interrupt
            q.launch("hang")
            q.launch("after")
            timer.start()
    timer.join()
    q.hang.set()
    assert [k.name for k in p.kernels] == ["done"]
    assert p.kernels[0].error is None and p.kernels[0].start_ns >= p.kernels[0].launch_start_ns
    assert device.Queue.launch is original
    assert not plugin.live
