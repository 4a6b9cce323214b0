"""Launch sites of activity rows: a backend whose tool calls it on the launching thread as a
launch begins (CUPTI's callback API) takes ``kprof.plugin.launch_site()`` there and hands the
raw id back with the record. The simulated tracer (``testtrace``) does so, delivering one by
one (``DeviceRecord.site``) and column-wise (``ActivityColumns(site=...)``), on both recorder
paths: each row's site is the user's line, stacks with ``stacks=True``, none with sites off."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof import plugin as kp
from kprof_core.data.stacks import frames_of
from kprof_core.low_level import native
from kprof_core.recording import sites as site_mod

HERE = str(Path(__file__))


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


@pytest.fixture(params=["records", "columns"])
def tracer(
    request: pytest.FixtureRequest, fresh_registry: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    from kprof_testbackend.tracer import tracer as t

    monkeypatch.setenv("KPROF_PLUGINS", "testtrace")
    t.clock_offset, t.batch, t.columns = 0, 64, request.param == "columns"
    yield t
    t.release()
    t.columns = False


def line_of(marker: str) -> int:
    for n, text in enumerate(Path(HERE).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return n
    raise AssertionError(marker)


def sites(p: kprof.Profile) -> list[tuple[str, int, str] | None]:
    out: list[tuple[str, int, str] | None] = []
    for i in range(len(p.table)):
        s = p.table.site[i]
        out.append(None if s < 0 else (p.sites[s].file, p.sites[s].line, p.sites[s].function))
    return out


def work(tracer: Any, stream: Any) -> None:
    tracer.launch("a", stream, 1000)  # work: a
    tracer.launch("b", stream, 1000, nbytes=64, kind=kp.COPY)  # work: b


def test_two_launch_lines_are_two_sites(tracer: Any, path: str) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile(sites=True) as p:
        for _ in range(3):
            work(tracer, s)
    a, b = line_of("work: a"), line_of("work: b")
    assert sites(p) == [(HERE, a, "work"), (HERE, b, "work")] * 3
    # The copy row has no launch configuration; the kernel's is kept.
    t = p.table
    assert [t.config[i] >= 0 for i in range(len(t))] == [True, False] * 3
    assert [s.line for s in p.sites] == [a, b]


def test_stacks(tracer: Any, path: str) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile(stacks=True) as p:
        work(tracer, s)  # stacks: caller
    assert len(p.stacks) == 2
    for i in range(len(p.table)):
        frames = frames_of(p, "device", i)
        assert [(f.function, f.line) for f in frames[-2:]] == [
            ("test_stacks", line_of("stacks: caller")),
            ("work", line_of("work: a") + i),
        ]


def test_sites_off_none(tracer: Any, path: str) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile(sites=False) as p:
        work(tracer, s)
    assert sites(p) == [None, None]
    assert kp.launch_site() == -1  # outside a profile


def test_threads_each_their_line(tracer: Any, path: str) -> None:
    from kprof_testbackend.tracer import Stream

    def other() -> None:
        tracer.launch("t", Stream("t"), 1000)  # thread: t

    with kprof.profile(sites=True) as p:
        th = threading.Thread(target=kprof.propagate(other))
        th.start()
        th.join()
        tracer.launch("m", Stream("m"), 1000)  # thread: main
    got = {p.names[p.table.name[i]]: s for i, s in enumerate(sites(p))}
    assert got == {
        "t": (HERE, line_of("thread: t"), "test_threads_each_their_line.<locals>.other"),
        "m": (HERE, line_of("thread: main"), "test_threads_each_their_line"),
    }


def test_ids_that_are_not_ids_are_unknown(tracer: Any, path: str) -> None:
    """A site a plugin hands that is no raw id (a bug of its) is unknown, never an error."""
    from kprof_testbackend.tracer import Stream

    real = kp.launch_site
    bad = iter([len(site_mod.KEYS) + 10**6, -7, -1])
    tracer_mod = __import__("kprof_testbackend.tracer", fromlist=["kp"])
    tracer_mod.kp.launch_site = lambda: next(bad)  # type: ignore[attr-defined]
    try:
        with kprof.profile(sites=True) as p:
            for _ in range(3):
                tracer.launch("k", Stream("s"), 1000)
    finally:
        tracer_mod.kp.launch_site = real  # type: ignore[attr-defined]
    assert sites(p) == [None, None, None]
    assert len(p.table) == 3 and not p.errors
