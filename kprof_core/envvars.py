"""Every environment variable kprof reads, in one place: its name, default and meaning.

The code reads each variable through the name defined here (the bundled plugins, which import
only ``kprof.plugin``, keep a constant of the same name, checked by ``tests/test_docs_site.py``),
and the docs render their reference page from ``VARIABLES``: a variable the code reads and this
list lacks fails that test, so the page never misses one. Descriptions are reStructuredText.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    """One variable: ``name``, its ``default`` (as the user would write it, ``""`` for unset),
    ``description`` (reStructuredText) and ``audience`` (``"user"``, or ``"testing"`` for
    variables that exist for kprof's own tests)."""

    name: str
    default: str
    description: str
    audience: str = "user"


DISABLE_PLUGIN_AUTOLOAD = "KPROF_DISABLE_PLUGIN_AUTOLOAD"
PLUGINS = "KPROF_PLUGINS"
DISCOVERY_TIMEOUT = "KPROF_DISCOVERY_TIMEOUT"
RESOLVE_TIMEOUT = "KPROF_RESOLVE_TIMEOUT"
PURE_PYTHON = "KPROF_PURE_PYTHON"
SITES = "KPROF_SITES"
STACKS = "KPROF_STACKS"
RUN_RESTARTED = "KPROF_RUN_RESTARTED"
CUPTI_LIBRARY = "KPROF_CUPTI_LIBRARY"
OPENCL_HOOK = "KPROF_OPENCL_HOOK"
OPENCL_MEMORY = "KPROF_OPENCL_MEMORY"
TEST_CLOCK_SKEW_NS = "KPROF_TEST_CLOCK_SKEW_NS"
STEPS = "KPROF_STEPS"
WINDOW_SIGNAL = "KPROF_WINDOW_SIGNAL"

_SECONDS = (
    " Seconds above 0 and at most a week (604800); a value that is not (``soon``, ``-1``, "
    "``inf``, ``1e10``) gets a ``RuntimeWarning`` and the default, so a typo neither stops a "
    "run nor loses its files."
)

VARIABLES: tuple[EnvVar, ...] = (
    EnvVar(
        DISABLE_PLUGIN_AUTOLOAD,
        "",
        "``1`` (or ``true``, ``yes``, ``on``): load no backend plugin from entry points; only "
        "plugins registered in code are used. A value that is not a boolean is an error.",
    ),
    EnvVar(
        PLUGINS,
        "",
        "A comma-separated list of backend names (``opencl,cuda``): load only these. An unknown "
        "name is an error that lists the installed backends.",
    ),
    EnvVar(
        DISCOVERY_TIMEOUT,
        "20",
        "Seconds a plugin's import, its ``describe_backend``, and its first "
        "``install_capture`` may each take, also when the program's import of a vendor "
        "library starts the backend; a plugin that does not answer in time is listed as "
        "``error: did not answer in N s`` and not used. ``0`` waits without a bound (and calls "
        "the plugins in the calling thread, for a plugin that must)." + _SECONDS,
    ),
    EnvVar(
        RESOLVE_TIMEOUT,
        "60",
        "Seconds, in all, that a profile's end may spend reading the devices' timestamps; "
        "records whose work had not completed by then are kept as unresolved. "
        "``profile(timeout=...)`` wins over it." + _SECONDS,
    ),
    EnvVar(
        PURE_PYTHON,
        "",
        "``1``: do not load the compiled recorder (same records, more time per launch). Without "
        "a C compiler at install time, or on free-threaded CPython, the pure-Python recorder is "
        "the default. ``kprof backends`` says which recorder runs.",
    ),
    EnvVar(
        SITES,
        "",
        "``1`` (or ``true``, ``yes``, ``on``): profiles keep each record's launch site, the "
        "line of the user's code behind it (``profile(sites=...)`` wins); ``kprof run`` and the "
        "pytest plugin honour it too. Off by default for its cost per launch (about 0.2 µs "
        "compiled, 0.5 µs in pure Python: BENCHMARKS.md). A value that is not a boolean is an "
        "error.",
    ),
    EnvVar(
        STACKS,
        "",
        "``1`` (or ``true``, ``yes``, ``on``): profiles keep each record's launch stack, the "
        "Python frames behind it up to 32 deep (implies sites); a number from 2 to 256: that "
        "depth. ``profile(stacks=...)`` wins. Off by default for its cost per launch "
        "(BENCHMARKS.md). A value that is neither is an error.",
    ),
    EnvVar(
        CUPTI_LIBRARY,
        "",
        "The path of the ``libcupti`` the CUDA backend loads, before any copy already loaded "
        "in the process, the ``nvidia-cuda-cupti`` wheel's and the system CUDA's.",
    ),
    EnvVar(
        OPENCL_HOOK,
        "",
        "``preload``: the OpenCL backend never writes an ICD dispatch table and uses the "
        "``LD_PRELOAD`` interposer that ``kprof run`` preloads instead (for an ICD whose table "
        "misbehaves when written).",
    ),
    EnvVar(
        OPENCL_MEMORY,
        "",
        "OpenCL device memory (``Profile.memory``): by default on wherever the dispatch-table "
        "hook is installed (every ``clCreateBuffer``/``clSVMAlloc`` of the process, nothing in "
        "PyOpenCL changed), off elsewhere. ``0``: off. ``1``: also where the hook cannot be "
        "installed (pure Python, not built, a refused table, ``KPROF_OPENCL_HOOK=preload``), "
        "through a ``pyopencl.Buffer`` subclass while a profile runs, which is not transparent "
        "(a buffer made before the profile is then no ``pyopencl.Buffer`` inside it).",
    ),
    EnvVar(
        STEPS,
        "",
        "``FIRST:LAST`` (``100:110``): ``kprof run`` records only these steps of a script that "
        "calls ``kprof.step()``, as ``--steps FIRST:LAST`` does, when its command line has "
        "neither ``--steps`` nor ``--signal`` (a job script that cannot be changed).",
    ),
    EnvVar(
        WINDOW_SIGNAL,
        "",
        "``1`` (or ``true``, ``yes``, ``on``): ``kprof run`` opens a window when the process "
        "gets ``SIGUSR2`` and closes it at the next (at once in a script without "
        "``kprof.step()``, else at the next step), as "
        "``--signal`` does, when its command line has neither ``--steps`` nor ``--signal``. "
        "Not with ``KPROF_STEPS``. A value that is not a boolean is an error.",
    ),
    EnvVar(
        RUN_RESTARTED,
        "",
        "Set to ``1`` by ``kprof run`` in the process it restarts with the environment a "
        "backend asked for (``exec_environment``), so that it never restarts twice. Not for "
        "users to set.",
        audience="internal",
    ),
    EnvVar(
        TEST_CLOCK_SKEW_NS,
        "",
        "For testing MPI clock alignment only: comma-separated nanoseconds by which each "
        "rank's host clock pretends to be off (``0,5000000``).",
        audience="testing",
    ),
)

BY_NAME = {v.name: v for v in VARIABLES}
