"""Launch stacks as data (no device): ``frames_of`` reads a row's stack, its site alone, or
nothing, whichever the profile recorded."""

from __future__ import annotations

import pytest

import kprof
from kprof_core.data.records import KERNEL, PLACED, QueueRecord, ThreadRecord
from kprof_core.data.sites import Site
from kprof_core.data.stacks import frames_of

OUTER = Site("/src/main.py", 10, "main")
MID = Site("/src/train.py", 20, "step")
LEAF = Site("/src/model.py", 30, "forward")


def sites_only() -> kprof.Profile:
    p = kprof.Profile(backends=["testdev"])
    p.names = ["a"]
    p.queues = [QueueRecord("testdev", "dev", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.sites = [LEAF, MID]
    t0 = 1_000_000
    for k, site in enumerate([0, 1, -1]):
        s = t0 + 1000 * k
        p.table.append(0, KERNEL, 0, 0, s, s + 10, s + 20, 100, -1, PLACED, site)
    p.host.append(0, 0, 0, t0, t0 + 5000, 1)
    p.start_ns, p.end_ns = t0, t0 + 10_000
    return p


def test_frames_of_falls_back_to_the_site_or_nothing() -> None:
    p = sites_only()
    assert frames_of(p, "device", 0) == (LEAF,)
    assert frames_of(p, "device", 1) == (MID,)
    assert frames_of(p, "device", 2) == ()
    assert frames_of(p, "host", 0) == (MID,)
    assert kprof.Profile().stacks == ()
    with pytest.raises(ValueError, match='"device" or "host"'):
        frames_of(p, "other", 0)  # type: ignore[arg-type]
