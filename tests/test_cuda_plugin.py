"""The CUDA plugin on a machine without a GPU: it loads, describes itself honestly, breaks
nothing; plus its kernel wrapper, its patching of the real CuPy, and the core's range hooks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
import kprof_cuda
from kprof_core.host.discovery import ENV_DISABLE_AUTOLOAD, ENV_PLUGINS, registry

cupy = pytest.importorskip("cupy")
HAS_GPU = cupy.cuda.is_available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the no-device report; a GPU is present")


def run_py(code: str, env_extra: dict[str, str] | None = None) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env.update(env_extra or {})
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def only_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[kprof.plugin.Backend]:
    monkeypatch.delenv(ENV_DISABLE_AUTOLOAD, raising=False)
    monkeypatch.setenv(ENV_PLUGINS, "cuda")
    registry.reset()
    yield kprof.get_backend("cuda")
    registry.reset()


def test_importing_the_plugin_imports_no_cuda_library() -> None:
    out = run_py("""
        import sys, kprof_cuda, kprof_cuda.plugin
        print(sorted(m for m in sys.modules if m.startswith(("cupy", "cupy_backends", "cupti",
                                                             "cuda"))))
    """)
    assert out.strip() == "[]"


def test_describing_imports_cupy_backends_but_not_cupy() -> None:
    # 'cupy' in sys.modules is how the plugin knows the program uses CuPy: describing must
    # not put it there.
    out = run_py(
        """
        import sys, kprof
        info = kprof.get_backend("cuda").info()
        print(info.library, "cupy" in sys.modules)
    """,
        {"KPROF_PLUGINS": "cuda"},
    )
    assert out.split() == ["cupy", "False"]


def test_the_plugin_implements_every_hook_it_needs(only_cuda: kprof.plugin.Backend) -> None:
    b = only_cuda
    assert b.has_timestamps and b.mirrors_ranges
    assert {
        "describe_backend",
        "record_timestamp",
        "elapsed_time",
        "timestamp_done",
        "release_timestamp",
        "current_queue",
        "queue_info",
        "synchronize",
        "align_clock",
        "install_capture",
        "remove_capture",
        "range_push",
        "range_pop",
        "demo_workload",
        "activity_scope_enter",
        "activity_scope_exit",
        "activity_flush",
        "activity_align",
    } <= b.implemented
    assert b.has_activity


@no_gpu_only
def test_no_device_is_reported_with_the_cuda_error(only_cuda: kprof.plugin.Backend) -> None:
    from cupy_backends.cuda.api import runtime

    info = only_cuda.info()
    assert (info.status, info.library, info.library_version) == (
        "no device",
        "cupy",
        cupy.__version__,
    )
    assert info.devices == () and info.timestamps
    try:
        runtime.getDeviceCount()
    except runtime.CUDARuntimeError as exc:
        expected = str(exc)
    assert info.detail == expected
    assert info.detail.startswith(("cudaErrorInsufficientDriver: ", "cudaErrorNoDevice: "))


def test_no_device_error_is_reported_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from cupy_backends.cuda.api import runtime

    from kprof_cuda.api import describe

    def no_device() -> int:
        raise runtime.CUDARuntimeError(100)

    monkeypatch.setattr(runtime, "getDeviceCount", no_device)
    info = describe()
    assert info.status == "no device"
    assert info.detail == "cudaErrorNoDevice: no CUDA-capable device is detected"


def test_devices_are_listed_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    from cupy_backends.cuda.api import runtime

    from kprof_cuda.api import describe

    monkeypatch.setattr(runtime, "getDeviceCount", lambda: 2)
    monkeypatch.setattr(runtime, "getDeviceProperties", lambda i: {"name": b"NVIDIA H200"})
    monkeypatch.setattr(runtime, "runtimeGetVersion", lambda: 12090)
    monkeypatch.setattr(runtime, "driverGetVersion", lambda: 13000)
    info = describe()
    assert info.status == "available"
    assert info.devices == ("CUDA 0 (NVIDIA H200)", "CUDA 1 (NVIDIA H200)")
    assert info.detail == "CUDA runtime 12.9, driver 13.0"


def test_not_installed_when_cupy_cannot_be_imported() -> None:
    out = run_py(
        """
        import sys, json
        sys.modules["cupy"] = None  # what a missing package looks like to the import system
        sys.modules["cupy_backends"] = None
        import kprof
        from kprof_core.cli.main import main
        info = kprof.get_backend("cuda").info()
        print(json.dumps([info.status, info.library, info.library_version]))
        main(["backends"])
    """,
        {"KPROF_PLUGINS": "cuda"},
    )
    first, *table = out.splitlines()
    assert json.loads(first) == ["not installed", "cupy", None]
    [row] = [line for line in table if line.startswith("cuda")]
    assert "cupy (not installed)" in row and "  not installed (CuPy is not installed: pip" in row


@no_gpu_only
def test_kprof_backends_says_cupy_is_installed_and_why_there_is_no_device() -> None:
    out = run_py("""
        from kprof_core.cli.main import main
        main(["backends", "--json"])
    """)
    [row] = [r for r in json.loads(out) if r["name"] == "cuda"]
    assert (row["status"], row["library"], row["library_version"]) == (
        "no device",
        "cupy",
        cupy.__version__,
    )
    assert row["detail"].startswith("cudaError")
    assert row["timestamps"] == "device"
    # Which capture path, and why: no driver here, so CUPTI cannot load and events are used.
    assert row["capture"] == "CUDA events"
    assert row["capture_detail"].startswith(
        "no CUDA driver (libcuda.so.1 cannot be loaded): CUPTI needs one"
    )


@no_gpu_only
def test_kprof_backends_table_says_which_capture_path_and_why() -> None:
    out = run_py(
        """
        from kprof_core.cli.main import main
        main(["backends"])
    """,
        {"KPROF_PLUGINS": "cuda"},
    )
    assert (
        "cuda captures with CUDA events: no CUDA driver (libcuda.so.1 cannot be loaded): "
        "CUPTI needs one" in out
    )


def test_capture_path_without_libcupti(monkeypatch: pytest.MonkeyPatch) -> None:
    """libcupti not found: events, and the install command that brings it."""
    from kprof_cuda import cupti_lib
    from kprof_cuda.activity import CuptiActivity
    from kprof_cuda.plugin import CudaPlugin

    monkeypatch.setattr(cupti_lib, "_driver_missing", lambda: None)
    monkeypatch.setattr(cupti_lib, "_loaded", lambda: None)
    monkeypatch.setattr(cupti_lib, "_wheel_paths", lambda: [])
    monkeypatch.setattr(cupti_lib, "_system_paths", lambda: [])
    monkeypatch.setattr(cupti_lib, "SONAMES", ("libcupti.so.no-such-version",))
    plugin = CudaPlugin(activity=lambda p: CuptiActivity(p.queues.cupti_queue))
    path, why = plugin.capture_path()
    assert path == "CUDA events"
    assert why.startswith(
        "libcupti was not found (pip install 'kprof[cuda]' for CUDA 12 or 'kprof[cuda13]'"
    ), why


def test_libcupti_older_than_cuda_12_6_is_refused() -> None:
    """cuptiGetVersion is checked at load: kprof reads CUDA 12.6+ record layouts only."""
    from kprof_cuda import cupti_lib

    class Old:
        path, api_version = "/x/libcupti.so.11", 18

    with pytest.raises(cupti_lib.CuptiUnavailable, match="CUPTI API version 18, older than"):
        cupti_lib._checked(Old())  # type: ignore[arg-type]


@no_gpu_only
def test_profiling_with_cupy_but_no_device_records_nothing_from_cuda(
    only_cuda: kprof.plugin.Backend,
) -> None:
    import cupy  # noqa: F401 - the program uses CuPy

    calls = []

    def work() -> int:
        calls.append(1)
        return 7

    k = kprof_cuda.kernel(work)
    with kprof.profile() as p:
        with kprof.range("step"):
            assert k() == 7
    assert p.backends == [] and calls == [1]
    assert [r.name for r in p.ranges] == ["step"]
    assert all(x.backend != "cuda" for x in p.kernels + p.device_ranges)
    assert kprof_cuda.pool_stats().created == 0


# -- kprof_cuda.kernel --------------------------------------------------------------------------


def test_kernel_names_cupy_kernels_by_their_function_name() -> None:
    raw = cupy.RawKernel('extern "C" __global__ void spin_k() {}', "spin_k")  # compiled lazily
    ew = cupy.ElementwiseKernel("float32 x", "float32 y", "y = x", "copy_k")
    assert kprof_cuda.kernel(raw).__kprof_name__ == "spin_k"  # type: ignore[attr-defined]
    assert kprof_cuda.kernel(ew).__kprof_name__ == "copy_k"  # type: ignore[attr-defined]
    assert kprof_cuda.kernel(raw, "mine").__kprof_name__ == "mine"  # type: ignore[attr-defined]

    def step() -> None:
        pass

    assert kprof_cuda.kernel(step).__kprof_name__ == "step"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="wraps a CuPy kernel or a callable"):
        kprof_cuda.kernel(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        kprof_cuda.kernel(step, "")


def test_kernel_calls_through_outside_a_profile() -> None:
    seen = []
    k = kprof_cuda.kernel(lambda *a, **kw: seen.append((a, kw)) or "r", "k")
    assert k(1, x=2) == "r" and seen == [((1,), {"x": 2})]


# -- patching the real CuPy ---------------------------------------------------------------------


def test_copy_capture_patches_real_cupy_and_restores_it_exactly() -> None:
    from kprof_cuda.plugin import CudaPlugin

    nd = cupy.ndarray
    before = dict(vars(nd))
    funcs = (cupy.asarray, cupy.array)

    def call_get(obj: Any) -> str:
        try:
            nd.get(obj)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "no error"

    native_error = call_get(object())
    plugin = CudaPlugin(api=lambda: object(), nvtx=lambda: None)
    backend = kprof.plugin.Backend("cudatest", plugin)
    plugin.install_capture(backend)
    try:
        assert "get" in vars(nd) and "set" in vars(nd)  # overridden on the Python subclass
        assert cupy.asarray is not funcs[0] and cupy.asarray.__wrapped__ is funcs[0]
        # Outside a profile the wrappers call the very same method: same outcome.
        assert call_get(object()) == native_error
        assert nd.get.__doc__ == nd.__mro__[1].get.__doc__
    finally:
        plugin.remove_capture(backend)
    assert dict(vars(nd)) == before
    assert (cupy.asarray, cupy.array) == funcs
    assert cupy.asarray is funcs[0] and cupy.array is funcs[1]


def test_capture_is_skipped_when_the_program_has_not_imported_cupy() -> None:
    from kprof_cuda.plugin import CudaPlugin

    plugin = CudaPlugin(module="kprof_not_imported_module", nvtx=lambda: None)
    backend = kprof.plugin.Backend("cudatest", plugin)
    plugin.install_capture(backend)
    assert plugin._patcher is None and plugin.api is None
    assert plugin.current_queue(backend) is None and plugin.record_timestamp(backend) is None
    plugin.remove_capture(backend)


# -- the core's range hooks, which the plugin's NVTX support uses --------------------------------


class Mirror:
    """A backend with a queue but no timestamps, that mirrors ranges."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.fail = fail

    @kprof.plugin.hookimpl
    def current_queue(self, backend: kprof.plugin.Backend) -> Any:
        return "q"

    @kprof.plugin.hookimpl
    def range_push(self, backend: kprof.plugin.Backend, name: str) -> None:
        if self.fail:
            raise RuntimeError("nvtx broke")
        self.calls.append(("push", name, threading.current_thread().name))

    @kprof.plugin.hookimpl
    def range_pop(self, backend: kprof.plugin.Backend) -> None:
        self.calls.append(("pop", threading.current_thread().name))

    @kprof.plugin.hookimpl
    def synchronize(self, backend: kprof.plugin.Backend, queue: Any) -> None:
        self.calls.append(("sync",))


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ENV_PLUGINS, raising=False)
    monkeypatch.setenv(ENV_DISABLE_AUTOLOAD, "1")
    registry.reset()
    yield
    registry.reset()


