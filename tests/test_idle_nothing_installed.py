"""Outside a profile, nothing of kprof is installed (issue 28's idle claim): no library
function replaced, no ICD dispatch-table entry, no profile or trace hook, no thread, no import
hook. Checked in a fresh process, before ``import kprof`` and after profiles came and went
(capture installed and removed), on both recorder paths. The one exception is by design
(issue 35): ``pyopencl.CommandQueue`` creates queues with profiling from ``import kprof`` on,
so that queues made before a profile are timed exactly; ``disable_profiling()`` puts it back.
While a queue kprof changed lives, its class answers ``properties`` without kprof's bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_CHILD = r"""
import ctypes, gc, json, signal, sys, threading
import pyopencl as cl
import pyopencl.array  # noqa: F401 (its functions are patched too)

def attrs(names):
    # Every attribute of PyOpenCL's modules and of their classes, by identity (the modules
    # imported at the start only: PyOpenCL imports more of its own as it is used).
    out = {}
    for mname in names:
        mod = sys.modules[mname]
        for k, v in list(vars(mod).items()):
            if isinstance(v, type(sys)):
                continue  # a submodule, set on its package when PyOpenCL imports it
            out[f'{mname}.{k}'] = id(v)
            if isinstance(v, type) and v.__module__.startswith('pyopencl'):
                for ck, cv in list(vars(v).items()):
                    out[f'{mname}.{k}.{ck}'] = id(cv)
    return out

def tables(mod):
    # The first 256 pointers of each platform's ICD dispatch table (the hook swaps entries).
    if mod is None:
        return {}
    return {p.name: [ctypes.c_void_p.from_address(mod.table_address(p.int_ptr) + 8 * i).value
                     for i in range(256)] for p in cl.get_platforms()}

def hooks():
    return {
        'profile': repr(sys.getprofile()), 'trace': repr(sys.gettrace()),
        'thread_profile': repr(threading.getprofile()), 'thread_trace': repr(threading.gettrace()),
        'meta_path': [repr(f) for f in sys.meta_path], 'path_hooks': [repr(h) for h in sys.path_hooks],
        'excepthook': repr(sys.excepthook), 'thread_excepthook': repr(threading.excepthook),
        'gc_callbacks': [repr(c) for c in gc.callbacks],
        'signals': {s.name: repr(signal.getsignal(s)) for s in signal.valid_signals()
                    if isinstance(s, signal.Signals)},
        'threads': sorted(t.name for t in threading.enumerate()),
    }

modules = [m for m in sys.modules if m == 'pyopencl' or m.startswith('pyopencl.')]
before_attrs = attrs(modules)
from kprof_opencl import hook
before_tables = tables(hook.module())
before_hooks = hooks()

import kprof
import kprof_opencl
from kprof_core.profiler import capture_installed
for b in kprof.backends():
    b.info()
dev = kprof_opencl.default_device()
ctx = cl.Context([dev])
prg = cl.Program(ctx, "__kernel void k(__global float *x){ x[get_global_id(0)] += 1.0f; }").build()
for _ in range(2):
    with kprof.profile() as p:
        q = cl.CommandQueue(ctx)  # made while capturing: profiled
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 256)
        with kprof.range('r'):
            prg.k(q, (64,), None, buf)
        a = cl.array.zeros(q, 64, 'float32') + 1
        cl.enqueue_copy(q, bytearray(256), buf)
        q.finish()
    assert len(p.kernels) >= 2, p.kernels
# A queue made outside any profile, used inside one: its launches are watched on the host
# (a watcher thread while they are pending).
kprof_opencl.disable_profiling()
outside = cl.CommandQueue(ctx)
kprof_opencl.enable_profiling()
with kprof.profile() as p:
    prg.k(outside, (64,), None, buf)
    outside.finish()
default = (kprof_opencl.profiling_enabled(), isinstance(outside, cl.CommandQueue))
# The queues kprof changed: with them goes the answer for their properties. The thread's current
# queue for kprof.range (the one it last launched on) holds one too: let it go.
kprof_opencl.use_queue(None)
del q, a, outside
gc.collect()
threading.Event().wait(0.5)  # a watcher thread that is ending: give it the time to end
kprof_opencl.disable_profiling()  # the one thing kprof keeps bound outside a profile

print(json.dumps({
    'capture_installed': capture_installed(),
    'default': default,
    'attrs_changed': sorted(k for k, v in attrs(modules).items() if before_attrs.get(k, v) != v),
    'attrs_added': sorted(set(attrs(modules)) - set(before_attrs)),
    'tables_same': tables(hook.module()) == before_tables,
    'hooks_before': before_hooks,
    'hooks_after': hooks(),
}))
"""


@pytest.fixture(scope="module")
def opencl_device() -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_after_profiles_nothing_of_kprof_stays_installed(
    opencl_device: None, tmp_path: Path, pure: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    ran = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "KPROF_PURE_PYTHON": pure},
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert got["capture_installed"] is False
    assert got["default"] == [True, True]  # queues profile by default; isinstance holds
    assert got["attrs_changed"] == []  # every patched function put back
    assert got["attrs_added"] == []
    assert got["tables_same"] is True  # every dispatch-table entry put back
    before, after = got["hooks_before"], got["hooks_after"]
    assert after["profile"] == after["trace"] == "None"
    assert after["thread_profile"] == after["thread_trace"] == "None"
    assert after == before, {k: (before[k], after[k]) for k in after if after[k] != before[k]}
