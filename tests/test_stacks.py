"""Launch stacks on real PyOpenCL launches (PoCL's CPU device): ``profile(stacks=...)`` keeps
each record's Python stack, from the user's line outwards, interned, the same on both
recorder paths and through nested profiles."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.data.stacks import frames_of
from kprof_core.low_level import native
from kprof_core.recording import sites as site_mod

cl = pytest.importorskip("pyopencl")

import kprof_opencl  # noqa: E402

HERE = str(Path(__file__))
SOURCE = "__kernel void bump(__global float *x) { x[get_global_id(0)] += 1.0f; }"


@pytest.fixture(scope="module")
def ocl() -> tuple[Any, Any, Any]:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    q = kprof_opencl.profiling_queue(dev)
    bump = cl.Kernel(cl.Program(q.context, SOURCE).build(), "bump")
    buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 64)
    bump(q, (64,), None, buf)
    q.finish()
    return q, bump, buf


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def leaf(ocl: Any) -> None:
    q, bump, buf = ocl
    bump(q, (64,), None, buf)  # leaf's launch


def middle(ocl: Any) -> None:
    leaf(ocl)  # middle calls leaf
    leaf(ocl)  # middle calls leaf again


def recurse(ocl: Any, n: int) -> None:
    if n:
        recurse(ocl, n - 1)  # deeper
    else:
        leaf(ocl)  # the bottom


def labels(stack: tuple[Any, ...]) -> list[str]:
    return [f"{s.function}:{s.line}" for s in stack if s.file == HERE]


def line(fn: Any, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


def test_each_launch_keeps_its_stack_outermost_first(path: str, ocl: Any) -> None:
    with kprof.profile(stacks=True) as p:
        middle(ocl)
        with kprof.range("step"):
            leaf(ocl)
    mid1, mid2 = line(middle, "calls leaf\n"), line(middle, "leaf again")
    launch = line(leaf, "leaf's launch")
    kernels = [i for i in range(len(p.table)) if p.table.kind[i] != 2]
    stacks = [labels(frames_of(p, "device", i)) for i in kernels]
    test_fn = "test_each_launch_keeps_its_stack_outermost_first"
    assert stacks[0][-3:] == [stacks[0][-3], f"middle:{mid1}", f"leaf:{launch}"]
    assert stacks[0][-3].startswith(test_fn)
    assert stacks[1][-2:] == [f"middle:{mid2}", f"leaf:{launch}"]
    assert stacks[2][-1] == f"leaf:{launch}" and stacks[2][-2].startswith(test_fn)
    # Interned: one id per distinct stack; the site is the stack's innermost frame.
    ids = [p.table.stack[i] for i in kernels]
    assert len(set(ids)) == 3 and len(p.stacks) == 4  # and the range's
    for i in kernels:
        assert p.sites[p.table.site[i]] == frames_of(p, "device", i)[-1]
    (h,) = [i for i in range(len(p.host))]
    assert labels(frames_of(p, "host", h))[-1].startswith(test_fn)
    # A stack reaches pytest's frames too: nothing is skipped past the user's frame.
    assert len(frames_of(p, "device", kernels[0])) > len(stacks[0])


def test_the_depth_bounds_each_stack(path: str, ocl: Any) -> None:
    with kprof.profile(stacks=3) as p:
        recurse(ocl, 5)
    (stack,) = p.stacks
    deeper, bottom = line(recurse, "deeper"), line(recurse, "the bottom")
    assert labels(stack) == [
        f"recurse:{deeper}",
        f"recurse:{bottom}",
        f"leaf:{line(leaf, 'launch')}",
    ]


def test_both_paths_record_the_same_stacks(ocl: Any) -> None:
    if native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    got = []
    for compiled in (True, False):
        native.use_compiled(compiled)
        try:
            with kprof.profile(stacks=True) as p:
                for _ in range(3):
                    middle(ocl)
                recurse(ocl, 2)
        finally:
            native.use_compiled(True)
        got.append(([labels(s) for s in p.stacks], list(p.table.stack), p.sites))
    assert got[0] == got[1]
    assert len(got[0][0]) == 3 and len(got[0][1]) == 7


def test_stacks_imply_sites_and_off_records_none(path: str, ocl: Any) -> None:
    with kprof.profile(stacks=4) as p:
        leaf(ocl)
    assert p.sites and len(p.stacks) == 1 and len(p.stacks[0]) == 4
    with kprof.profile(sites=True) as q:
        leaf(ocl)
    assert q.stacks == () and len(q.table.stack) == 0
    assert frames_of(q, "device", 0) == (q.sites[0],)


def test_a_nested_profile_hands_its_stacks_to_the_outer_one(path: str, ocl: Any) -> None:
    with kprof.profile(stacks=True) as outer:
        with kprof.profile(stacks=True) as inner:
            middle(ocl)
        leaf(ocl)
    assert [labels(s) for s in inner.stacks] == [labels(s) for s in outer.stacks[:2]] or {
        tuple(labels(s)) for s in inner.stacks
    } <= {tuple(labels(s)) for s in outer.stacks}
    assert len(outer.stacks) == 3
    assert [labels(frames_of(outer, "device", i)) for i in range(2)] == [
        labels(frames_of(inner, "device", i)) for i in range(2)
    ]


@pytest.mark.parametrize(
    ("env", "depth"), [("", 0), ("0", 0), ("1", site_mod.DEFAULT_STACK_DEPTH), ("5", 5)]
)
def test_the_environment_turns_stacks_on(
    monkeypatch: pytest.MonkeyPatch, env: str, depth: int
) -> None:
    monkeypatch.setenv("KPROF_STACKS", env)
    prof = kprof.profile(backends=[])
    assert prof.stacks == depth and prof.sites == (depth > 0)


@pytest.mark.parametrize("bad", [-1, 257, 1.5, "yes"])
def test_a_depth_out_of_range_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="a depth from 1 to 256"):
        kprof.profile(stacks=bad)


def test_stacks_survive_a_save_and_load(path: str, ocl: Any, tmp_path: Path) -> None:
    with kprof.profile(stacks=True) as p:
        middle(ocl)
    p.save(tmp_path / "s.kprof")
    back = kprof.load(tmp_path / "s.kprof")
    assert back.stacks == p.stacks and list(back.table.stack) == list(p.table.stack)
    assert frames_of(back, "device", 1) == frames_of(p, "device", 1)


# -- the compiled walk stops at a frame it kept from the previous one: never a wrong stack ----


def gen_launcher(ocl: Any) -> Any:
    while True:
        leaf(ocl)  # a generator's launch: resumed from different callers below
        yield


def resume_from_a(g: Any) -> None:
    next(g)  # resumed from a


def resume_from_b(g: Any) -> None:
    next(g)  # resumed from b


def via_a(ocl: Any) -> None:
    middle(ocl)  # via a


def via_b(ocl: Any) -> None:
    middle(ocl)  # via b


def scenario(ocl: Any, depth: int) -> list[list[str]]:
    g = gen_launcher(ocl)
    with kprof.profile(stacks=depth) as p:
        for _ in range(2):
            via_a(ocl)  # the same middle frame code, at the same place, from two callers
            via_b(ocl)
            resume_from_a(g)
            resume_from_b(g)
            recurse(ocl, 4)
            leaf(ocl)
        recurse(ocl, 1)  # a shorter chain after a longer one cut at the depth
    return [labels(frames_of(p, "device", i)) for i in range(len(p.table))]


@pytest.mark.parametrize("depth", [3, 6, 32])
def test_stacks_are_right_whatever_the_previous_walk_kept(ocl: Any, depth: int) -> None:
    if native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    got = []
    for compiled in (True, False):
        native.use_compiled(compiled)
        try:
            got.append(scenario(ocl, depth))
        finally:
            native.use_compiled(True)
    assert got[0] == got[1]  # the Python twin walks every frame every time
    rows = got[0]
    assert len(rows) == 2 * 8 + 1
    if depth == 32:
        a, b = line(via_a, "via a"), line(via_b, "via b")
        assert rows[0][-3:-1] == [f"via_a:{a}", f"middle:{line(middle, 'calls leaf')}"]
        assert rows[2][-3:-1] == [f"via_b:{b}", f"middle:{line(middle, 'calls leaf')}"]
        ra, rb = line(resume_from_a, "from a"), line(resume_from_b, "from b")
        assert rows[4][-3] == f"resume_from_a:{ra}" and rows[5][-3] == f"resume_from_b:{rb}"
        assert rows[8:16] == rows[0:8]  # the second round: the same stacks
    for r in rows:
        assert 0 < len(r) <= depth


def test_the_kept_frames_are_let_go_at_the_end(ocl: Any) -> None:
    import gc
    import weakref

    class Held:
        pass

    def launch_with_a_local(ref: list[Any]) -> None:
        obj = Held()
        ref.append(weakref.ref(obj))
        middle(ocl)

    refs: list[Any] = []
    with kprof.profile(stacks=True):
        launch_with_a_local(refs)
    gc.collect()
    assert refs[0]() is None  # its frame is not kept past the profile
