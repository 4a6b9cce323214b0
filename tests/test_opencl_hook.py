"""The OpenCL dispatch-table hook (kprof_opencl/_clhook_src/): enqueues from C, through another
loader, with no event, are recorded with their events' device times, once, only while a profile
runs. The C side is tests/opencl_clib/clib.c, built here; it opens the system's OpenCL loader
(Debian's ocl-icd) where there is one, as VkFFT and CLBlast are linked to it."""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kprof
from kprof_core.host.discovery import registry
from kprof_opencl import hook

cl = pytest.importorskip("pyopencl")

import kprof_opencl  # noqa: E402

sys.path.insert(0, str(Path(__file__).with_name("opencl_clib")))
from clib import CLib, build  # noqa: E402
from plainqueue import plain_queue  # noqa: E402

N = 3
SIZE = 1024


@pytest.fixture(scope="module")
def device() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return dev


@pytest.fixture(scope="module")
def ctx(device: Any) -> Any:
    return cl.Context([device])


@pytest.fixture
def hooked() -> Any:
    mod = hook.module()
    if mod is None:
        pytest.skip("the compiled hook is not in use (KPROF_PURE_PYTHON=1 or not built)")
    if not any(p.table is not None for p in hook.survey()):
        pytest.skip("no OpenCL platform here can be hooked")
    return mod


def plain_result(clib: CLib, ctx: Any) -> Any:
    q = cl.CommandQueue(ctx)
    x, _, _ = clib.run(q.int_ptr, N, SIZE)
    return x


def rows(p: kprof.Profile, name: str) -> list[Any]:
    return [k for k in p.kernels if k.name == name]


def test_table_slots_are_the_khronos_headers(hooked: Any, tmp_path: Path) -> None:
    header = Path("/usr/include/CL/cl_icd.h")
    if not header.exists():
        pytest.skip("no CL/cl_icd.h here (apt-get install opencl-headers)")
    slots = hooked.slots()
    lines = "".join(
        f'printf("%s %zu\\n", "{n}", offsetof(cl_icd_dispatch, {n}) / sizeof(void *));'
        for n in slots
    )
    src = tmp_path / "slots.c"
    src.write_text(
        "#define CL_TARGET_OPENCL_VERSION 300\n#include <CL/cl_icd.h>\n#include <stdio.h>\n"
        f"#include <stddef.h>\nint main(void) {{ {lines} return 0; }}\n"
    )
    subprocess.run(["cc", "-o", str(tmp_path / "slots"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "slots")], capture_output=True, text=True, check=True)
    assert dict((n, int(i)) for n, i in (ln.split() for ln in out.stdout.splitlines())) == slots


def test_c_launches_with_no_event_get_device_times(hooked: Any, clib: CLib, ctx: Any) -> None:
    expected = plain_result(clib, ctx)  # OpenCL in use before the profile
    with kprof.profile() as p:
        q = clib.new_queue(cl.CommandQueue(ctx))  # the library's own queue, made in the profile
        props = clib.properties(q)
        x, _, _ = clib.run(q, N, SIZE)
    clib.release_queue(q)
    assert props & 2, "a queue created while the hook is installed gets PROFILING_ENABLE"
    assert np.array_equal(x, expected)  # bit-identical to the plain run
    kernels = rows(p, "kc_axpb")
    assert len(kernels) == N
    assert all(k.duration_ns > 0 and not k.approximate and not k.host_timed for k in kernels)
    copies = {(k.name, k.nbytes) for k in p.kernels if k.kind != "kernel"}
    assert copies == {("[copy host to device]", 4 * SIZE), ("[copy device to host]", 4 * SIZE)}
    assert len({k.thread for k in p.kernels}) == 1  # the launching (main) thread


def test_durations_are_the_events_end_minus_start(hooked: Any, clib: CLib, ctx: Any) -> None:
    with kprof.profile() as p:
        q = cl.CommandQueue(ctx)
        _, times, refs = clib.run(q.int_ptr, N, SIZE, events=True)
        # While kprof holds the launch events: one reference each, beside the library's.
        assert refs == [2] * N
    assert [k.duration_ns for k in rows(p, "kc_axpb")] == [end - start for start, end in times]
    gc.collect()
    assert hooked.stats()["events"] == 0  # every event kprof held is released


