"""Launch sites of CUPTI's rows (CUPTI's callback API, ``kprof_cuda/cupti_sites.py``), in a
child process whose CUPTI is the test double, as ``cupti_child.py`` (whose helpers and ``Env``
this imports) does for the activity path.

Usage: ``python cupti_sites_child.py LIBDIR [SCENARIO...]``; prints one JSON line
``{scenario: "ok" | traceback}``. A simulated CUDA call (``lib.cuptidouble_api``, through
ctypes: the GIL released, as CuPy calls the driver) calls kprof's subscriber at its entry on
the calling thread; the lines below that make such calls are the launch sites.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cupti_child as cc  # loads the double (LIBDIR is argv[1]) before kprof finds CUPTI
from cupti_child import (
    DEVICE_MEMORY,
    DRIVER,
    DTOH,
    LAUNCH,
    MEMCPY,
    MEMSET,
    RT_LAUNCH,
    RT_MALLOC,
    RUNTIME,
    Env,
    lib,
)

import kprof
from kprof_core.data.stacks import frames_of
from kprof_cuda import activity as cuda_activity

lib.cuptidouble_callbacks.restype = ctypes.c_long
lib.cuptidouble_callbacks_enter.restype = ctypes.c_long
lib.cuptidouble_take_subscriber.argtypes = [ctypes.c_int]
lib.cuptidouble_api_from_c_thread.restype = ctypes.c_uint32
lib.cuptidouble_api_from_c_thread.argtypes = [ctypes.c_int, ctypes.c_uint32]

HERE = str(Path(__file__).resolve())
NAME = b"_Z1kv"


def line(marker: str) -> int:
    """The line of this file that ends with ``# marker``."""
    for n, text in enumerate(Path(HERE).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return n
    raise AssertionError(marker)


def kernel(corr: int, grid: int = 4) -> None:
    """The kernel record of launch ``corr`` (written by the simulated device, not a call)."""
    t = lib.cuptidouble_now()
    lib.cuptidouble_kernel(corr, NAME, 0, 1, 13, grid, 2, 1, 256, 1, 1, t + 100, t + 1100)


def now() -> int:
    return int(lib.cuptidouble_now())


def sites(p: kprof.Profile) -> list[tuple[int, str] | None]:
    """Each device row's site as (line, function), None where it has none."""
    out: list[tuple[int, str] | None] = []
    for i in range(len(p.table)):
        s = p.table.site[i]
        if s < 0:
            out.append(None)
        else:
            assert p.sites[s].file == HERE, p.sites[s]
            out.append((p.sites[s].line, p.sites[s].function))
    return out


def callback_stats() -> dict[str, int]:
    r = cuda_activity._reader
    return {} if r is None else dict(r.callback_stats())


# -- scenarios ------------------------------------------------------------------------------------


def each_row_has_its_line(env: Env) -> None:
    """Two launch lines are two sites; a copy, a memset and a runtime launch keep theirs;
    kernels keep their grid and block as launch configurations, copies have none."""
    with kprof.profile(sites=True) as p:
        for _ in range(2):
            t = now()
            a = lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000)  # site: a
            kernel(a)
            b = lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000)  # site: b
            kernel(b, grid=8)
        c = lib.cuptidouble_api(DRIVER, MEMCPY, t, t + 1000)  # site: copy
        lib.cuptidouble_memcpy(c, DTOH, 4096, 0, 1, 13, t + 2000, t + 3000)
        d = lib.cuptidouble_api(DRIVER, MEMSET, t, t + 1000)  # site: memset
        lib.cuptidouble_memset(d, 0, 64, 0, 1, 13, t + 4000, t + 4500)
        e = lib.cuptidouble_api(RUNTIME, RT_LAUNCH, t, t + 1000)  # site: runtime
        kernel(e)
    f = "each_row_has_its_line"
    got = sorted(zip(sites(p), (p.names[p.table.name[i]] for i in range(len(p.table)))))
    assert got == sorted(
        [
            ((line("site: a"), f), "k()"),
            ((line("site: b"), f), "k()"),
            ((line("site: a"), f), "k()"),
            ((line("site: b"), f), "k()"),
            ((line("site: copy"), f), "[copy device to host]"),
            ((line("site: memset"), f), "[memset]"),
            ((line("site: runtime"), f), "k()"),
        ]
    ), got
    assert sorted(p.configs) == ["grid 4x2x1 block 256x1x1", "grid 8x2x1 block 256x1x1"]
    t_ = p.table
    configs = {
        (p.names[t_.name[i]], p.configs[t_.config[i]] if t_.config[i] >= 0 else None)
        for i in range(len(t_))
    }
    assert configs == {
        ("k()", "grid 4x2x1 block 256x1x1"),
        ("k()", "grid 8x2x1 block 256x1x1"),
        ("[copy device to host]", None),
        ("[memset]", None),
    }, configs
    by_line = {(r.site.line if r.site else None, r.stats.calls) for r in p.summary(by="line")}
    assert (line("site: a"), 2) in by_line and (line("site: b"), 2) in by_line, by_line
    # Every launch's site was joined: none waits in the reader.
    assert cuda_activity._reader.stats()["launches"] == 0


