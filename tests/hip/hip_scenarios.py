"""HIP scenarios run in a child process against the test double (see test_hip_backend.py).

    ROCM_PATH=<double> python tests/hip/hip_scenarios.py NAME [NAME ...]

hip-python fixes where it loads libamdhip64.so at its first call, so every scenario runs in
a fresh interpreter whose ROCM_PATH points at the double. Each scenario returns plain data;
the child prints ``{name: data}`` (or ``{name: {"error": traceback}}``) as JSON on its last
line, and the tests assert on it.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from hip import hip

import kprof
import kprof_hip
from kprof_core.low_level import native

E = hip.hipError_t
ctl = ctypes.CDLL(os.path.join(os.environ["ROCM_PATH"], "lib", "libamdhip64.so"))
ctl.hipdouble_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
ctl.hipdouble_calls.argtypes = [ctypes.c_char_p]

SCENARIOS: dict[str, Callable[[], Any]] = {}
SYNC_CALLS = ("hipEventSynchronize", "hipStreamSynchronize", "hipDeviceSynchronize")


def scenario(fn: Callable[[], Any]) -> Callable[[], Any]:
    SCENARIOS[fn.__name__] = fn
    return fn


def calls(name: str) -> int:
    n = ctl.hipdouble_calls(name.encode())
    assert n >= 0, f"the double does not know {name}"
    return int(n)


def ok(result: tuple[Any, ...]) -> Any:
    """Unpack a hip-python result, failing loudly on an error code."""
    assert result[0] == E.hipSuccess, result
    return result[1] if len(result) == 2 else result[1:] or None


def stream() -> Any:
    return ok(hip.hipStreamCreate())


def function(name: str) -> Any:
    mod = ok(hip.hipModuleLoadData(b"any code object"))
    return ok(hip.hipModuleGetFunction(mod, name.encode()))


def launch(f: Any, grid: int, s: Any) -> None:
    """A kernel of ``grid`` µs on the double."""
    ok(hip.hipModuleLaunchKernel(f, grid, 1, 1, 64, 1, 1, 0, s, None, None))


def records(p: kprof.Profile) -> list[dict[str, Any]]:
    return [
        {
            "name": r.name,
            "kind": r.kind,
            "queue": r.queue,
            "device": r.device,
            "thread": r.thread,
            "duration": r.duration_ns,
            "start": r.start_ns,
            "launch_start": r.launch_start_ns,
            "launch_end": r.launch_end_ns,
            "nbytes": r.nbytes,
            "error": r.error,
            "host_timed": r.host_timed,
            "config": r.config,
        }
        for r in p.kernels
    ]


def profile(**kw: Any) -> kprof.profile:
    return kprof.profile(backends=["hip"], **kw)


# ---------------------------------------------------------------------------------------------


@scenario
def throughput() -> Any:
    """Flops and bytes said by kernel name: given at the profile's end to its rows."""
    s = stream()
    kprof.annotate("k500", flops=1_000_000, bytes=4_000)
    try:
        with profile() as p:
            # Functions got inside the profile are named (hipModuleGetFunction is captured).
            lead, k, other = function("hang"), function("k500"), function("scale")
            launch(lead, 1, s)
            for _ in range(3):
                launch(k, 500, s)
            launch(other, 200, s)
            ctl.hipdouble_release_hangs()
            ok(hip.hipStreamSynchronize(s))
    finally:
        kprof.annotate("k500")
    row = p.summary().device_row("k500")
    return {
        "rows": [[r.name, r.flops, r.nbytes] for r in p.kernels],
        "flops": row.flops,
        "nbytes": row.nbytes,
        "total_ns": row.total_ns,
        "gflops": row.gflops,
        "report": p.report(),
    }


@scenario
def describe() -> Any:
    info = kprof.get_backend("hip").info()
    return {
        "status": info.status,
        "library": info.library,
        "version": info.library_version,
        "devices": list(info.devices),
        "detail": info.detail,
        "timestamps": info.timestamps,
    }


