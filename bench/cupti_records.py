"""Host cost of kprof's CUPTI path per launch, measured against the CUPTI test double.

What it measures is kprof's and cupti-python's side only (no GPU): turning CUPTI's buffers
into Python records (cupti-python), decoding them into DeviceRecords and handing them to the
profile (kprof_cuda.activity), and the harvest making rows. Each launch is three records
(external correlation, driver API, kernel), as on a GPU. The double's own cost (writing
records) is measured apart and left out.

    python tests/cupti_double/build.py /tmp/cuptidouble && python bench/cupti_records.py /tmp/cuptidouble
"""

from __future__ import annotations

import ctypes
import glob
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ["KPROF_DISABLE_PLUGIN_AUTOLOAD"] = "1"
LIBDIR = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/cuptidouble")
ctypes.CDLL(str(LIBDIR / "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(glob.glob(str(LIBDIR / "libcupti.so.*"))[0], mode=ctypes.RTLD_GLOBAL)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import kprof  # noqa: E402
from kprof_core.host.discovery import registry  # noqa: E402
from kprof_cuda import activity  # noqa: E402
from kprof_cuda.plugin import CudaPlugin  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from cupti import cupti
import test_cuda_fake as tcf  # noqa: E402

u32, u64, i32 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32
lib.cuptidouble_api.restype = u32
lib.cuptidouble_api.argtypes = [ctypes.c_int, u32, u64, u64]
lib.cuptidouble_kernel.argtypes = [u32, ctypes.c_char_p, u32, u32, u32] + [i32] * 6 + [u64, u64]
LAUNCH = int(cupti.driver_api_trace_cbid.cuLaunchKernel)
N = 100_000


def emit(n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        c = lib.cuptidouble_api(0, LAUNCH, i, i + 1)
        lib.cuptidouble_kernel(c, b"_Z6kernelPfi", 0, 1, 13, 1, 1, 1, 128, 1, 1, i + 2, i + 3)
    return time.perf_counter() - t0


def one_run() -> tuple[float, float]:
    registry.reset()
    fake = tcf.FakeCuda(1)
    sys.modules[tcf.MODULE] = tcf.fake_cupy_module(fake)
    kprof.register_backend(
        CudaPlugin(api=lambda: fake, module=tcf.MODULE, describe=tcf._available, nvtx=lambda: None),
        "cuda",
    )
    activity.BUFFER_SIZE = 1 << 27  # everything stays in one buffer until the flush
    with kprof.profile() as p:
        emit_s = emit(N)
        t0 = time.perf_counter()
    end_s = time.perf_counter() - t0  # flush, decode, deliver, harvest, place
    assert len(p.kernels) == N
    fake.close()
    return emit_s, end_s


def main() -> None:
    runs = [one_run() for _ in range(3)]
    emit_us = statistics.median(r[0] for r in runs) / N * 1e6
    end_us = statistics.median(r[1] for r in runs) / N * 1e6
    print(f"{N} launches (3 CUPTI records each), median of 3 runs:")
    print(f"  double writing the records (not kprof):     {emit_us:.2f} µs per launch")
    print(f"  cupti-python + kprof, buffer to placed row: {end_us:.2f} µs per launch")


if __name__ == "__main__":
    main()