def leaf() -> None:
    t = now()
    kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # stack: leaf


def middle() -> None:
    leaf()  # stack: middle


def stacks_with_stacks_true(env: Env) -> None:
    """``profile(stacks=True)``: each row's whole stack, the user's frames outermost first."""
    with kprof.profile(stacks=True) as p:
        middle()  # stack: outer
        leaf()  # stack: direct
    assert len(p.table) == 2 and len(p.stacks) == 2
    got = sorted([(f.function, f.line) for f in frames_of(p, "device", i)][-3:] for i in range(2))
    assert got == sorted(
        [
            [
                ("stacks_with_stacks_true", line("stack: outer")),
                ("middle", line("stack: middle")),
                ("leaf", line("stack: leaf")),
            ],
            [
                ("main", line("scenario: call")),
                ("stacks_with_stacks_true", line("stack: direct")),
                ("leaf", line("stack: leaf")),
            ],
        ]
    ), got


def off_costs_nothing(env: Env) -> None:
    """Sites off (the default): kprof does not subscribe, no callback is enabled, none is
    delivered, no row has a site. On: subscribed and enabled only while the profile runs; the
    callback API is left at the end (another tool may subscribe then)."""
    before = callback_stats().get("site_calls", 0)
    with kprof.profile() as p:
        t = now()
        kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))
        assert lib.cuptidouble_subscribed() == 0
        assert lib.cuptidouble_callbacks_enabled() == 0
    assert sites(p) == [None]
    assert lib.cuptidouble_callbacks() == 0
    assert callback_stats().get("site_calls", 0) == before
    with kprof.profile(sites=True) as p:
        assert lib.cuptidouble_subscribed() == 1
        assert lib.cuptidouble_callbacks_enabled() > 100  # every call that enqueues work
        t = now()
        kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # on: one
    assert sites(p) == [(line("on: one"), "off_costs_nothing")]
    assert lib.cuptidouble_subscribed() == 0 and lib.cuptidouble_callbacks_enabled() == 0
    assert lib.cuptidouble_callbacks() == 2  # the launch's entry and exit
    t = now()
    lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000)  # after the profile: nothing delivered
    assert lib.cuptidouble_callbacks() == 2


def only_the_launching_threads_take_the_gil(env: Env) -> None:
    """While a profile keeps sites, a thread outside it, and a thread that is no Python thread
    (the double's own pthread), get callbacks (CUPTI calls every thread) but no site: the
    compiled callback returns before taking the GIL, no Python call is made for them."""
    stop = threading.Event()
    before = callback_stats()

    def outsider() -> None:
        while not stop.is_set():
            t = now()
            lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000)

    with kprof.profile(sites=True) as p:
        th = threading.Thread(target=outsider)
        th.start()
        for _ in range(20):
            t = now()
            kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # gil: mine
        for _ in range(5):
            lib.cuptidouble_api_from_c_thread(DRIVER, LAUNCH)
        stop.set()
        th.join()
    stats = {k: v - before.get(k, 0) for k, v in callback_stats().items()}
    assert lib.cuptidouble_callbacks_enter() > 25  # the outsider's, the C thread's, mine
    assert stats["site_calls"] == 20 and stats["sites"] == 20, stats
    assert sites(p) == [(line("gil: mine"), "only_the_launching_threads_take_the_gil")] * 20