def test_pyopencl_launches_are_counted_once(hooked: Any, ctx: Any) -> None:
    prg = cl.Program(ctx, "__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2; }")
    k = prg.build().twice
    host = np.ones(SIZE, np.float32)
    before = hooked.stats()["seen"]
    with kprof.profile() as p:
        every = registry.get("opencl").state["kernels_hooked"]
        q = cl.CommandQueue(ctx)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, host.nbytes)
        cl.enqueue_copy(q, buf, host)
        for _ in range(5):
            k(q, (SIZE,), None, buf)
        cl.enqueue_fill_buffer(q, buf, np.float32(0), 0, host.nbytes)
        cl.enqueue_copy(q, host, buf)
    # The kernels through the hook where it records every one (PyOpenCL's kernel entry left as
    # it is), else through PyOpenCL's capture, which the hook leaves them to; copies always so.
    assert hooked.stats()["seen"] == before + (5 if every else 0)
    assert len(rows(p, "twice")) == 5
    assert [k.name for k in p.kernels if k.kind != "kernel"] == [
        "[copy host to device]",
        "[fill device memory]",
        "[copy device to host]",
    ]


def test_pyopencl_and_c_launches_in_one_profile(hooked: Any, clib: CLib, ctx: Any) -> None:
    prg = cl.Program(ctx, "__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2; }")
    k = prg.build().twice
    with kprof.profile() as p:
        q = cl.CommandQueue(ctx)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * SIZE)
        k(q, (SIZE,), None, buf)
        clib.run(q.int_ptr, N, SIZE)
        k(q, (SIZE,), None, buf)
    assert [r.name for r in p.kernels if r.kind == "kernel"] == ["twice", *["kc_axpb"] * N, "twice"]
    # The hook's own object over the same cl_command_queue is the same queue in the reports.
    assert {r.queue for r in p.kernels} == {q._kprof_label}
    assert len([g for g in p.analysis().queues]) <= 1


def test_a_queue_seen_through_two_objects_is_said_once_and_is_one_queue(
    hooked: Any, clib: CLib, ctx: Any
) -> None:
    prg = cl.Program(ctx, "__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2; }")
    k = prg.build().twice
    q = plain_queue(ctx)  # no profiling: made before kprof
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * SIZE)
    with pytest.warns(kprof_opencl.ProfilingDisabledWarning) as said, kprof.profile() as p:
        k(q, (SIZE,), None, buf)
        clib.run(q.int_ptr, N, SIZE)
    ours = [w for w in said if issubclass(w.category, kprof_opencl.ProfilingDisabledWarning)]
    assert len(ours) == 1
    assert len({r.queue for r in p.kernels}) == 1
    assert [r.name for r in p.kernels if r.kind == "kernel"] == ["twice", *["kc_axpb"] * N]


def test_queues_made_before_without_profiling_are_approximate(
    hooked: Any, clib: CLib, ctx: Any
) -> None:
    q = clib.new_queue(cl.CommandQueue(ctx))  # no profiling: made before the profile
    try:
        with pytest.warns(kprof_opencl.ProfilingDisabledWarning), kprof.profile() as p:
            clib.run(q, N, SIZE)
    finally:
        clib.release_queue(q)
    kernels = rows(p, "kc_axpb")
    assert len(kernels) == N and all(k.approximate for k in kernels)


def test_the_hook_is_removed_at_the_profile_end(hooked: Any, clib: CLib, ctx: Any) -> None:
    platform = next(p for p in hook.survey() if p.table is not None)
    slots = hooked.slots()

    def entries() -> dict[str, int]:
        return {
            n: ctypes.c_void_p.from_address(platform.table + 8 * i).value or 0
            for n, i in slots.items()
        }

    before = entries()
    with kprof.profile():
        during = entries()
        assert hooked.stats()["on"] == 1
    assert during != before
    assert entries() == before and hooked.stats()["on"] == 0
    seen = hooked.stats()["seen"]
    q = cl.CommandQueue(ctx)
    clib.run(q.int_ptr, N, SIZE)  # after the profile: nothing seen, nothing recorded
    mine = clib.new_queue(q)
    assert clib.properties(mine) & 2 == 0
    clib.release_queue(mine)
    assert hooked.stats()["seen"] == seen


