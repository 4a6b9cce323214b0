"""Windows of steps (issue 22): ``kprof.schedule``, ``kprof.step()``, ``profile(schedule=...)``
and ``kprof run --steps``, on the test device and PoCL's CPU OpenCL device, on both recorder
paths. Every number asserted is a count or a step index: deterministic."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core import profiler
from kprof_core.low_level import native
from kprof_core.windows import NONE, RECORD, RECORD_AND_SAVE, WARMUP, steps_schedule

PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and native._module is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param)
    yield request.param
    native.use_compiled(native.os.environ.get(native.ENV, "") in ("", "0"))


# -- the schedule: torch.profiler.schedule's documented examples --------------------------------


def test_schedule_matches_torchs_documented_example() -> None:
    # torch docs: "wait=1, warmup=1, active=2, repeat=1: skip the first step, start warming up
    # on the second, record the third and the fourth iterations"; then nothing.
    s = kprof.schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [s(i) for i in range(6)] == [NONE, WARMUP, RECORD, RECORD_AND_SAVE, NONE, NONE]


def test_schedule_with_skip_first_and_repeat() -> None:
    # torch docs: skip_first=10, wait=5, warmup=1, active=3, repeat=2.
    s = kprof.schedule(skip_first=10, wait=5, warmup=1, active=3, repeat=2)
    acts = [s(i) for i in range(40)]
    assert acts[:15] == [NONE] * 15
    assert acts[15:19] == [WARMUP, RECORD, RECORD, RECORD_AND_SAVE]
    assert acts[19:24] == [NONE] * 5
    assert acts[24:28] == [WARMUP, RECORD, RECORD, RECORD_AND_SAVE]
    assert acts[28:] == [NONE] * 12  # repeat=2: no third cycle


@pytest.mark.parametrize("skip_first_wait, first_warmup", [(0, 30), (1, 10)])
def test_schedule_skip_first_wait_as_torch_documents(
    skip_first_wait: int, first_warmup: int
) -> None:
    # torch docs: "if skip_first is 10 and wait is 20, the first cycle will wait 10 + 20 = 30
    # steps before warmup if skip_first_wait is zero, but will wait only 10 steps if
    # skip_first_wait is non-zero. All subsequent cycles will then wait 20 steps between the
    # last active and warmup."
    s = kprof.schedule(skip_first=10, wait=20, warmup=1, active=2, skip_first_wait=skip_first_wait)
    acts = [s(i) for i in range(200)]
    warmups = [i for i, a in enumerate(acts) if a == WARMUP]
    assert warmups[0] == first_warmup
    assert acts[first_warmup : first_warmup + 3] == [WARMUP, RECORD, RECORD_AND_SAVE]
    # Between the last active step of a cycle and the next warmup: 20 waits.
    assert {b - a for a, b in itertools.pairwise(warmups)} == {23}
    assert acts[first_warmup + 3 : first_warmup + 23] == [NONE] * 20


def test_steps_schedule_starts_exactly_at_first() -> None:
    s = steps_schedule(100, 110, every=1000)
    recorded = [i for i in range(3000) if s(i) != NONE]
    assert recorded == [*range(100, 110), *range(1100, 1110), *range(2100, 2110)]
    assert [i for i in range(300) if steps_schedule(100, 110)(i) != NONE] == list(range(100, 110))
    assert [i for i in range(99) if steps_schedule(5, 7, every=10, windows=2)(i)] == [5, 6, 15, 16]


@pytest.mark.parametrize(
    "kw", [{"active": 0}, {"wait": -1}, {"warmup": 1.5}, {"repeat": True}, {"active": "2"}]
)
def test_bad_schedules_say_which_argument(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kw))):
        kprof.schedule(**kw)


# -- windows on the test device ---------------------------------------------------------------


def loop(q: Any, steps: int, per_step: int = 2) -> None:
    """Each step launches ``per_step`` kernels named after the step, then ends."""
    for s in range(steps):
        for _ in range(per_step):
            q.launch(f"step{s}", 0)
        kprof.step()


def test_window_boundaries_are_exact(testbackends: Any, tdq: Any, path: bool) -> None:
    q = tdq()
    with kprof.profile(schedule=steps_schedule(100, 110)) as p, q:
        loop(q, 120)
    [w] = p.windows
    names = [k.name for k in w.kernels]
    assert names == [f"step{s}" for s in range(100, 110) for _ in range(2)]
    assert w.meta["window"] == {
        "index": 1,
        "first_step": 100,
        "last_step": 109,
        "schedule": "schedule(active=10, repeat=1, skip_first=100)",
    }
    assert p.meta["steps"] == 120 and p.meta["windows"]["delivered"] == 1
    assert p.kernels == []  # the yielded profile records nothing itself


def test_warmup_is_discarded_and_windows_repeat(testbackends: Any, tdq: Any, path: bool) -> None:
    q = tdq()
    sched = kprof.schedule(wait=2, warmup=1, active=3, repeat=3)
    with kprof.profile(schedule=sched) as p, q:
        loop(q, 40, per_step=1)
    got = [(w.meta["window"]["first_step"], [k.name for k in w.kernels]) for w in p.windows]
    assert got == [
        (3, ["step3", "step4", "step5"]),
        (9, ["step9", "step10", "step11"]),
        (15, ["step15", "step16", "step17"]),
    ]
    assert p.meta["windows"]["warmups_discarded"] == 3
    report = str(p)
    assert report.startswith("kprof: 40 steps, schedule(wait=2, warmup=1, active=3, repeat=3)")
    assert "Window 2, steps 9-11: Profiled" in report


def test_capture_is_installed_only_around_windows(testbackends: Any, tdq: Any) -> None:
    q = tdq()
    seen: list[tuple[int, bool]] = []
    sched = kprof.schedule(wait=2, warmup=1, active=1, repeat=2)
    with kprof.profile(schedule=sched), q:
        for s in range(9):
            seen.append((s, profiler.capture_installed()))
            q.launch("k", 0)
            kprof.step()
    assert profiler.capture_installed() is False
    # Steps 2 and 6 warm up, 3 and 7 record; waits have nothing installed.
    assert [s for s, on in seen if on] == [2, 3, 6, 7]


def test_back_to_back_windows_keep_capture_installed(
    testbackends: Any, tdq: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    installs: list[str] = []
    real = profiler._install

    def counting(backends: Any) -> bool:
        installs.append("install")
        return real(backends)

    monkeypatch.setattr(profiler, "_install", counting)
    q = tdq()
    windows: list[kprof.Profile] = []
    with (
        kprof.profile(
            schedule=kprof.schedule(warmup=1, active=1, repeat=3), on_window=windows.append
        ) as p,
        q,
    ):
        loop(q, 10, per_step=3)
    assert [[k.name for k in w.kernels] for w in windows] == [
        ["step1"] * 3,
        ["step3"] * 3,
        ["step5"] * 3,
    ]
    assert p.windows == []  # handed to on_window, not kept
    assert "handed to on_window" in str(p)
    # The first warmup installs once; each of the five changes from one profile straight to
    # the next (warmup->record, record->warmup) holds capture while it swaps: two each. Only
    # the change to the wait after the last window installs nothing.
    assert len(installs) == 1 + 5 * 2


def test_a_profile_ending_inside_a_window_delivers_it_partial(testbackends: Any, tdq: Any) -> None:
    q = tdq()
    with pytest.raises(RuntimeError, match="boom"):
        with kprof.profile(schedule=kprof.schedule(wait=1, active=5)) as p, q:
            loop(q, 3, per_step=1)
            q.launch("last", 0)
            raise RuntimeError("boom")
    [w] = p.windows
    assert [k.name for k in w.kernels] == ["step1", "step2", "last"]
    assert w.meta["window"]["partial"] is True and w.meta["window"]["last_step"] == 3
    assert "(partial: the profile ended in it)" in w.report()
    assert profiler.capture_installed() is False


def test_step_outside_a_scheduled_profile_does_nothing(testbackends: Any, tdq: Any) -> None:
    kprof.step()
    q = tdq()
    with kprof.profile() as p, q:
        q.launch("a", 0)
        kprof.step()
        q.launch("b", 0)
    assert [k.name for k in p.kernels] == ["a", "b"]


def test_steps_on_another_thread_are_not_counted(testbackends: Any, tdq: Any) -> None:
    q = tdq()
    with kprof.profile(schedule=kprof.schedule(wait=1, active=1, repeat=1)) as p, q:
        t = threading.Thread(target=lambda: [kprof.step() for _ in range(5)])
        t.start()
        t.join()
        loop(q, 3, per_step=1)
    assert [[k.name for k in w.kernels] for w in p.windows] == [["step1"]]
    assert p.meta["steps"] == 3


def test_save_windows_writes_one_file_per_window(
    testbackends: Any, tdq: Any, tmp_path: Path
) -> None:
    q = tdq()
    out = tmp_path / "run"
    sched = kprof.schedule(wait=1, active=2, repeat=2)
    with kprof.profile(schedule=sched, on_window=kprof.save_windows(out)), q:
        loop(q, 8)
    files = sorted(os.listdir(out))
    assert files == ["window-0001.kprof", "window-0002.kprof"]
    w2 = kprof.load(out / files[1])
    assert (w2.meta["window"]["first_step"], w2.meta["window"]["last_step"]) == (4, 5)
    assert [k.name for k in w2.kernels] == ["step4"] * 2 + ["step5"] * 2


def test_a_scheduled_decorator_gets_its_windows(testbackends: Any, tdq: Any) -> None:
    q = tdq()
    got: list[int] = []

    @kprof.profile(
        schedule=kprof.schedule(active=2, repeat=1), on_window=lambda w: got.append(len(w.kernels))
    )
    def train() -> None:
        with q:
            loop(q, 4)

    train()
    train()
    assert got == [4, 4]


def test_bad_profile_arguments() -> None:
    with pytest.raises(TypeError, match="schedule"):
        kprof.profile(schedule=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_window"):
        kprof.profile(on_window=print)


# -- PoCL's CPU device ------------------------------------------------------------------------


@pytest.fixture
def cl_spin() -> Any:
    cl = pytest.importorskip("pyopencl")
    import numpy as np

    import kprof_opencl

    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    queue = kprof_opencl.profiling_queue(dev)
    ctx = queue.context
    prg = cl.Program(ctx, "__kernel void k(__global float *x) { x[get_global_id(0)] += 1; }")
    k = prg.build().k
    x = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 64)
    return lambda: k(queue, (64,), None, x), queue, np


def test_windows_on_the_opencl_device(cl_spin: Any, path: bool) -> None:
    launch, queue, _ = cl_spin
    with kprof.profile(backends=["opencl"], schedule=steps_schedule(3, 5, every=6)) as p:
        for _ in range(14):
            launch()
            launch()
            kprof.step()
        queue.finish()
    got = [(w.meta["window"]["first_step"], len(w.kernels)) for w in p.windows]
    assert got == [(3, 4), (9, 4)]
    ks = [k for w in p.windows for k in w.kernels]
    assert all(k.name == "k" and k.error is None and not k.approximate for k in ks)


# -- kprof run --steps ------------------------------------------------------------------------


SCRIPT = """
import kprof
from kprof_testbackend import device
q = device.Queue()
for s in range(30):
    q.launch(f"s{s}", 0)
    kprof.step()
