"""Which backends' capture is installed: one count of users per backend, across every
profile of the process. A backend's capture is installed by the first profile that uses it
and removed after the last (profiles may use different backends); a profile entered or
exited in a signal handler never waits on the lock (``threads.OwnedLock``)."""

from __future__ import annotations

import os
import warnings

from kprof_core.host.backend import Backend
from kprof_core.host.calls import InImport, NoAnswer, PluginRaised, bounded
from kprof_core.host.discovery import in_import, registry
from kprof_core.recording.threads import OwnedLock

# A backend's capture is installed while any profile that uses it is active, anywhere in the
# process: installed by the first, removed by the last (profiles may use different backends).
_capture_lock = OwnedLock()  # see threads.OwnedLock: a signal handler never waits on it
# Backends whose users a profile exited in a signal handler gave up while the interrupted
# code held _capture_lock: released by that code before it lets the lock go.
_deferred_releases: list[list[Backend]] = []
_capture_users: dict[Backend, int] = {}
_installed: set[Backend] = set()  # remove_capture only what install_capture did install
_answered: set[Backend] = set()  # an install_capture returned once: later ones not bounded
_memory_on: set[Backend] = set()  # memory_remove only where memory_install returned True


def _after_fork_in_child() -> None:
    """A child starts with free locks: another thread of the parent may have held one at the
    fork, and that thread does not exist in the child (it would never release it)."""
    global _capture_lock
    _capture_lock = OwnedLock()
    _deferred_releases.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _install(backends: list[Backend]) -> bool:
    """Count one more user of each backend, installing capture where it is the first; False
    (nothing done) when the calling thread is inside kprof's own install or removal: a
    profile entered in a signal handler then, which records without installing anything."""
    if _capture_lock.held_here():
        return False
    with _capture_lock:
        counted: list[Backend] = []
        try:
            for b in backends:
                users = _capture_users.get(b, 0)
                _capture_users[b] = users + 1
                counted.append(b)
                if users or b.broken is not None:
                    continue
                try:
                    _install_capture(b)
                except NoAnswer as exc:  # goes on in its thread: undone if it ends
                    b.disable(f"install_capture {exc}")
                    continue
                except InImport as exc:
                    b.disable(in_import("install_capture", b, exc.module))
                    continue
                except Exception as exc:  # undone
                    b.disable(f"install_capture raised {type(exc).__name__}: {exc}")
                    continue
                if b.has_memory:
                    _install_memory(b)
        except BaseException:
            # Interrupted (Ctrl-C in a slow install_capture, undone there): undo this
            # profile's share entirely, then go on up.
            _release(counted)
            raise
        finally:
            _release_deferred()
    return True


def _install_capture(b: Backend) -> None:
    """``install_capture``, undone if it raises. The first one of a discovered plugin in the
    process is bounded in time (``registry.bound``), where a wedged driver shows; once a
    plugin's install answered, its later ones run on this thread, costing a profile's start
    no thread. One given up on (it did not answer, it waits on the program's import, the wait
    was interrupted) is undone by its own thread if it ends after all."""
    timeout = None if b in _answered else registry.bound(b)
    try:
        if timeout is None:
            b.install_capture(b)
        else:
            bounded(
                lambda: b.install_capture(b),
                timeout,
                f"install_capture of {b.name}",
                late=lambda ok, value: _remove_quietly(b),
            )
    except PluginRaised as exc:  # the plugin's own KeyboardInterrupt: as if on this thread
        _remove_quietly(b)
        raise exc.__cause__ or exc from None
    except (NoAnswer, InImport):
        raise  # still running: undone when it ends
    except Exception:
        _remove_quietly(b)
        raise
    except BaseException:
        if timeout is None:  # interrupted on this thread; on another, undone when it ends
            _remove_quietly(b)
        raise
    _installed.add(b)
    _answered.add(b)


def _install_memory(b: Backend) -> None:
    """``memory_install``, optional: a plugin failing there keeps its capture, without memory."""
    try:
        if b.memory_install(b) is True:
            _memory_on.add(b)
    except Exception as exc:
        warnings.warn(
            f"kprof: backend {b.name!r} ({b.plugin_label}) failed to install its memory "
            f"tracking ({type(exc).__name__}: {exc}); its allocations are not recorded",
            RuntimeWarning,
            stacklevel=4,
        )


def _release_deferred() -> None:
    while _deferred_releases:
        _release(_deferred_releases.pop())


def _remove_quietly(b: Backend) -> None:
    try:
        b.remove_capture(b)
    except Exception:
        pass


def _release(backends: list[Backend]) -> BaseException | None:
    """Drop one user of each backend; remove capture where it was the last. Every backend is
    handled even when a plugin raises: an ``Exception`` is warned about, the first
    ``BaseException`` (``KeyboardInterrupt`` from ``remove_capture``) is returned for the
    caller to raise once the profile is safe."""
    pending: BaseException | None = None
    for b in reversed(backends):
        users = _capture_users.pop(b, 0) - 1
        if users > 0:
            _capture_users[b] = users
            continue
        if b not in _installed:
            continue
        _installed.discard(b)
        try:
            if b in _memory_on:
                _memory_on.discard(b)
                b.memory_remove(b)
            b.remove_capture(b)
        except Exception as exc:
            warnings.warn(
                f"kprof: backend {b.name!r} ({b.plugin_label}) failed to remove its capture: "
                f"{type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=4,
            )
        except BaseException as exc:
            pending = pending or exc
    return pending


def _uninstall(backends: list[Backend]) -> BaseException | None:
    if _capture_lock.held_here():
        # A signal handler exiting a profile while this thread installs or removes capture:
        # the interrupted code releases these before it lets the lock go.
        _deferred_releases.append(backends)
        return None
    with _capture_lock:
        try:
            return _release(backends)
        finally:
            _release_deferred()


def capture_installed() -> bool:
    """Whether automatic capture is installed right now (some profile is active)."""
    return bool(_capture_users)