def test_queues_made_past_pyopencls_stand_in_get_profiling_too(hooked: Any, ctx: Any) -> None:
    # PyOpenCL's own class, not the name kprof rebinds: only the hook's
    # clCreateCommandQueueWithProperties entry can add PROFILING_ENABLE (2), keeping the rest.
    real = cl._cl.CommandQueue
    out_of_order = int(cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    with kprof.profile():
        plain, ooo = real(ctx, None, 0), real(ctx, None, out_of_order)
    after = real(ctx, None, 0)
    assert (plain.properties, ooo.properties, after.properties) == (2, out_of_order | 2, 0)


def test_kernel_names_are_dropped_at_release(hooked: Any, clib: CLib, ctx: Any) -> None:
    with kprof.profile():
        q = cl.CommandQueue(ctx)
        clib.run(q.int_ptr, 1, SIZE)  # it releases its kernel at the end
        assert hooked.stats()["kernel_names"] == 0


def test_backends_says_which_mechanism_runs(device: Any) -> None:
    info = kprof.get_backend("opencl").info()
    assert info.capture_detail is not None
    if hook.module() is None:
        assert "PyOpenCL capture only" in info.capture_detail
    else:
        assert "dispatch-table hook (table in " in info.capture_detail


def test_unseen_c_work_is_said_in_the_report(
    device: Any, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A library known to launch from C is imported, and no hook can be installed.
    monkeypatch.setitem(sys.modules, "pyvkfft", type(sys)("pyvkfft"))
    monkeypatch.setattr(hook, "module", lambda: None)
    with kprof.profile() as p:
        cl.CommandQueue(ctx).finish()
    text = str(p)
    assert "kprof may have missed OpenCL work: pyvkfft launches kernels from C" in text
    assert "Build kprof's compiled parts" in text
    assert p.meta["notes"] and "PyOpenCL capture only" in p.meta["notes"][0]


def test_no_note_when_the_hook_sees_everything(
    hooked: Any, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyvkfft", type(sys)("pyvkfft"))
    with kprof.profile() as p:
        cl.CommandQueue(ctx).finish()
    assert "notes" not in p.meta and "missed" not in str(p)


def test_kprof_run_sees_a_c_library(hooked: Any, clib: CLib, tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).with_name("opencl_clib"))!r})
            import pyopencl as cl
            import kprof_opencl
            from clib import CLib
            lib = CLib({str(clib.lib._name)!r}, {clib.loader!r})
            q = cl.CommandQueue(cl.Context([kprof_opencl.default_device()]))
            lib.run(q.int_ptr, 4)
            """
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "kprof", "run", str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    device = out.stdout.split("Device-side activity:")[1]
    line = next(ln for ln in device.splitlines() if "kc_axpb" in ln)
    assert line.split()[4] == "4"  # Calls
    assert line.endswith(" kc_axpb")  # not "kc_axpb ~": the queue was made while kprof captured


# -- pyvkfft: a real library that launches from C (VkFFT, linked to the system's loader) ---------

PYVKFFT_SCRIPT = """
import numpy as np, pyopencl as cl, pyopencl.array as cla
import kprof_opencl
from pyvkfft.fft import fftn
q = cl.CommandQueue(cl.Context([kprof_opencl.default_device()]))
rng = np.random.default_rng(0)
a = (rng.standard_normal((256, 256)) + 1j * rng.standard_normal((256, 256))).astype(np.complex64)
d = cla.to_device(q, a)
for _ in range(5):
    r = fftn(d)