q.close()
"""


def kprof_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env["KPROF_PLUGINS"] = "testdev"
    return subprocess.run(
        [sys.executable, "-m", "kprof", "run", *args, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def test_kprof_run_steps_every_windows(tmp_path: Path) -> None:
    r = kprof_run(tmp_path, "--steps", "3:5", "--every", "10", "--windows", "2", "-o", "out.kprof")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Window ") == 2
    assert "Window 1, steps 3-4:" in r.stdout and "Window 2, steps 13-14:" in r.stdout
    assert "kprof: 30 steps" in r.stdout
    w2 = kprof.load(tmp_path / "out-0002.kprof")
    assert [k.name for k in w2.kernels] == ["s13", "s14"]
    assert sorted(p.name for p in tmp_path.glob("*.kprof")) == [
        "out-0001.kprof",
        "out-0002.kprof",
    ]


OPENCL_SCRIPT = """
import pyopencl as cl
import kprof
import kprof_opencl
ctx = cl.Context([kprof_opencl.default_device()])
queue = cl.CommandQueue(ctx)  # at the top, before the first window opens
prg = cl.Program(ctx, "__kernel void k(__global float *x) { x[get_global_id(0)] += 1; }")
k = cl.Kernel(prg.build(), "k")
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 64)
for s in range(20):
    k(queue, (64,), None, buf)
    kprof.step()