def threads_each_their_line(env: Env) -> None:
    """Two profiles on two threads, and a propagated thread: each row its own thread's line."""
    out: dict[str, kprof.Profile] = {}

    def own(name: str) -> None:
        with kprof.profile(sites=True) as p:
            for _ in range(50):
                t = now()
                kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # threads: own
        out[name] = p

    def helper() -> None:
        t = now()
        kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # threads: helper

    ths = [threading.Thread(target=own, args=(f"w{i}",)) for i in range(2)]
    with kprof.profile(sites=True) as main:
        for th in ths:
            th.start()
        h = threading.Thread(target=kprof.propagate(helper))
        h.start()
        h.join()
        for th in ths:
            th.join()
    for name in ("w0", "w1"):
        assert (
            sites(out[name])
            == [(line("threads: own"), "threads_each_their_line.<locals>.own")] * 50
        )
    assert sites(main) == [(line("threads: helper"), "threads_each_their_line.<locals>.helper")]


def nested_profile_without_sites(env: Env) -> None:
    """A nested profile with sites off gets its rows without sites; the outer one's keep
    theirs."""
    with kprof.profile(sites=True) as outer:
        t = now()
        kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # nested: outer
        with kprof.profile(sites=False) as inner:
            kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))
    assert sites(inner) == [None]
    assert (line("nested: outer"), "nested_profile_without_sites") in sites(outer)


def another_subscriber(env: Env) -> None:
    """Another tool holds CUPTI's callback API: the profile records every row, without
    sites; one warning says why, the report's notes and ``kprof backends`` too."""
    lib.cuptidouble_take_subscriber(1)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with kprof.profile(sites=True) as p:
                t = now()
                kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))
                info = env.backend.info(refresh=True)
            with kprof.profile(sites=True) as p2:
                kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))
    finally:
        lib.cuptidouble_take_subscriber(0)
    msgs = [str(w.message) for w in caught if "launch site" in str(w.message)]
    assert len(msgs) == 1, msgs  # once
    assert "MULTIPLE_SUBSCRIBERS" in msgs[0] and "another tool" in msgs[0], msgs
    assert sites(p) == [None] and sites(p2) == [None]
    assert [p.names[p.table.name[0]]] == ["k()"]
    notes = p.meta.get("notes") or []
    assert any("no launch site" in n and "another tool" in n for n in notes), p.meta
    assert "no launch sites" in (info.capture_detail or ""), info
    assert "another tool" in (info.capture_detail or ""), info
    assert "no launch site" in kprof_report(p)
    # With the other tool gone, the next profile subscribes.
    with kprof.profile(sites=True) as p3:
        kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # subscriber: back
    assert sites(p3) == [(line("subscriber: back"), "another_subscriber")]


def kprof_report(p: kprof.Profile) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print(p)
    return buf.getvalue()


def allocations_have_their_line(env: Env) -> None:
    """CUPTI's MEMORY2 allocations keep the allocating call's line (memory recorded)."""
    with kprof.profile(sites=True) as p:
        t = now()
        corr = lib.cuptidouble_api(RUNTIME, RT_MALLOC, t, t + 1000)  # alloc: here
        lib.cuptidouble_memory(corr, 1, DEVICE_MEMORY, 0x4000, 256, 0, 1, 0, t + 500)
    assert [(e.kind, e.site) for e in p.memory.events] == [
        ("alloc", f"cupti_sites_child.py:{line('alloc: here')} allocations_have_their_line")
    ], p.memory.events


def either_recorder(env: Env) -> None:
    """The recorder's pure catcher under this reader (the compiled callback then goes through
    ``launch_site()``, the fast path calls the compiled catcher itself): the same line."""
    from kprof_core.low_level import native

    got = []
    for compiled in (False, True):
        native.use_compiled(compiled)
        try:
            with kprof.profile(sites=True) as p:
                t = now()
                kernel(lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 1000))  # either: line
        finally:
            native.use_compiled(True)
        got.append(sites(p))
    assert got == [[(line("either: line"), "either_recorder")]] * 2, got


SCENARIOS: dict[str, Callable[[Env], None]] = {
    f.__name__: f
    for f in (
        each_row_has_its_line,
        stacks_with_stacks_true,
        off_costs_nothing,
        only_the_launching_threads_take_the_gil,
        threads_each_their_line,
        nested_profile_without_sites,
        another_subscriber,
        allocations_have_their_line,
        either_recorder,
    )
}


def main(names: list[str]) -> None:
    results: dict[str, Any] = {}
    for name in names:
        env = Env()
        try:
            SCENARIOS[name](env)  # scenario: call
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
        finally:
            env.close()
    reader = cuda_activity._reader
    results["_reader"] = "none" if reader is None else "compiled" if reader.compiled else "pure"
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[2:] or list(SCENARIOS))
    sys.stdout.flush()
    cc.lib.cuptidouble_reset()
