"""Launch sites and stacks on code kprof's authors did not write: a reikna FFT, a loopy
kernel, and PyOpenCL's own examples. Each kernel's site must be the user's line (the call
into the library), never reikna's, loopy's or PyOpenCL's, on both recorder paths.

reikna and loopy are optional (``pip install reikna loopy``): their tests skip without them.
PyOpenCL's examples are not shipped with PyOpenCL: point ``PYOPENCL_EXAMPLES`` at a checkout's
``examples/`` directory to run them (the test skips otherwise)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.data.stacks import frames_of
from kprof_core.low_level import native

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")
np = pytest.importorskip("numpy")

import kprof_opencl  # noqa: E402

HERE = str(Path(__file__))


@pytest.fixture(scope="module")
def queue() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return kprof_opencl.profiling_queue(dev)


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def line_of(fn: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


def run_fft(fft: Any, out: Any, data: Any) -> None:
    fft(out, data)  # the FFT's line


def test_a_reikna_fft_is_the_users_line(path: str, queue: Any) -> None:
    pytest.importorskip("reikna")
    from reikna.cluda import ocl_api
    from reikna.fft import FFT

    thr = ocl_api().Thread(queue)
    data = thr.to_device(np.arange(256, dtype=np.complex64))
    out = thr.empty_like(data)
    fft = FFT(data).compile(thr)
    run_fft(fft, out, data)  # compiled and warmed up outside the profile
    thr.synchronize()
    with kprof.profile(stacks=True) as p:
        run_fft(fft, out, data)
        thr.synchronize()
    assert [k.name for k in p.kernels] == ["kernel_fft"]  # reikna's one kernel for 256
    want = line_of(run_fft, "the FFT's line")
    assert {(k.site.file, k.site.line) for k in p.kernels if k.site} == {(HERE, want)}
    assert all(k.site is not None for k in p.kernels)
    stack = frames_of(p, "device", 0)
    assert (stack[-1].function, stack[-2].function) == (
        "run_fft",
        "test_a_reikna_fft_is_the_users_line",
    )


@pytest.mark.filterwarnings("ignore")  # loopy's "uncached call" advice
def test_a_loopy_kernel_is_the_users_line(path: str, queue: Any) -> None:
    lp = pytest.importorskip("loopy")
    knl = lp.make_kernel("{ [i]: 0<=i<n }", "out[i] = 2*a[i]", lang_version=(2018, 2))
    a = cla.to_device(queue, np.arange(100, dtype=np.float32))
    knl(queue, a=a)  # compiled outside the profile
    queue.finish()
    with kprof.profile(sites=True) as p:
        _evt, (out,) = knl(queue, a=a)  # loopy's launch
        queue.finish()
    want = line_of(test_a_loopy_kernel_is_the_users_line, "loopy's launch")
    kernels = [k for k in p.kernels if k.kind == "kernel"]
    assert kernels and {(k.site.file, k.site.line) for k in kernels if k.site} == {(HERE, want)}
    assert all(k.site is not None for k in p.kernels)
    assert np.allclose(out.get(), 2 * np.arange(100))


EXAMPLES = os.environ.get("PYOPENCL_EXAMPLES", "")


@pytest.mark.skipif(not EXAMPLES, reason="set PYOPENCL_EXAMPLES to PyOpenCL's examples/ directory")
@pytest.mark.parametrize("example", ["demo.py", "demo_elementwise.py", "demo_array.py"])
def test_pyopencls_examples_are_their_own_lines(queue: Any, example: str, tmp_path: Path) -> None:
    script = Path(EXAMPLES) / example
    if not script.is_file():
        pytest.skip(f"{script} is not there")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env.setdefault("PYOPENCL_CTX", "0")
    out = tmp_path / "p.kprof"
    r = subprocess.run(
        [sys.executable, "-m", "kprof", "run", "--stacks", "-o", str(out), str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    p = kprof.load(out)
    assert p.kernels
    lines = script.read_text().splitlines()
    for k in p.kernels:
        assert k.site is not None and k.site.file == str(script), (k.name, k.site)
        assert k.site.function == "<module>"
        assert lines[k.site.line - 1].strip(), (k.name, k.site)  # a line of the example's code
    for i in range(len(p.table)):
        assert frames_of(p, "device", i)[0].file == str(script)  # no runner frame above
