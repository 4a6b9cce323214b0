"""The optional hooks: mirroring ranges into the vendor's tools, the demo, the modules whose
import starts a backend under ``kprof run``, the environment ``kprof run`` starts a program
with, notes for the report, launch configurations as text, and device memory. Part of the hook reference,
``kprof_core/host/hookspecs.py``, which imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core.host.markers import hookspec

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend


# -- Mirroring ranges into the vendor's tools (optional) ---------------------------------------


@hookspec(firstresult=True)
def range_push(backend: Backend, name: str) -> None:
    """A ``kprof.range`` (or ``kprof.kernel`` call) begins on the calling thread: mirror it.

    For plugins that mirror ranges into the vendor's tools (NVTX for Nsight, rocTX for
    rocprof). Called on the user's thread, in a profile, on backends where the thread has a
    current queue, just before the range's start timestamp; matched by one ``range_pop`` on the
    same thread, in stack order. Keep it short. Called only where implemented.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param name: The range's name.
    """


@hookspec(firstresult=True)
def range_pop(backend: Backend) -> None:
    """The range of the matching ``range_push`` ends (after its stop timestamp).

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    """


# -- The demo ----------------------------------------------------------------------------------


@hookspec(firstresult=True)
def demo_workload(backend: Backend, size: int) -> Any | None:
    """One step of ``kprof demo``'s reference workload, set up and ready to run.

    One step enqueues, without waiting, ``mul2`` (``x *= 2``) then ``add`` (``z = x + y``), launched so
    that the plugin's capture (or ``kprof.kernel``) records them. Set up buffers and compile
    before returning, so that a step measures launches only. ``kprof demo`` uses the first
    available backend that returns one; ``kprof.testing.BackendConformance`` its default
    workload.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param size: The number of float32 elements.
    :returns: A callable taking no arguments, or ``None``. Default: ``None``.
    """


# -- The program's environment and the report ---------------------------------------------------


@hookspec(firstresult=True)
def capture_modules(backend: Backend) -> list[str] | None:
    """The top-level modules whose import means the program uses this backend (``["pyopencl"]``).

    ``kprof run`` neither describes the backend nor installs its capture until the program
    imports one of them (a post-import hook on ``sys.meta_path``), so that a script that uses
    no GPU library starts as fast as under ``python`` and loads no vendor module it did not
    import; from that import on, the backend is part of the run's profile. ``kprof run
    --backends NAME`` starts it at once, as ``kprof.profile()`` does every backend. Must not
    import anything itself.

    A backend started by that import is described and installed on a thread of kprof's while
    the program's import waits, at most ``KPROF_DISCOVERY_TIMEOUT`` seconds (then the backend
    is disabled, with the reason). Its ``describe_backend`` and ``install_capture`` may
    import the named module (it is complete by then), never a module the program may be
    importing at that moment (the importing package's other submodules): that import would
    wait for the program's, and the backend is disabled at once, saying so.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: Module names, or ``None`` (start with the program, as before). Default: ``None``.
    """


@hookspec(firstresult=True)
def exec_environment(backend: Backend) -> dict[str, str] | None:
    """Environment variables the profiled program must be started with, which cannot be set
    once it runs.

    For example ``LD_PRELOAD`` of an interposer the backend needs where it cannot hook the
    vendor library at run time. ``kprof run`` asks every backend it starts with the program
    (``capture_modules``) before it runs the script and, where one asks for a value the environment lacks, starts itself again once
    with it (same interpreter, flags and arguments; ``KPROF_RUN_RESTARTED=1`` marks the
    restarted process). ``kprof.profile()`` in a running program cannot: the backend then says what it
    could not see (``report_notes``).

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: Variable names and values, or ``None`` (nothing needed). Default: ``None``.
    """


@hookspec(firstresult=True)
def report_notes(backend: Backend) -> list[str] | None:
    """Lines the report of a profile that is ending should carry: what the backend knows it may
    have missed, and how to fix it (e.g. OpenCL work launched from C where kprof has no hook).

    Called once per profile that used the backend, on the thread that ends it, before
    ``remove_capture``. The lines go to ``Profile.meta["notes"]`` and are printed under the
    summary, marked ``!``.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: The lines, or ``None`` (nothing to say). Default: ``None``.
    """


# -- Launch configurations (optional) ------------------------------------------------------------
#
# A capture wrapper may hand each launch's configuration to ``rec.launch(..., config=...)``
# (and ``launch_observed``): CUDA's grid and block, OpenCL's global and local sizes, as the
# launch's arguments have them, e.g. ``config=(global_size, local_size)``. It must be hashable
# (ints, str, tuples of them: a list is kept under its ``repr``) and cheap to make: it is kept
# as it is and interned per profile, one id per distinct value. Activity rows carry theirs in
# ``ActivityColumns(config=(format, columns))``. ``p.summary(by=("name", "config"))`` groups
# by it; ``kprof.testing.BackendConformance`` checks that launches reach kprof with it.


@hookspec(firstresult=True)
def launch_config(backend: Backend, config: Any) -> str | None:
    """The text reports show for a launch configuration this backend handed to
    ``rec.launch(..., config=config)``, e.g. ``"global 1024x1024 local 16x16"``.

    Called once per distinct configuration per profile, at its end, on the thread that ends
    it (never on the launch path). A ``str`` configuration is its own text and is not asked.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param config: A configuration as the plugin handed it to ``launch``.
    :returns: The text, or ``None`` for ``str(config)``. Default: ``None``.
    """


# -- Device memory (optional) -------------------------------------------------------------------
#
# A plugin that can see the vendor's allocations and frees reports each one, from its wrappers,
# with ``kprof.plugin.allocated(backend, device, address, nbytes)`` and ``kprof.plugin.freed(
# backend, device, address)``, on the allocating thread; kprof keeps them per profile
# (``Profile.memory``: live bytes per device, the peak, allocations live at the end). Without
# these hooks nothing is installed and nothing is recorded.


@hookspec(firstresult=True)
def memory_install(backend: Backend) -> bool | None:
    """Start reporting allocations and frees.

    Called with ``install_capture`` (after it), on the first profile that uses the backend;
    undone by ``memory_remove`` before ``remove_capture``. Wrap the vendor's allocation and
    free functions; the wrappers call ``kprof.plugin.allocated``/``freed`` (they record
    nothing outside a profile, so calling them is enough).

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: ``True`` when the backend now reports memory; ``False`` or ``None`` when it
        cannot (its library lacks the hook, another tool holds it). Default: ``None``.
    """


@hookspec(firstresult=True)
def memory_remove(backend: Backend) -> None:
    """Stop reporting allocations and frees: undo ``memory_install`` (called only after it
    returned True).

    :param backend: The plugin's :class:`kprof.plugin.Backend`. Default: nothing is done.
    """