np.save({out!r}, r.get())
"""


@pytest.fixture(scope="module")
def pyvkfft() -> Any:
    try:
        import pyvkfft.fft
    except ImportError as exc:
        if os.environ.get("KPROF_REQUIRE_PYVKFFT"):
            raise
        pytest.skip(f"pyvkfft is not installed ({exc}); see .ci/run")
    return pyvkfft.fft


def test_pyvkfft_ffts_are_timed_in_a_profile_entered_later(
    hooked: Any, pyvkfft: Any, ctx: Any
) -> None:
    import pyopencl.array as cla

    q = cl.CommandQueue(ctx)
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((256, 256)) + 1j * rng.standard_normal((256, 256))).astype(
        np.complex64
    )
    expected = pyvkfft.fftn(cla.to_device(q, a)).get()  # OpenCL (and VkFFT) used before
    with kprof.profile() as p:
        q2 = cl.CommandQueue(ctx)
        d = cla.to_device(q2, a)
        for _ in range(5):
            r = pyvkfft.fftn(d)
        out = r.get()
    assert np.array_equal(out, expected)
    ffts = [k for k in p.kernels if k.name.startswith("VkFFT")]
    assert ffts and len(ffts) % 5 == 0  # every FFT's kernels, the same number per FFT
    assert all(k.duration_ns > 0 and not k.approximate and not k.host_timed for k in ffts)
    assert [k.name for k in p.kernels if k.kind != "kernel"] == [
        "[copy host to device]",
        "[copy device to host]",
    ]  # PyOpenCL's copies, once each


def test_pyvkfft_under_kprof_run(hooked: Any, pyvkfft: Any, tmp_path: Path) -> None:
    script = tmp_path / "fft.py"
    plain, profiled = tmp_path / "plain.npy", tmp_path / "profiled.npy"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    script.write_text(PYVKFFT_SCRIPT.format(out=str(plain)))
    subprocess.run([sys.executable, str(script)], check=True, env=env, timeout=300)
    script.write_text(PYVKFFT_SCRIPT.format(out=str(profiled)))
    out = subprocess.run(
        [sys.executable, "-m", "kprof", "run", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert np.array_equal(np.load(plain), np.load(profiled))
    device = out.stdout.split("Device-side activity:")[1]
    line = next(ln for ln in device.splitlines() if "VkFFT" in ln)
    assert int(line.split()[4]) % 5 == 0 and not line.endswith(" ~")


# -- the fallback: kprof's interposer, preloaded by `kprof run` ------------------------------------

PRELOAD_APP = """
import sys
sys.path.insert(0, {folder!r})
import numpy as np, pyopencl as cl
import kprof_opencl
from clib import CLib
lib = CLib({so!r}, {loader!r})
ctx = cl.Context([kprof_opencl.default_device()])
q = cl.CommandQueue(ctx)
prg = cl.Program(ctx, "__kernel void twice(__global float *a) {{ a[get_global_id(0)] *= 2; }}")
k = prg.build().twice
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096)
k(q, (1024,), None, buf)
x, _, _ = lib.run(q.int_ptr, 4)
np.save({out!r}, x)
"""


@pytest.fixture(scope="module")
def linked_clib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    so = build(tmp_path_factory.mktemp("clib_linked"), linked=True)
    if so is None:
        pytest.skip("no C compiler or no libOpenCL.so to link with (ocl-icd-opencl-dev)")
    return so


@pytest.fixture
def preload_built(hooked: Any) -> str:
    lib = hook.preload_library()
    if lib is None:
        pytest.skip("kprof's interposer (_clpreload) is not built")
    return lib


def test_kprof_run_preloads_the_interposer_where_the_table_is_not_hooked(
    preload_built: str, linked_clib: Path, clib: CLib, tmp_path: Path
) -> None:
    # KPROF_OPENCL_HOOK=preload refuses the table hook, as a read-only table would.
    out = tmp_path / "x.npy"
    script = tmp_path / "app.py"
    script.write_text(
        PRELOAD_APP.format(
            folder=str(Path(__file__).with_name("opencl_clib")),
            so=str(linked_clib),
            loader=clib.loader,
            out=str(out),
        )
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore", hook.ENV_HOOK: "preload"}
    env.pop("LD_PRELOAD", None)
    ran = subprocess.run(
        # Named: started with the program (a backend started at its library's import is too
        # late for a preload; test_run_lazy_start checks that the report says so).
        [sys.executable, "-m", "kprof", "run", "--backends", "opencl", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    device = ran.stdout.split("Device-side activity:")[1]
    calls = {ln.split()[-1]: ln.split()[4] for ln in device.splitlines() if "%" in ln}
    assert calls["kc_axpb"] == "4" and calls["twice"] == "1"  # C's seen, PyOpenCL's once
    assert not device.count(" ~")  # its queue was made while kprof captured: exact times
    profiled = np.load(out)
    subprocess.run([sys.executable, str(script)], check=True, env=env, timeout=300)
    assert np.array_equal(np.load(out), profiled)  # bit-identical to a plain run


def test_backends_says_when_the_interposer_is_needed(
    preload_built: str, device: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hook.ENV_HOOK, "preload")
    [platform] = [p for p in hook.survey() if p.title == "PoCL"] or [None]
    if platform is None:
        pytest.skip("no PoCL platform")
    assert platform.table is None
    assert platform.why == (
        "PyOpenCL capture only (table hook off (KPROF_OPENCL_HOOK=preload)); "
        "`kprof run` preloads kprof's interposer"
    )
    before = os.environ.get("LD_PRELOAD")
    want = f"{preload_built}:{before}" if before else preload_built
    assert hook.exec_environment() == {"LD_PRELOAD": want}


def test_without_the_interposer_c_work_is_unseen_and_said(
    preload_built: str, clib: CLib, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hook.ENV_HOOK, "preload")
    monkeypatch.setitem(sys.modules, "pyvkfft", type(sys)("pyvkfft"))
    with kprof.profile() as p:
        q = cl.CommandQueue(ctx)
        clib.run(q.int_ptr, N, SIZE)
    assert not rows(p, "kc_axpb")  # not hooked, not preloaded: invisible...
    assert "Run the program under `kprof run`" in str(p)  # ...and the report says so


def test_a_handles_label_is_forgotten_when_its_last_object_dies(ctx: Any) -> None:
    from kprof_opencl import queues

    q = cl.CommandQueue(ctx)
    handle = q.int_ptr
    twin = cl.CommandQueue.from_int_ptr(handle, retain=True)
    label = queues.queue_label(q)
    assert queues.queue_label(twin) == label and queues._by_handle[handle] == [label, 2]
    del q
    gc.collect()
    assert queues._by_handle[handle] == [label, 1]  # the twin still holds the queue
    del twin
    gc.collect()
    # The handle may now be reused by a new queue, which must get a number of its own.
    assert handle not in queues._by_handle