@scenario
def capture() -> Any:
    s = stream()
    early = function("early")  # obtained before any profile: unnamed unless registered
    named_early = kprof_hip.name_function(function("named_early"), "registered")
    with profile() as p:
        # The lead hangs until released below, after everything is enqueued: the work behind
        # it then runs back to back on the double's clock, however slowly this process
        # enqueued it (a 50 ms lead measured 347 µs for a 300 µs kernel on a loaded machine:
        # the stream had gone idle before the launch came).
        lead, k, scale = function("hang"), function("k500"), function("scale")
        launch(lead, 1, s)
        for _ in range(3):
            launch(k, 500, s)
        ok(hip.hipLaunchKernel(scale, hip.dim3(x=300), hip.dim3(x=64), None, 0, s))
        ok(
            hip.hipExtLaunchKernel(
                scale, hip.dim3(x=400), hip.dim3(x=64), None, 0, s, None, None, 0
            )
        )
        ue0, ue1 = ok(hip.hipEventCreate()), ok(hip.hipEventCreate())
        ok(hip.hipExtLaunchKernel(k, hip.dim3(x=250), hip.dim3(x=64), None, 0, s, ue0, ue1, 0))
        launch(early, 100, s)
        launch(named_early, 100, s)
        # Keyword call form through the wrapper.
        ok(
            hip.hipModuleLaunchKernel(
                f=k,
                gridDimX=50,
                gridDimY=2,
                gridDimZ=1,
                blockDimX=1,
                blockDimY=1,
                blockDimZ=1,
                sharedMemBytes=0,
                stream=s,
                kernelParams=None,
                extra=None,
            )
        )
        ctl.hipdouble_release_hangs()
        host = np.arange(25_000, dtype=np.float32)  # 100_000 bytes
        back = np.zeros_like(host)
        dev = ok(hip.hipMalloc(host.nbytes))
        ok(hip.hipMemcpyAsync(dev, host, host.nbytes, hip.hipMemcpyKind.hipMemcpyHostToDevice, s))
        ok(hip.hipMemsetAsync(dev, 0, 20_000, s))
        ok(hip.hipStreamSynchronize(s))  # the user's own synchronization
        ok(hip.hipMemcpy(back, dev, 50_000, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    user_ms = ok(hip.hipEventElapsedTime(ue0, ue1))
    ok(hip.hipFree(dev))
    return {
        "records": records(p),
        "user_event_ms": user_ms,
        "early_addr": int(early),
        "report": p.report(),
        "copied": bool((back[5_000:12_500] == host[5_000:12_500]).all()),
        "zeroed": bool((back[:5_000] == 0).all()),
        "unresolved": len(p.unresolved),
        "clocks": [c.describe() for c in p.clocks.values()],
        "by_config": [[r.name, r.config, r.calls] for r in p.summary(by=("name", "config")).device],
        "config_report": p.report(by=("name", "config")),
    }


@scenario
def no_sync() -> Any:
    s = stream()
    f = function("five_ms")
    before = {n: calls(n) for n in SYNC_CALLS}
    with profile() as p:
        for _ in range(20):
            launch(f, 5_000, s)
        # 100 ms of work was queued; launching did not wait for it.
        query_after_loop = int(hip.hipStreamQuery(s)[0])
        during = {n: calls(n) - before[n] for n in SYNC_CALLS}
    after = {n: calls(n) - before[n] for n in SYNC_CALLS}
    return {
        "query_after_loop": query_after_loop,
        "sync_calls_during": during,
        "sync_calls_total": after,
        "durations": [r["duration"] for r in records(p)],
        "done_after_profile": int(hip.hipStreamQuery(s)[0]),
    }


def _device_error(fn_name: bytes, code: int) -> Any:
    """A HIP error while resolving: the nested profile's rows survive, the failing record
    says why, and the user's HIP calls keep working afterwards."""
    s = stream()
    f = function("k")
    with profile() as outer:
        with profile() as inner:
            for _ in range(3):
                launch(f, 200, s)
        for _ in range(2):
            launch(f, 300, s)
        ctl.hipdouble_fail(fn_name, code, 1)
    after = [int(x) for x in hip.hipModuleLaunchKernel(f, 10, 1, 1, 1, 1, 1, 0, s, None, None)]
    with profile() as later:
        launch(f, 10, s)
    return {
        "records": records(outer),
        "inner": records(inner),
        "report": outer.report(),
        "broken": kprof.get_backend("hip").broken,
        "after": after,
        "later_backends": later.backends,
        "later_records": len(later.kernels),
    }


@scenario
def elapsed_error() -> Any:
    return _device_error(b"hipEventElapsedTime", int(E.hipErrorInvalidValue))


@scenario
def query_error() -> Any:
    return _device_error(b"hipEventQuery", int(E.hipErrorLaunchFailure))


@scenario
def failed_launch() -> Any:
    s = stream()
    f = function("k")
    with profile() as p:
        launch(f, 100, s)
        bad = hip.hipModuleLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, s, None, None)  # zero grid
        # Not a stream: our event record fails as the launch does; the user's error only.
        no_stream = hip.hipModuleLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0x1234, None, None)
        launch(f, 100, s)
    return {
        "returned": [int(x) for x in bad],
        "no_stream": [int(x) for x in no_stream],
        "records": records(p),
        "report": p.report(),
        "broken": kprof.get_backend("hip").broken,
    }


