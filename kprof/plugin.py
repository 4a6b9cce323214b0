"""The API for authors of kprof backend plugins: everything a plugin imports from kprof.

A plugin is a module (or an object) whose functions are decorated ``@hookimpl``, registered
under the entry-point group ``kprof.backends``; ``examples/plugin/kprof_workqueue.py`` is a
complete small one, and the hookspecs (``help(kprof.plugin.hookspecs)``) are the reference for
each hook. kprof's bundled plugins (``kprof_opencl``, ``kprof_cuda``, ``kprof_hip``) import
only this module and ``kprof``, as a third party's would.

What a plugin receives and returns: :class:`Backend` (every hook's first argument),
:class:`BackendInfo`, :class:`QueueInfo`, :class:`Alignment`; what its hooks may raise:
:class:`NeverSubmitted`, :class:`TimestampsUnsupported`, :class:`KprofError`.

The capture API, for the wrappers ``install_capture`` puts on the vendor library's launch
functions::

    from kprof import plugin as kp

    def launch(queue, kernel, *args):
        rec = kp.active()
        if rec is None:                      # no profile in this context: call straight through
            return original(queue, kernel, *args)
        t0 = kp.now()
        # On the launch's own queue, with the plugin's own code: the record_timestamp hook
        # takes no queue (it is for kprof.range, on the thread's current queue).
        start = record_on(queue) if rec.device else None
        result = original(queue, kernel, *args)
        stop = record_on(queue) if rec.device else None
        rec.launch(backend, kp.KERNEL, kernel_name, queue, t0, kp.now(), start, stop)
        return result

``KERNEL`` and ``COPY`` are the kinds ``rec.launch`` takes; ``now`` is the host clock
(``time.perf_counter_ns``); ``active()`` the calling context's :class:`Recorder`, or None
outside a profile; ``Patcher`` replaces library attributes and restores the very same objects.
``rec.launch`` appends and returns; it never blocks except when a profile has so much pending
work that it must wait for the oldest (which bounds the live device events). Its optional last
arguments: ``nbytes`` (a copy's size, -1 otherwise) and ``config``, the launch configuration
as the call has it (hashable, e.g. ``(grid, block)`` or ``(global_size, local_size)``: nothing
is formatted per launch), which the optional ``launch_config`` hook makes text once per
distinct value per profile; ``summary(by=("name", "config"))`` groups by it. Activity rows
carry theirs in ``ActivityColumns(config=(format, columns))`` or ``DeviceRecord.config``.

Backends whose vendor tool reports device work after it ran (CUPTI's Activity API) hand it
over with ``deliver(backend, records)``, a list of :class:`DeviceRecord`, or column-wise with
``deliver_columns(backend, ActivityColumns(...))`` (no Python object per row); ``dropped(backend,
n, reason)`` reports records the tracer lost; ``activity_stats()`` counts what was delivered
and dropped. Where the tool calls the backend on the launching thread as a launch begins
(CUPTI's callback API), ``launch_site()`` there gives the launch's site (its stack with
``profile(stacks=...)``) as a raw id, handed back with the record (``DeviceRecord.site``,
``ActivityColumns(site=...)``, ``deliver_memory(site=...)``).

Backends that see the vendor's allocations (``memory_install`` hook) report each with
``allocated(backend, device, address, nbytes)`` and ``freed(backend, device, address)``
(recorded into the calling context's profile, nothing outside one); an activity API's
allocations, tagged with scopes, go to their profiles with ``deliver_memory``.

Helpers: ``compiled_enabled()`` says whether kprof's compiled parts run (``recorder_description()``
says why); ``load_plugin_part(package, name)`` imports a plugin's own optional compiled part,
or returns None where kprof runs pure Python (``KPROF_PURE_PYTHON=1``) or it is not built, so
that both paths stay switchable together; ``resolve_timeout(None)`` is the resolve timeout
kprof applies when a profile names none (``KPROF_RESOLVE_TIMEOUT``, default 60 s), the bound
a plugin's own waits should keep.
"""

from __future__ import annotations

from kprof_core.host import hookspecs
from kprof_core.host.backend import (
    Alignment,
    Backend,
    BackendInfo,
    KprofError,
    NeverSubmitted,
    QueueInfo,
    TimestampsUnsupported,
)
from kprof_core.host.markers import hookimpl
from kprof_core.host.patching import Patcher
from kprof_core.host.rownames import RowNames
from kprof_core.host.settings import resolve_timeout
from kprof_core.low_level import native as _native
from kprof_core.low_level.native import launch_capsules, load_plugin_part, raw_launch_capsule
from kprof_core.recording.activity import (
    ActivityColumns,
    DeviceRecord,
    deliver,
    deliver_columns,
    deliver_memory,
    dropped,
    launch_site,
)
from kprof_core.recording.activity import stats as activity_stats
from kprof_core.recording.memory import allocated, freed
from kprof_core.recording.recorder import COPY, KERNEL, Recorder, active, now

# In the order a plugin's author meets them (the hooks' marker and what they receive, then
# the capture API, activity tracers, memory and helpers): the plugin API reference
# (docs/reference/plugin-api.rst, autodoc's "bysource" order) follows it, so it stays unsorted.
__all__ = [  # noqa: RUF022
    # Writing the hooks: their marker, contract, what they receive and return, what they raise
    "hookimpl",
    "hookspecs",
    "Backend",
    "BackendInfo",
    "QueueInfo",
    "Alignment",
    "NeverSubmitted",
    "TimestampsUnsupported",
    "KprofError",
    # Capturing launches
    "active",
    "Recorder",
    "KERNEL",
    "COPY",
    "now",
    "Patcher",
    "RowNames",
    # Activity tracers (work reported after it ran)
    "deliver",
    "DeviceRecord",
    "deliver_columns",
    "ActivityColumns",
    "dropped",
    "launch_site",
    "deliver_memory",
    "activity_stats",
    # Device memory
    "allocated",
    "freed",
    # Helpers: settings and compiled parts
    "resolve_timeout",
    "compiled_enabled",
    "recorder_description",
    "load_plugin_part",
    "launch_capsules",
    "raw_launch_capsule",
]


def recorder_description() -> str:
    """Which recorder runs (compiled or pure Python) and why, in one line (``kprof backends``
    prints it): what a plugin says when its own compiled part is off for the same reason."""
    return _native.describe()


def compiled_enabled() -> bool:
    """Whether kprof's compiled parts are in use in this process (not ``KPROF_PURE_PYTHON=1``,
    built, and not turned off): a plugin's compiled parts follow the same switch."""
    return _native.compiled() is not None
