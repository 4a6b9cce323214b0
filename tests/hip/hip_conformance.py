"""kprof.testing's conformance kit on the HIP backend, against the HIP test double.

Run in a child process whose ROCM_PATH is the double (see test_hip_conformance.py): not named
``test_*.py``, so the pytest process itself never collects it (it would call into HIP).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Any

from hip import hip

import kprof_hip
from kprof.testing import BackendConformance

_ctl = ctypes.CDLL(os.path.join(os.environ["ROCM_PATH"], "lib", "libamdhip64.so"))


def _ok(result: tuple[Any, ...]) -> Any:
    assert result[0] == hip.hipError_t.hipSuccess, result
    return result[1] if len(result) == 2 else result[1:] or None


class TestHipConformance(BackendConformance):
    backend_name = "hip"
    records_per_step = 2
    rerecord_supersedes = True  # a hipEvent recorded again reports its newest record only

    def make_workload(self, backend: Any) -> Callable[[], Any]:
        self.stream = s = _ok(hip.hipStreamCreate())
        module = _ok(hip.hipModuleLoadData(b"any code object"))
        mul2 = kprof_hip.name_function(_ok(hip.hipModuleGetFunction(module, b"mul2")), "mul2")
        add = kprof_hip.name_function(_ok(hip.hipModuleGetFunction(module, b"add")), "add")
        self.hang = _ok(hip.hipModuleGetFunction(module, b"hang"))

        def step() -> None:  # two kernels of 50 and 80 µs on the double
            _ok(hip.hipModuleLaunchKernel(mul2, 50, 1, 1, 64, 1, 1, 0, s, None, None))
            _ok(hip.hipModuleLaunchKernel(add, 80, 1, 1, 64, 1, 1, 0, s, None, None))

        return step

    def queue_context(self) -> Any:
        return kprof_hip.use_stream(self.stream)

    def stall(self) -> Callable[[], None]:
        _ok(hip.hipModuleLaunchKernel(self.hang, 1, 1, 1, 1, 1, 1, 0, self.stream, None, None))
        return _ctl.hipdouble_release_hangs  # type: ignore[no-any-return]