@scenario
def hang() -> Any:
    s, s2 = stream(), stream()
    good, stuck = function("good"), function("hang")
    try:
        with profile(timeout=0.3) as p:
            launch(good, 100, s)
            launch(stuck, 1, s)
        hung = ctl.hipdouble_hung()
        # The hang's pending stop event went back to the pool; a new profile reuses it on
        # another stream, while the old record is still pending on the hung one.
        with profile(timeout=5) as p2:
            for _ in range(4):
                launch(good, 300, s2)
    finally:
        ctl.hipdouble_release_hangs()
    ok(hip.hipStreamSynchronize(s))
    return {"records": records(p), "report": p.report(), "hung": hung, "second": records(p2)}


@scenario
def pool_reuse() -> Any:
    s = stream()
    f = function("k")

    def run() -> tuple[kprof.Profile, int, int]:
        c0, r0 = calls("hipEventCreate"), calls("hipEventRecord")
        with profile() as p, kprof_hip.use_stream(s), kprof.range("r"):
            for _ in range(10):
                launch(f, 50, s)
        return p, calls("hipEventCreate") - c0, calls("hipEventRecord") - r0

    idle_before = len(kprof_hip.runtime._pool)
    p1, created1, recorded1 = run()
    p2, created2, recorded2 = run()
    return {
        "idle_before": idle_before,
        "created": [created1, created2],
        "recorded": [recorded1, recorded2],
        "n": [len(p1.kernels), len(p2.kernels)],
        "idle_after": len(kprof_hip.runtime._pool),
    }


@scenario
def restore() -> Any:
    names = (
        "hipModuleLaunchKernel",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipMemcpy",
        "hipMemcpyAsync",
        "hipMemset",
        "hipMemsetAsync",
        "hipModuleGetFunction",
    )
    import rocm.bindings.hip as rbh

    originals = {n: getattr(hip, n) for n in names}
    s = stream()
    f = function("k")
    inside: dict[str, bool] = {}
    raised = None
    try:
        with profile() as p:
            inside = {n: getattr(hip, n) is not originals[n] for n in names}
            launch(f, 10, s)
            raise ValueError("user error")
    except ValueError as exc:
        raised = str(exc)
    return {
        "patched_inside": inside,
        "raised": raised,
        "n_records": len(p.kernels),
        "restored": {n: getattr(hip, n) is originals[n] for n in names},
        "alias_restored": all(getattr(rbh, n) is originals[n] for n in names),
        "wrapped_name": inside and p.kernels[0].name,
    }


@scenario
def threads() -> Any:
    streams = {"A": stream(), "B": stream()}
    barrier = threading.Barrier(2)

    def work(which: str, grid: int) -> None:
        s = streams[which]
        f = function(f"on_{which}")
        barrier.wait()
        with kprof_hip.use_stream(s), kprof.range(f"range {which}"):
            for _ in range(3):
                launch(f, grid, s)

    with profile() as p:
        ts = [
            threading.Thread(target=kprof.propagate(work), args=a, name=f"worker {a[0]}")
            for a in (("A", 300), ("B", 700))
        ]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    dranges = [
        {"name": r.name, "queue": r.queue, "thread": r.thread, "duration": r.duration_ns}
        for r in p.device_ranges
    ]
    return {"records": records(p), "device_ranges": dranges}


@scenario
def current_stream() -> Any:
    s = stream()
    f = function("k")
    with profile() as p:
        with kprof.range("no stream named"):
            launch(f, 100, s)
        with kprof_hip.use_stream(s):
            assert kprof_hip.current_stream() is not None
            with kprof.range("on s"):
                launch(f, 400, s)
                launch(f, 400, s)
            with kprof_hip.use_stream(None), kprof.range("on null"):
                launch(f, 100, None)
            inner_restored = kprof_hip.current_stream() is not None
        outside = kprof_hip.current_stream()
    dranges = [
        {"name": r.name, "queue": r.queue, "duration": r.duration_ns} for r in p.device_ranges
    ]
    return {
        "device_ranges": dranges,
        "records": records(p),
        "inner_restored": inner_restored,
        "outside_none": outside is None,
    }


@scenario
def outside_profile() -> Any:
    """Launches from a thread not in the profile's context call straight through."""
    s = stream()
    f = function("k")
    counts: dict[str, int] = {}

    def stray() -> None:
        c0 = calls("hipEventRecord")
        launch(f, 10, s)
        counts["event_records"] = calls("hipEventRecord") - c0

    with profile() as p:
        t = threading.Thread(target=stray)
        t.start()
        t.join()
    return {"n_records": len(p.kernels), **counts}


@scenario
def host_only() -> Any:
    s = stream()
    f = function("k")
    c0 = calls("hipEventRecord")
    with profile(device=False) as p:
        launch(f, 100, s)
    return {
        "records": records(p),
        "event_records": calls("hipEventRecord") - c0,
        "launches": [(r.name, r.kind) for r in p.launches],
    }