queue.finish()
"""


def test_kprof_run_steps_windows_on_a_queue_made_before_them_are_exact(tmp_path: Path) -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("no OpenCL device")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(OPENCL_SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    args = ["--steps", "3:5", "--every", "10", "--windows", "2", "-o", "out.kprof"]
    r = subprocess.run(
        [sys.executable, "-m", "kprof", "run", *args, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "ProfilingDisabledWarning" not in r.stderr
    windows = [kprof.load(f) for f in sorted(tmp_path.glob("out*.kprof"))]
    assert [len(w.kernels) for w in windows] == [2, 2]
    assert all(not k.approximate and not k.host_timed for w in windows for k in w.kernels)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--steps", "5"], "expected FIRST:LAST"),
        (["--steps", "5:5"], "need 0 <= FIRST < LAST"),
        (["--every", "5"], "need --steps"),
        (["--steps", "0:10", "--every", "4"], "shorter than a window"),
    ],
)
def test_kprof_run_bad_steps_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    r = kprof_run(tmp_path, *args)
    assert r.returncode == 2 and says in r.stderr


@pytest.mark.parametrize(
    "kw",
    [
        {"wait": 1, "warmup": 1, "active": 2, "repeat": 1},
        {"skip_first": 10, "wait": 5, "warmup": 1, "active": 3, "repeat": 2},
        {"skip_first": 3, "wait": 7, "active": 2, "skip_first_wait": 1},
        {"wait": 0, "warmup": 0, "active": 1},
        {"wait": 4, "active": 3, "repeat": 0},
    ],
)
def test_next_active_is_the_first_step_not_none(kw: dict[str, int]) -> None:
    # What lets a step between windows skip the schedule: checked against the rule itself.
    s = kprof.schedule(**kw)
    for step in range(80):
        want = next((i for i in range(step, 200) if s(i) != NONE), None)
        assert s.next_active(step) == want, step


def test_a_finished_window_is_freed_without_a_full_collection(testbackends: Any, tdq: Any) -> None:
    # Reference cycles of a finished profile are collected after each window: a long run
    # holds one window, not every window until the next full collection.
    import gc

    from kprof_core.recording.recorder import _live

    q = tdq()
    before = set(map(id, _live))
    alive: list[int] = []
    gc.disable()
    try:
        sched = kprof.schedule(wait=1, active=1, repeat=4)
        with kprof.profile(schedule=sched, on_window=lambda w: None), q:
            for _ in range(9):
                q.launch("k", 0)
                kprof.step()
                alive.append(sum(1 for r in _live if id(r) not in before))
    finally:
        gc.enable()
    assert max(alive) <= 1  # at most the window being recorded


def test_a_schedule_that_recorded_no_window_says_why(testbackends: Any, tdq: Any) -> None:
    """The report's head says why there is no window, rather than listing none."""
    q = tdq()
    with kprof.profile(schedule=kprof.schedule(wait=5, active=1, repeat=1)) as p, q:
        for _ in range(3):
            q.launch("a", 0)
            kprof.step()
    assert p.meta["windows"]["delivered"] == 0
    note = p.meta["windows"]["note"]
    assert "made 3 step(s)" in note and "begins at step 5" in note, note
    assert f"! {note}" in p.report()
    with kprof.profile(schedule=kprof.schedule(wait=1, active=1)) as p, q:
        q.launch("a", 0)
    assert "kprof.step() was never called" in p.meta["windows"]["note"]
    with kprof.profile(schedule=kprof.schedule(wait=1, warmup=2, active=1, repeat=1)) as p, q:
        for _ in range(2):
            kprof.step()
    assert "warmup" in p.meta["windows"]["note"], p.meta["windows"]
    with kprof.profile(schedule=kprof.schedule(active=1, repeat=1)) as p, q:
        q.launch("a", 0)
        kprof.step()
    assert p.meta["windows"]["delivered"] == 1 and "note" not in p.meta["windows"]
