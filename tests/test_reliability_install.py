"""An interrupt (any ``BaseException``) while capture is installed or removed: nothing stays
patched, the count of profiles using a backend returns to zero, and the records are kept."""

from __future__ import annotations

import types
from typing import Any

import pytest
from kprof_testbackend import device, plugin
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof
from kprof_core import profiler

pytestmark = pytest.mark.usefixtures("testbackends")

#: What the plugins below patch, as a capture would patch a library function.
target = types.SimpleNamespace()


def original() -> str:
    return "original"


class Patching(InstantClock):
    """Patches ``target.fn`` on install and restores it on removal; ``fail_install`` /
    ``fail_remove``: raise that exception (after patching, as an interrupted install would)."""

    def __init__(
        self, fail_install: BaseException | None = None, fail_remove: BaseException | None = None
    ) -> None:
        super().__init__()
        self.fail_install, self.fail_remove = fail_install, fail_remove
        self.installs = self.removes = 0

    @kprof.plugin.hookimpl
    def install_capture(self, backend: kprof.plugin.Backend) -> None:
        self.installs += 1
        target.fn = lambda: "patched"
        if self.fail_install is not None:
            exc, self.fail_install = self.fail_install, None
            raise exc

    @kprof.plugin.hookimpl
    def remove_capture(self, backend: kprof.plugin.Backend) -> None:
        self.removes += 1
        target.fn = original
        if self.fail_remove is not None:
            exc, self.fail_remove = self.fail_remove, None
            raise exc


@pytest.fixture(autouse=True)
def restore_target() -> Any:
    target.fn = original
    yield
    assert not profiler._capture_users and not profiler._installed
    target.fn = original


def test_an_interrupt_during_install_undoes_it(tdq: Any) -> None:
    odd = Patching(fail_install=KeyboardInterrupt())
    kprof.register_backend(odd, "odd")
    testdev_launch = device.Queue.launch
    with pytest.raises(KeyboardInterrupt):
        with kprof.profile(backends=["testdev", "odd"]):
            pytest.fail("the block must not run")
    assert target.fn is original and odd.removes == 1
    assert device.Queue.launch is testdev_launch  # testdev, installed first, is removed too
    assert not profiler.capture_installed() and kprof.plugin.active() is None
    # The next profile installs again and works.
    q = tdq()
    with kprof.profile(backends=["testdev", "odd"]) as p, q, odd.using(InstantQueue("oq")):
        assert target.fn() == "patched"
        q.launch("k")
    assert target.fn is original and odd.installs == 2
    assert [k.name for k in p.kernels] == ["k"]


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(5)])
def test_an_interrupt_during_removal_keeps_the_records(tdq: Any, exc: BaseException) -> None:
    odd = Patching(fail_remove=exc)
    kprof.register_backend(odd, "odd")
    q = tdq()
    with pytest.raises(type(exc)) as info:
        with kprof.profile(backends=["odd", "testdev"]) as p, q:
            with kprof.range("r"):
                q.launch("k", 10)
    assert info.value is exc
    assert [k.name for k in p.kernels] == ["k"] and [r.name for r in p.ranges] == ["r"]
    assert target.fn is original
    assert device.Queue.launch is not None and not plugin.live
    assert not profiler.capture_installed() and kprof.plugin.active() is None
    with kprof.profile(backends=["odd"]):
        assert target.fn() == "patched"  # installed again: the count went back to zero
    assert target.fn is original


def test_a_nested_profile_keeps_its_records_when_the_outer_removal_is_interrupted(tdq: Any) -> None:
    odd = Patching(fail_remove=KeyboardInterrupt())
    kprof.register_backend(odd, "odd")
    q = tdq()
    with pytest.raises(KeyboardInterrupt):
        with kprof.profile(backends=["testdev", "odd"]) as outer, q:
            with kprof.profile(backends=["testdev", "odd"]) as inner:  # not the last user
                q.launch("inner")
            assert target.fn() == "patched" and odd.removes == 0
            q.launch("outer")
    assert sorted(k.name for k in outer.kernels) == ["inner", "outer"]
    assert [k.name for k in inner.kernels] == ["inner"]
    assert target.fn is original and odd.removes == 1