@scenario
def synchronized() -> Any:
    s = stream()
    f = function("k")
    c0 = calls("hipStreamSynchronize")
    with profile(synchronize=True) as p:
        launch(f, 300, s)
        # The launch was waited for: the stream is idle right away.
        idle = int(hip.hipStreamQuery(s)[0])
    return {"records": records(p), "stream_syncs": calls("hipStreamSynchronize") - c0, "idle": idle}


@scenario
def record_fails() -> Any:
    """kprof's own hipEventRecord fails: the user's launch still runs; the backend stops."""
    s = stream()
    f = function("k")
    l0 = calls("hipModuleLaunchKernel")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile() as p:
            ctl.hipdouble_fail(b"hipEventRecord", int(E.hipErrorInvalidHandle), 1)
            first = [
                int(x) for x in hip.hipModuleLaunchKernel(f, 10, 1, 1, 1, 1, 1, 0, s, None, None)
            ]
            second = [
                int(x) for x in hip.hipModuleLaunchKernel(f, 10, 1, 1, 1, 1, 1, 0, s, None, None)
            ]
    return {
        "first": first,
        "second": second,
        "launched": calls("hipModuleLaunchKernel") - l0,
        "warnings": [str(w.message) for w in caught],
        "n_records": len(p.kernels),
        "broken": kprof.get_backend("hip").broken,
    }


@scenario
def two_devices() -> Any:
    """HIPDOUBLE_DEVICES=2: each thread's NULL stream belongs to its current device."""
    f = function("k")
    info = kprof.get_backend("hip").info()

    def on_device(d: int) -> None:
        ok((*hip.hipSetDevice(d), None))
        launch(f, 100, None)

    with profile() as p:
        for d in (0, 1):
            t = threading.Thread(target=kprof.propagate(on_device), args=(d,))
            t.start()
            t.join()
    return {"devices": list(info.devices), "records": records(p), "clocks": sorted(p.clocks)}


def _memory(p: kprof.Profile) -> dict[str, Any]:
    m = p.memory
    return {
        "events": [[e.kind, e.device, e.nbytes, e.address, e.site] for e in m.events],
        "peak": m.peak,
        "live_at_end": [[a.device, a.nbytes, a.address, a.site] for a in m.live_at_end],
        "unmatched": m.unmatched_frees,
    }


@scenario
def memory() -> Any:
    """Allocations and frees of every wrapped kind, with known sizes; one leak of each."""
    s = stream()
    before = ok(hip.hipMalloc(64))  # allocated before the profile: its free matches nothing
    with profile(sites=True) as p:
        a = ok(hip.hipMalloc(1000))
        b = ok(hip.hipMallocAsync(3000, s))
        c = ok(hip.hipMallocManaged(500, 1))
        ok((*hip.hipFree(a), None))
        ok((*hip.hipFreeAsync(b, s), None))
        d = ok(hip.hipExtMallocWithFlags(200, 0))
        pinned = ok(hip.hipHostMalloc(4096, 0))
        ok((*hip.hipHostFree(pinned), None))
        zero = hip.hipMalloc(0)  # success, NULL: nothing to report
        failed = hip.hipFree(a)  # a second free fails: nothing reported
        ok((*hip.hipFree(before), None))
        leaked_pinned = ok(hip.hipHostMalloc(16, 0))
        ok((*hip.hipStreamSynchronize(s), None))
    out = _memory(p)
    out["addresses"] = [int(x) for x in (a, b, c, d, pinned, before, leaked_pinned)]
    out["zero"] = [int(zero[0]), zero[1]]
    out["compiled"] = native.compiled() is not None
    out["failed"] = int(failed[0])
    # Outside a profile (capture removed): nothing is wrapped, nothing recorded.
    out["restored"] = hip.hipMalloc.__name__ == "hipMalloc" and not hasattr(
        hip.hipMalloc, "__wrapped__"
    )
    ok((*hip.hipFree(c), None))
    ok((*hip.hipFree(d), None))
    ok((*hip.hipHostFree(leaked_pinned), None))
    return out


@scenario
def memory_two_devices() -> Any:
    """HIPDOUBLE_DEVICES=2: an allocation counts on the current device; its free on the
    same device, whatever device is current when it is freed."""
    with profile() as p:
        ok((*hip.hipSetDevice(1), None))
        x = ok(hip.hipMalloc(100))
        ok((*hip.hipSetDevice(0), None))
        y = ok(hip.hipMalloc(40))
        ok((*hip.hipFree(x), None))  # device 0 is current: x is still device 1's
    ok((*hip.hipFree(y), None))
    return _memory(p)


def main(argv: list[str]) -> int:
    out: dict[str, Any] = {}
    for name in argv:
        try:
            out[name] = SCENARIOS[name]()
        except BaseException:
            out[name] = {"error": traceback.format_exc()}
        ctl.hipdouble_reset()
    print("\n" + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