def test_range_hooks_bracket_ranges_and_kernel_calls(bare: None) -> None:
    m = Mirror()
    b = kprof.register_backend(m, "mirror")
    assert b.mirrors_ranges
    k = kprof.kernel(lambda: None, "kern")
    with kprof.profile() as p:
        with kprof.range("outer"):
            k()
    main = threading.current_thread().name
    # push before the range's (host-timed) work is synchronized, pop after
    assert m.calls == [
        ("push", "outer", main),
        ("push", "kern", main),
        ("sync",),
        ("pop", main),
        ("sync",),
        ("pop", main),
    ]
    assert sorted(r.name for r in p.device_ranges) == ["outer"]
    m.calls.clear()
    with kprof.range("outside"):  # no profile: nothing is asked of any backend
        pass
    assert m.calls == []


def test_backends_without_range_hooks_are_not_asked(bare: None) -> None:
    class Plain:
        @kprof.plugin.hookimpl
        def current_queue(self, backend: kprof.plugin.Backend) -> Any:
            return "q"

    b = kprof.register_backend(Plain(), "plain")
    assert not b.mirrors_ranges
    with kprof.profile() as p, kprof.range("r"):
        pass
    assert [r.name for r in p.device_ranges] == ["r"]


def test_a_failing_range_push_disables_the_backend_not_the_range(bare: None) -> None:
    m = Mirror(fail=True)
    b = kprof.register_backend(m, "mirror")
    with (
        pytest.warns(RuntimeWarning, match="range_push raised RuntimeError: nvtx broke"),
        kprof.profile() as p,
        kprof.range("r"),
    ):
        pass
    assert b.broken is not None
    assert [r.name for r in p.ranges] == ["r"] and p.device_ranges == []
    assert m.calls == []


def test_cupti_kernel_names_are_demangled() -> None:
    from kprof_cuda.cupti_records import demangle

    assert demangle("_Z5scaleIfEvPT_S0_i") == "void scale<float>(float*, float, int)"
    assert (
        demangle("cupy_multiply__float32_float_float32") == "cupy_multiply__float32_float_float32"
    )
    assert demangle("_Znot a name") == "_Znot a name"  # what cannot be demangled stays as is
