"""Device memory (issue 23): the memory hooks, ``Profile.memory``'s figures, on both recorder
paths, through the test backend's simulated allocations (known sizes, so exact answers)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kprof_testbackend import device

import kprof
from kprof import plugin as kp
from kprof_core.low_level import native

DEV = "testdev 0"


@pytest.fixture(params=[True, False], ids=["compiled", "pure"])
def path(request: Any, testbackends: Any) -> Iterator[bool]:
    native.use_compiled(request.param)
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def _workload() -> tuple[device.Allocation, device.Allocation]:
    """Live: 1000, 1500, 500, 2500, 2800, 2500: peak 2800, b and c live at the end."""
    a = device.alloc(1000)
    b = device.alloc(500)
    a.free()
    c = device.alloc(2000)
    d = device.alloc(300)
    d.free()
    return b, c


def test_peak_live_bytes_and_live_at_end_are_exact(path: bool) -> None:
    with kprof.profile(backends="testdev") as p:
        b, c = _workload()
    m = p.memory
    assert len(m) == 6 and m.labels == [DEV]
    assert m.peak == {DEV: 2800}
    times, live = m.live(DEV)
    assert live == [1000, 1500, 500, 2500, 2800, 2500]
    assert times == sorted(times) and 0 <= times[0] and times[-1] <= p.end_ns - p.start_ns
    assert m.peak_at[DEV] == times[4]
    ends = m.live_at_end
    assert [(a.device, a.nbytes, a.address) for a in ends] == [
        (DEV, 2000, c.address),
        (DEV, 500, b.address),
    ]
    assert all(a.site is None for a in ends)
    assert m.live_bytes_at_end == {DEV: 2500} and m.unmatched_frees == 0
    kinds = [(e.kind, e.nbytes) for e in m.events]
    assert kinds == [
        ("alloc", 1000),
        ("alloc", 500),
        ("free", 1000),  # the free's size is its allocation's (the plugin gave none)
        ("alloc", 2000),
        ("alloc", 300),
        ("free", 300),
    ]


def test_frees_of_memory_from_before_the_profile_change_nothing(path: bool) -> None:
    old = device.alloc(4096)  # outside every profile: not recorded
    with kprof.profile(backends="testdev") as p:
        x = device.alloc(100)
        old.free()
        x.free()
    m = p.memory
    assert [(e.kind, e.nbytes) for e in m.events] == [("alloc", 100), ("free", -1), ("free", 100)]
    assert m.unmatched_frees == 1 and m.peak == {DEV: 100} and m.live_at_end == []
    assert m.live(DEV)[1] == [100, 100, 0]


def test_an_allocation_at_a_live_address_ends_the_earlier_one(path: bool) -> None:
    with kprof.profile(backends="testdev") as p:
        device.alloc(100, address=0x5000)
        device.alloc(40, address=0x5000)  # the free in between was not seen
    assert p.memory.live(DEV)[1] == [100, 40]
    assert [a.nbytes for a in p.memory.live_at_end] == [40]


def test_nested_profiles_each_see_their_allocations(path: bool) -> None:
    with kprof.profile(backends="testdev") as outer:
        a = device.alloc(10)
        with kprof.profile(backends="testdev") as inner:
            b = device.alloc(20)
            a.free()
        b.free()
    assert inner.memory.live(DEV)[1] == [20, 20]  # a's free: allocated before the inner one
    assert inner.memory.unmatched_frees == 1
    assert outer.memory.live(DEV)[1] == [10, 30, 20, 0]
    assert outer.memory.peak == {DEV: 30} and outer.memory.live_at_end == []


def test_nothing_is_recorded_outside_a_profile_or_after_it(path: bool) -> None:
    with kprof.profile(backends="testdev") as p:
        pass
    device.alloc(10).free()  # capture removed: the plain functions again
    assert not p.memory and p.memory.peak == {}
    backend = kprof.get_backend("testdev")
    kp.allocated(backend, "testdev 0", 1, 2)  # no profile in this context: nothing, no error
    with kprof.profile(backends="testdev") as p:
        # Another thread without kprof.propagate is not the profile's.
        t = threading.Thread(target=lambda: device.alloc(99))
        t.start()
        t.join()
        device.alloc(7)
    assert [e.nbytes for e in p.memory.events] == [7]


def test_a_backend_without_memory_hooks_installs_nothing(testbackends: Any) -> None:
    nots = kprof.get_backend("testnots")
    assert not nots.has_memory and kprof.get_backend("testdev").has_memory
    calls: list[str] = []
    original = nots.memory_install
    nots.memory_install = lambda b: calls.append("install") or original(b)  # type: ignore[method-assign]
    with kprof.profile(backends="testnots") as p:
        device.alloc(10)
        kp.allocated(nots, "x", 1, 2)  # a backend the profile uses, reporting anyway: kept
        kp.allocated(kprof.get_backend("testdev"), "x", 1, 2)  # not the profile's: dropped
    assert calls == []
    assert [(e.device, e.nbytes) for e in p.memory.events] == [("testnots x", 2)]


def test_malformed_events_are_refused_with_one_warning(path: bool) -> None:
    backend = kprof.get_backend("testdev")
    with pytest.warns(RuntimeWarning, match=r"3 memory event\(s\) refused") as caught:
        with kprof.profile(backends="testdev") as p:
            kp.allocated(backend, "testdev 0", "0x10", 5)  # type: ignore[arg-type]
            kp.allocated(backend, "testdev 0", 16, -1)  # an allocation needs its size
            kp.allocated(backend, 0, 16, 5)  # type: ignore[arg-type]
            kp.allocated(backend, "testdev 0", 2**64 - 8, 5)  # a high address: kept, wrapped
    assert len([w for w in caught if "refused" in str(w.message)]) == 1
    [e] = p.memory.events
    assert e.address == -8 and e.nbytes == 5


def test_a_failing_memory_install_keeps_the_capture(
    path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = kprof.get_backend("testdev")

    def boom(b: Any) -> bool:
        raise RuntimeError("no allocator hook here")

    monkeypatch.setattr(backend, "memory_install", boom)
    removed: list[int] = []
    monkeypatch.setattr(backend, "memory_remove", lambda b: removed.append(1))
    q = device.Queue()
    try:
        with pytest.warns(RuntimeWarning, match="failed to install its memory tracking"):
            with kprof.profile(backends="testdev") as p:
                with q:
                    q.launch("k", 1)
                device.alloc(10)
    finally:
        q.close()
    assert [k.name for k in p.kernels] == ["k"] and not p.memory and removed == []
    assert backend.broken is None


def _here(text: str) -> str:
    """The site label of the line of this file holding ``text``."""
    with open(__file__) as f:
        (n,) = [i + 1 for i, ln in enumerate(f) if text in ln and "_here(" not in ln]
    return f"test_memory.py:{n} _allocate_here"


def _allocate_here() -> tuple[device.Allocation, device.Allocation]:
    a = device.alloc(64)  # site: first
    b = device.alloc(32)  # site: second
    a.free()
    return a, b


def test_each_allocation_keeps_its_site(path: bool) -> None:
    with kprof.profile(backends="testdev", sites=True) as p:
        _a, b = _allocate_here()
        with kprof.profile(backends="testdev", sites=True) as inner:  # nested: both keep them
            c = device.alloc(8)  # site: third
        c.free()
    first, second = _here("# site: first"), _here("# site: second")
    third = _here("# site: third").replace("_allocate_here", "test_each_allocation_keeps_its_site")
    assert [(e.kind, e.nbytes, e.site) for e in p.memory.events] == [
        ("alloc", 64, first),
        ("alloc", 32, second),
        ("free", 64, None),  # frees carry no site
        ("alloc", 8, third),
        ("free", 8, None),
    ]
    assert [(a.nbytes, a.address, a.site) for a in p.memory.live_at_end] == [
        (32, b.address, second)
    ]
    assert [(e.nbytes, e.site) for e in inner.memory.events] == [(8, third)]
    # Kept in the .kprof file (memory sites are the table's strings).
    buf = io.BytesIO()
    p.save(buf)
    assert kprof.load(io.BytesIO(buf.getvalue())).memory.events == p.memory.events
    with kprof.profile(backends="testdev") as off:  # sites off: none caught
        device.alloc(1)
    assert [e.site for e in off.memory.events] == [None]


def test_delivered_memory_goes_to_its_scopes_profile_with_the_site_given(path: bool) -> None:
    """``kprof.plugin.deliver_memory`` (CUPTI's MEMORY2 rows): each event into the profile of
    its scope, as given; its site only as the plugin caught it on the allocating thread
    (``launch_site()``, CUPTI's callback), never the frames of the delivering call (an
    activity API's events arrive away from the call that made them)."""
    from kprof_core.recording import activity

    backend = kprof.get_backend("testdev")
    with kprof.profile(backends="testdev", sites=True) as p:
        rec = kp.active()
        assert rec is not None
        caught = kp.launch_site()  # site: caught
        scope, opened = activity.open_scope(rec, only=[])
        try:
            n = kp.deliver_memory(
                backend,
                [scope, scope, 10**9, scope],  # the third: a scope kprof never opened
                [1, 0, 1, 1],
                [DEV, DEV, DEV, DEV],
                [0x100, 0x100, 0x200, 0x300],
                [640, -1, 8, 16],
                [rec.start_ns + 5, rec.start_ns + 7, rec.start_ns + 9, rec.start_ns + 11],
                [-1, -1, caught, caught],
            )
        finally:
            activity.close_scope(rec, scope, opened)
    assert n == 3
    here = _here("# site: caught").replace(
        "_allocate_here", "test_delivered_memory_goes_to_its_scopes_profile_with_the_site_given"
    )
    assert [(e.kind, e.nbytes, e.address, e.site) for e in p.memory.events] == [
        ("alloc", 640, 0x100, None),
        ("free", 640, 0x100, None),
        ("alloc", 16, 0x300, here),
    ]
    assert [e.time_ns for e in p.memory.events] == [5, 7, 11]
