"""Check the HIP test double through the real hip-python bindings.

    python tests/hip_double/check_double.py        # exit status 0 = all good

Builds the double into a temporary directory, then runs the checks in child
processes (hip-python resolves and caches the library path on its first call,
so each library-selection setup needs a fresh interpreter):

  * how hip-python 10 finds libamdhip64.so (ROCM_PATH, LD_LIBRARY_PATH, both);
  * the API behaviour (``--child`` mode, ROCM_PATH and LD_LIBRARY_PATH set);
  * that a process exits cleanly with a "hang" kernel still stalled.

Test tooling only; verified with hip-python 10.0 on Python 3.11.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build import build  # noqa: E402

CHILD_TIMEOUT_S = 120


# --------------------------------------------------------------------------
# child side
# --------------------------------------------------------------------------


class Checker:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.passed = 0

    def __call__(self, cond: bool, what: str, detail: object = "") -> None:
        if cond:
            self.passed += 1
            print(f"  ok    {what}")
        else:
            self.failures.append(what)
            print(f"  FAIL  {what}  {detail}")


def child_main() -> int:
    import ctypes
    import threading
    import time

    import numpy as np
    from hip import hip
    from rocm.bindings.util.paths import get_library_path

    E = hip.hipError_t
    ok = Checker()
    lib_path = os.environ["HIPDOUBLE_LIB"]

    resolved = get_library_path("amdhip64")
    ok(resolved == os.fsencode(lib_path), "hip-python resolves the double", resolved)

    # The control API must act on the very copy hip-python loaded; dlopen of
    # the same file returns the same handle.
    ctl = ctypes.CDLL(lib_path)
    ctl.hipdouble_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    ctl.hipdouble_calls.argtypes = [ctypes.c_char_p]

    def calls(name: str) -> int:
        return ctl.hipdouble_calls(name.encode())

    # -- device and runtime ------------------------------------------------
    n0 = calls("hipGetDeviceCount")
    ok(hip.hipGetDeviceCount() == (E.hipSuccess, 1), "hipGetDeviceCount -> 1")
    ok(calls("hipGetDeviceCount") == n0 + 1, "ctypes sees hip-python's calls (shared state)")
    os.environ["HIPDOUBLE_DEVICES"] = "3"
    ok(hip.hipGetDeviceCount() == (E.hipSuccess, 3), "HIPDOUBLE_DEVICES=3 -> 3")
    os.environ["HIPDOUBLE_DEVICES"] = "0"
    ok(hip.hipGetDeviceCount()[0] == E.hipErrorNoDevice, "HIPDOUBLE_DEVICES=0 -> hipErrorNoDevice")
    del os.environ["HIPDOUBLE_DEVICES"]
    ok(hip.hipGetDevice() == (E.hipSuccess, 0), "hipGetDevice -> 0")
    ok(hip.hipSetDevice(0) == (E.hipSuccess,), "hipSetDevice(0)")
    ok(hip.hipSetDevice(1) == (E.hipErrorInvalidDevice,), "hipSetDevice(1) -> invalid device")
    err, name = hip.hipDeviceGetName(64, 0)
    ok(err == E.hipSuccess and name.decode() == "HIP double (host clock)", "hipDeviceGetName", name)
    err, name = hip.hipDeviceGetName(5, 0)
    ok(err == E.hipSuccess and name.decode() == "HIP ", "hipDeviceGetName truncates", name)
    ok(hip.hipRuntimeGetVersion() == (E.hipSuccess, 71500000), "hipRuntimeGetVersion")
    ok(hip.hipDriverGetVersion() == (E.hipSuccess, 71500000), "hipDriverGetVersion")
    ok(str(hip.hipGetErrorName(E.hipErrorNotReady)[1]) == "hipErrorNotReady", "hipGetErrorName")
    ok(
        str(hip.hipGetErrorString(E.hipErrorInvalidValue)[1]) == "invalid argument",
        "hipGetErrorString",
    )

    # -- streams, events, modules, a timed kernel --------------------------
    err, s = hip.hipStreamCreate()
    ok(err == E.hipSuccess and s is not None, "hipStreamCreate")
    err, s2 = hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)
    ok(err == E.hipSuccess, "hipStreamCreateWithFlags(hipStreamNonBlocking)")
    _, e0 = hip.hipEventCreate()
    err, e1 = hip.hipEventCreateWithFlags(hip.hipEventDefault)
    ok(err == E.hipSuccess, "hipEventCreate / hipEventCreateWithFlags")
    err, mod = hip.hipModuleLoadData(b"\x7fELF-not-really-a-code-object")
    ok(err == E.hipSuccess and mod is not None, "hipModuleLoadData(bytes)")
    err, busy = hip.hipModuleGetFunction(mod, b"busy")
    ok(err == E.hipSuccess and busy is not None, "hipModuleGetFunction(mod, b'busy')")
    ok(
        int(hip.hipModuleGetFunction(mod, "busy")[1]) == int(busy),
        "same name -> same handle (str ok)",
    )

    ok(hip.hipEventRecord(e0, s) == (E.hipSuccess,), "hipEventRecord(start, stream)")
    t_launch = time.perf_counter()
    r = hip.hipModuleLaunchKernel(busy, 2000, 1, 1, 64, 1, 1, 0, s, None, None)
    ok(
        r == (E.hipSuccess,),
        "hipModuleLaunchKernel(grid=2000 -> 2000 us, kernelParams=None, extra=None)",
    )
    hip.hipEventRecord(e1, s)
    ok(
        hip.hipEventQuery(e1) == (E.hipErrorNotReady,),
        "hipEventQuery right after launch -> NotReady",
    )
    ok(
        hip.hipStreamQuery(s) == (E.hipErrorNotReady,),
        "hipStreamQuery right after launch -> NotReady",
    )
    ok(
        hip.hipEventElapsedTime(e0, e1)[0] == E.hipErrorNotReady,
        "hipEventElapsedTime before completion -> NotReady",
    )
    while hip.hipEventQuery(e1)[0] == E.hipErrorNotReady and time.perf_counter() - t_launch < 5:
        time.sleep(0.0001)
    waited = time.perf_counter() - t_launch
    ok(hip.hipEventQuery(e1) == (E.hipSuccess,), "hipEventQuery after ~2 ms -> success")
    ok(0.0019 <= waited < 1.0, f"completion took real time ({waited * 1e3:.3f} ms)")
    err, ms = hip.hipEventElapsedTime(e0, e1)
    # The Python gap between the start record and the launch is on the device
    # clock too (as on a GPU), hence the slack above 2.0.
    ok(err == E.hipSuccess and 1.999 <= ms < 3.0, f"elapsed around the kernel = {ms:.4f} ms (~2.0)")

    # hipExtLaunchKernel enqueues record/kernel/record together: exact.
    r = hip.hipExtLaunchKernel(
        busy, hip.dim3(x=500, y=1, z=1), hip.dim3(x=64, y=1, z=1), None, 0, s, e0, e1, 0
    )
    hip.hipEventSynchronize(e1)
    err, ms = hip.hipEventElapsedTime(e0, e1)
    ok(r == (E.hipSuccess,) and abs(ms - 0.5) < 1e-3, f"hipExtLaunchKernel 500 us -> {ms:.4f} ms")
    r = hip.hipLaunchKernel(busy, hip.dim3(x=10, y=2, z=3), hip.dim3(x=1, y=1, z=1), None, 0, s)
    ok(r == (E.hipSuccess,), "hipLaunchKernel(function handle, dim3, dim3, None, 0, stream)")
    # Argument forms hip-python marshals (the double ignores the contents).
    arg = ctypes.c_int(5)
    r = hip.hipModuleLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, [ctypes.addressof(arg)], None)
    ok(r == (E.hipSuccess,), "kernelParams=[address, ...]")
    r = hip.hipModuleLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, None, (ctypes.c_void_p(0), arg))
    ok(r == (E.hipSuccess,), "extra=(ctypes values...) packed by hip-python")
    r = hip.hipModuleLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, [ctypes.addressof(arg)], (arg,))
    ok(r == (E.hipErrorInvalidValue,), "kernelParams and extra together -> InvalidValue")
    hip.hipGetLastError()

    # Handle forms hip-python accepts for streams: None / int / c_void_p.
    ok(
        hip.hipModuleLaunchKernel(busy, 100, 1, 1, 1, 1, 1, 0, None, None, None) == (E.hipSuccess,),
        "launch on stream=None",
    )
    ok(hip.hipStreamSynchronize(None) == (E.hipSuccess,), "hipStreamSynchronize(None)")
    ok(
        hip.hipModuleLaunchKernel(int(busy), 100, 1, 1, 1, 1, 1, 0, int(s), None, None)
        == (E.hipSuccess,),
        "launch with int handles",
    )
    ok(
        hip.hipStreamSynchronize(ctypes.c_void_p(int(s))) == (E.hipSuccess,),
        "hipStreamSynchronize(c_void_p)",
    )
    ok(
        hip.hipModuleLaunchKernel(busy, 0, 1, 1, 1, 1, 1, 0, s, None, None)
        == (E.hipErrorInvalidValue,),
        "grid 0 -> InvalidValue",
    )
    ok(
        hip.hipModuleLaunchKernel(12345, 1, 1, 1, 1, 1, 1, 0, s, None, None)
        == (E.hipErrorInvalidHandle,),
        "bogus function -> InvalidHandle",
    )
    ok(hip.hipEventRecord(e0, 12345) == (E.hipErrorInvalidHandle,), "bogus stream -> InvalidHandle")

    # -- events: error cases -----------------------------------------------
    _, fresh = hip.hipEventCreate()
    ok(hip.hipEventQuery(fresh) == (E.hipSuccess,), "never-recorded event: query -> success")
    ok(
        hip.hipEventElapsedTime(fresh, e1)[0] == E.hipErrorInvalidHandle,
        "never-recorded event: elapsed -> InvalidHandle",
    )
    _, notiming = hip.hipEventCreateWithFlags(hip.hipEventDisableTiming)
    hip.hipEventRecord(notiming, s)
    hip.hipEventSynchronize(notiming)
    ok(
        hip.hipEventElapsedTime(notiming, e1)[0] == E.hipErrorInvalidHandle,
        "DisableTiming event: elapsed -> InvalidHandle",
    )
    ok(hip.hipEventDestroy(fresh) == (E.hipSuccess,), "hipEventDestroy")
    ok(hip.hipEventQuery(fresh) == (E.hipErrorInvalidHandle,), "destroyed event -> InvalidHandle")

    # -- memory --------------------------------------------------------------
    nbytes = 1 << 20  # 1 MiB -> ~1049 us simulated each way at 1000 B/us
    host = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    back = np.zeros_like(host)
    err, dev = hip.hipMalloc(nbytes)
    ok(err == E.hipSuccess and dev is not None, "hipMalloc(1 MiB)")
    H2D, D2H = hip.hipMemcpyKind.hipMemcpyHostToDevice, hip.hipMemcpyKind.hipMemcpyDeviceToHost
    hip.hipEventRecord(e0, s)
    ok(
        hip.hipMemcpyAsync(dev, host, nbytes, H2D, s) == (E.hipSuccess,),
        "hipMemcpyAsync H2D (numpy src)",
    )
    ok(
        hip.hipMemcpyAsync(back, dev, nbytes, D2H, s) == (E.hipSuccess,),
        "hipMemcpyAsync D2H (numpy dst)",
    )
    hip.hipEventRecord(e1, s)
    ok(hip.hipStreamQuery(s) == (E.hipErrorNotReady,), "copies are asynchronous")
    ok(hip.hipStreamSynchronize(s) == (E.hipSuccess,), "hipStreamSynchronize")
    ok(back.tobytes() == host.tobytes(), "H2D->D2H round trip preserves bytes")
    ms = hip.hipEventElapsedTime(e0, e1)[1]
    # 2 x 1048.576 us simulated plus the real memcpy time and Python gaps.
    ok(2.097 < ms < 20.0, f"two 1 MiB copies take >= 2.097 ms ({ms:.3f} ms)")
    back[:] = 0
    ok(hip.hipMemset(dev, 7, 16) == (E.hipSuccess,), "hipMemset")
    ok(hip.hipMemcpy(back, dev, nbytes, D2H) == (E.hipSuccess,), "hipMemcpy (synchronous)")
    ok(bytes(back[:17]) == b"\x07" * 16 + bytes(host[16:17]), "hipMemset + hipMemcpy content")
    ok(hip.hipFree(dev) == (E.hipSuccess,), "hipFree")
    ok(hip.hipFree(dev) == (E.hipErrorInvalidValue,), "double hipFree -> InvalidValue")
    ok(
        hip.hipGetLastError() == (E.hipErrorInvalidValue,),
        "hipGetLastError returns the last failure",
    )
    ok(hip.hipGetLastError() == (E.hipSuccess,), "... and resets it")
    err, pinned = hip.hipHostMalloc(64, 0)
    ok(
        err == E.hipSuccess and hip.hipHostFree(pinned) == (E.hipSuccess,),
        "hipHostMalloc / hipHostFree",
    )
    err, managed = hip.hipMallocManaged(128, 1)
    ok(err == E.hipSuccess and hip.hipFree(managed) == (E.hipSuccess,), "hipMallocManaged")
    err, flagged = hip.hipExtMallocWithFlags(128, 0)
    ok(err == E.hipSuccess and hip.hipFree(flagged) == (E.hipSuccess,), "hipExtMallocWithFlags")
    err, adev = hip.hipMallocAsync(256, s)
    ok(err == E.hipSuccess and int(adev) != 0, "hipMallocAsync")
    ok(hip.hipMallocAsync(256, 12345)[0] == E.hipErrorInvalidHandle, "hipMallocAsync bad stream")
    ok(hip.hipMemsetAsync(adev, 1, 256, s) == (E.hipSuccess,), "memset before the async free")
    ok(hip.hipFreeAsync(adev, s) == (E.hipSuccess,), "hipFreeAsync")
    ok(hip.hipFreeAsync(adev, s) == (E.hipErrorInvalidValue,), "double hipFreeAsync")
    ok(hip.hipFree(adev) == (E.hipErrorInvalidValue,), "hipFree after hipFreeAsync")
    ok(hip.hipStreamSynchronize(s) == (E.hipSuccess,), "the async free ran on the stream")
    hip.hipGetLastError()

    # -- error injection -----------------------------------------------------
    n0 = calls("hipEventRecord")
    ok(
        ctl.hipdouble_fail(b"hipEventRecord", int(E.hipErrorLaunchFailure), 2) == 0,
        "hipdouble_fail(hipEventRecord, 719, 2)",
    )
    r = [hip.hipEventRecord(e0, s)[0] for _ in range(3)]
    ok(
        r == [E.hipErrorLaunchFailure, E.hipErrorLaunchFailure, E.hipSuccess],
        "injected code comes back through hip-python",
        r,
    )
    ok(calls("hipEventRecord") == n0 + 3, "hipdouble_calls counts failed calls too")
    ok(hip.hipPeekAtLastError() == (E.hipErrorLaunchFailure,), "injected error is the last error")
    hip.hipGetLastError()
    ok(ctl.hipdouble_fail(b"noSuchFunction", 1, 1) == -1, "hipdouble_fail(unknown) -> -1")
    ok(ctl.hipdouble_calls(b"noSuchFunction") == -1, "hipdouble_calls(unknown) -> -1")
    ctl.hipdouble_fail(b"hipMalloc", int(E.hipErrorOutOfMemory), -1)
    ok(
        all(hip.hipMalloc(8)[0] == E.hipErrorOutOfMemory for _ in range(3)),
        "count -1 fails every call",
    )
    ctl.hipdouble_reset()
    ok(
        hip.hipMalloc(8)[0] == E.hipSuccess and calls("hipMalloc") == 1,
        "hipdouble_reset clears injections and counts",
    )

    # -- the "hang" kernel ---------------------------------------------------
    err, hang = hip.hipModuleGetFunction(mod, "hang")
    _, eh = hip.hipEventCreate()
    ok(
        hip.hipModuleLaunchKernel(hang, 1, 1, 1, 1, 1, 1, 0, s2, None, None) == (E.hipSuccess,),
        "launch 'hang'",
    )
    hip.hipEventRecord(eh, s2)
    deadline = time.monotonic() + 5
    while ctl.hipdouble_hung() == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    ok(ctl.hipdouble_hung() == 1, "hipdouble_hung() == 1 once the worker reaches it")
    time.sleep(0.05)
    ok(hip.hipEventQuery(eh) == (E.hipErrorNotReady,), "event behind 'hang' stays NotReady")
    # hip-python 10 releases the GIL around C calls: a thread blocked in
    # hipEventSynchronize must not stop this one.
    result: list = []
    t = threading.Thread(target=lambda: result.append(hip.hipEventSynchronize(eh)))
    t.start()
    t0 = time.perf_counter()
    spins = 0
    while time.perf_counter() - t0 < 0.05:
        spins += 1
    ok(t.is_alive() and spins > 1000, "GIL is released while hipEventSynchronize blocks")
    ctl.hipdouble_release_hangs()
    t.join(5)
    ok(
        not t.is_alive() and result == [(E.hipSuccess,)],
        "hipdouble_release_hangs unblocks the waiter",
    )
    ok(
        hip.hipEventQuery(eh) == (E.hipSuccess,) and ctl.hipdouble_hung() == 0,
        "stream runs on after release",
    )

    # -- threads -------------------------------------------------------------
    errors: list = []

    def work(stream, n):
        _, a = hip.hipEventCreate()
        _, b = hip.hipEventCreate()
        for _ in range(n):
            rs = [
                hip.hipEventRecord(a, stream),
                hip.hipModuleLaunchKernel(busy, 50, 1, 1, 1, 1, 1, 0, stream, None, None),
                hip.hipEventRecord(b, stream),
            ]
            errors.extend(x for x in rs if x[0] != E.hipSuccess)
        errors.extend(x for x in [hip.hipEventSynchronize(b)] if x[0] != E.hipSuccess)
        hip.hipEventDestroy(a)
        hip.hipEventDestroy(b)

    own = [hip.hipStreamCreate()[1] for _ in range(6)]
    threads = [threading.Thread(target=work, args=(st, 20)) for st in own]
    threads += [threading.Thread(target=work, args=(s, 20)) for _ in range(4)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    ok(
        not errors and not any(th.is_alive() for th in threads),
        "10 threads x 20 launches, own and shared streams",
        errors[:3],
    )
    ok(hip.hipDeviceSynchronize() == (E.hipSuccess,), "hipDeviceSynchronize")
    ok(calls("hipModuleLaunchKernel") >= 200, "launch calls counted across threads")
    for st in own:
        hip.hipStreamDestroy(st)

    # -- destroy with pending work -------------------------------------------
    err, s3 = hip.hipStreamCreate()
    hip.hipModuleLaunchKernel(busy, 200_000, 1, 1, 1, 1, 1, 0, s3, None, None)  # 200 ms
    t0 = time.perf_counter()
    ok(
        hip.hipStreamDestroy(s3) == (E.hipSuccess,) and time.perf_counter() - t0 < 0.1,
        "hipStreamDestroy returns at once",
    )
    ok(hip.hipStreamQuery(s3) == (E.hipErrorInvalidHandle,), "destroyed stream -> InvalidHandle")
    hip.hipDeviceSynchronize()
    ok(
        time.perf_counter() - t0 >= 0.199,
        "hipDeviceSynchronize waits for the destroyed stream's work",
    )
    ok(hip.hipModuleUnload(mod) == (E.hipSuccess,), "hipModuleUnload")
    ok(
        hip.hipModuleLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, None, None)
        == (E.hipErrorInvalidHandle,),
        "function of unloaded module -> InvalidHandle",
    )
    hip.hipStreamDestroy(s)
    hip.hipStreamDestroy(s2)
    ok(
        hip.hipStreamDestroy(None) == (E.hipErrorInvalidHandle,),
        "the NULL stream cannot be destroyed",
    )

    print(f"{ok.passed} passed, {len(ok.failures)} failed")
    return 1 if ok.failures else 0


def child_hang_at_exit() -> int:
    """Leave a "hang" kernel stalled and exit: must not hang the process."""
    from hip import hip

    _, mod = hip.hipModuleLoadData(b"x")
    _, hang = hip.hipModuleGetFunction(mod, "hang")
    _, s = hip.hipStreamCreate()
    hip.hipModuleLaunchKernel(hang, 1, 1, 1, 1, 1, 1, 0, s, None, None)
    hip.hipModuleLaunchKernel(hang, 1, 1, 1, 1, 1, 1, 0, None, None, None)
    print("exiting with two stalled streams")
    return 0


def child_resolve() -> int:
    from hip import hip
    from rocm.bindings.util.paths import get_library_path

    print("resolved:", get_library_path("amdhip64").decode())
    err, name = hip.hipDeviceGetName(64, 0)
    print("device:", err.name, name)
    return 0 if err == hip.hipError_t.hipSuccess else 1


# --------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------


def run_child(mode: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, __file__, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )


def main() -> int:
    import importlib.util

    status = 0
    with tempfile.TemporaryDirectory(prefix="hipdouble-") as tmp:
        lib_dir = build(Path(tmp))
        lib = lib_dir / "libamdhip64.so"
        base = {
            k: v
            for k, v in os.environ.items()
            if k not in ("ROCM_PATH", "ROCM_HOME", "LD_LIBRARY_PATH")
        }
        base["HIPDOUBLE_LIB"] = str(lib)

        print("== library resolution")
        print("rocm_sdk importable:", importlib.util.find_spec("rocm_sdk") is not None)
        # paths.py rglobs from its own package root (rocm/ is a namespace package).
        import rocm.bindings.util.paths as paths

        root = Path(paths.__file__).parent.parent.parent
        bundled = sorted(str(p) for p in root.rglob("libamdhip64.so*"))
        print("libamdhip64.so bundled in the rocm package:", bundled or "none")
        print("/opt/rocm/lib/libamdhip64.so exists:", Path("/opt/rocm/lib/libamdhip64.so").exists())
        for label, extra in [
            ("ROCM_PATH only", {"ROCM_PATH": str(Path(tmp))}),
            ("LD_LIBRARY_PATH only", {"LD_LIBRARY_PATH": str(lib_dir)}),
            ("neither", {}),
        ]:
            proc = run_child("--resolve", {**base, **extra})
            out = (proc.stdout + proc.stderr).strip().splitlines()
            print(f"  {label:22s} rc={proc.returncode}  {' | '.join(out[-2:])}")

        print("== API checks (ROCM_PATH and LD_LIBRARY_PATH set)")
        env = {**base, "ROCM_PATH": str(Path(tmp)), "LD_LIBRARY_PATH": str(lib_dir)}
        proc = run_child("--child", env)
        print(proc.stdout, end="")
        if proc.returncode != 0:
            print(proc.stderr, end="")
            status = 1

        print("== exit with stalled 'hang' kernels")
        try:
            proc = run_child("--hang-at-exit", env)
            good = proc.returncode == 0
            print(f"  {'ok  ' if good else 'FAIL'}  rc={proc.returncode} {proc.stdout.strip()}")
        except subprocess.TimeoutExpired:
            good = False
            print("  FAIL  the process did not exit")
        status |= 0 if good else 1

    print("ALL GOOD" if status == 0 else "FAILURES")
    return status


if __name__ == "__main__":
    modes = {
        "--child": child_main,
        "--hang-at-exit": child_hang_at_exit,
        "--resolve": child_resolve,
    }
    if len(sys.argv) > 1:
        sys.exit(modes[sys.argv[1]]())
    sys.exit(main())
