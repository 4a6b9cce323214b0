"""Who made a profile, and what its host clock can be tied to.

Every profile's ``meta`` records the process that made it (host, pid, rank and world size when
a launcher or mpi4py says so) and the facts needed to put its times on a common timeline:

* ``clock_domain``: which host clock the times are on. kprof's host clock is
  ``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux), shared by every process of one boot of
  one machine; the domain is that boot's id, so profiles with equal domains need no alignment.
* ``wall_anchor``: ``time.time_ns()`` read together with ``perf_counter_ns()`` (``perf_ns`` is
  the middle of the tightest of a few brackets, ``bracket_ns`` its width). Across machines with
  no measured offset, the wall clocks (as synchronized as NTP keeps them) are the fallback.
* ``clock_offset_ns``/``clock_error_ns``/``clock_drift``: set by ``kprof.mpi`` when it measured
  this process's clock against rank 0 (add the offset to this profile's times to put them on
  rank 0's clock).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import warnings
from typing import Any

from kprof_core.host.backend import KprofError

#: Launcher variables that give (rank, world size), in the order they are consulted.
LAUNCHER_VARIABLES: tuple[tuple[str, str], ...] = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI
    ("PMI_RANK", "PMI_SIZE"),  # MPICH (Hydra), Intel MPI
    ("RANK", "WORLD_SIZE"),  # torchrun, torch.distributed
    ("SLURM_PROCID", "SLURM_NTASKS"),  # srun
)

_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def _int_var(var: str, value: str, minimum: int) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = None
    if n is None or n < minimum:
        raise KprofError(
            f"environment variable {var}={value!r} is not an integer ≥ {minimum}; "
            f"fix or unset it (kprof reads it to know this process's rank)"
        )
    return n


def _from_mpi4py() -> tuple[int, int] | None:
    """Rank and size of MPI_COMM_WORLD, only if the program already initialized MPI.

    Never imports mpi4py (that would initialize MPI behind the program's back).
    """
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None:
        return None
    try:
        if not mod.Is_initialized() or mod.Is_finalized():
            return None
        world = mod.COMM_WORLD
        return int(world.Get_rank()), int(world.Get_size())
    except Exception:  # a broken or mocked MPI: fall back to the launcher variables
        return None


def _from_environment(
    environ: dict[str, str] | os._Environ[str],
) -> tuple[int, int | None, str] | None:
    for rank_var, size_var in LAUNCHER_VARIABLES:
        raw = environ.get(rank_var)
        if raw is None or not raw.strip():
            continue
        rank = _int_var(rank_var, raw, 0)
        size_raw = environ.get(size_var)
        size = (
            _int_var(size_var, size_raw, 1) if size_raw is not None and size_raw.strip() else None
        )
        if size is not None and rank >= size:
            raise KprofError(
                f"environment variables {rank_var}={rank} and {size_var}={size} disagree "
                f"(a rank must be below the world size); fix or unset them"
            )
        return rank, size, rank_var
    return None


def process_identity(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The calling process: ``host``, ``pid``, and ``rank``/``world_size`` when known.

    The rank comes from mpi4py if the program already initialized MPI, else from the first
    launcher variable set (``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, ``RANK``, ``SLURM_PROCID``,
    with the matching size variable); ``rank_source`` says which. A malformed value raises
    ``KprofError`` naming the variable.
    """
    ident: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    mpi = _from_mpi4py() if environ is None else None
    if mpi is not None:
        ident["rank"], ident["world_size"] = mpi
        ident["rank_source"] = "mpi4py"
        return ident
    env = _from_environment(os.environ if environ is None else environ)
    if env is not None:
        ident["rank"], size, ident["rank_source"] = env
        if size is not None:
            ident["world_size"] = size
    return ident


_domain: list[str] = []  # clock_domain(), read once per process


def clock_domain() -> str:
    """An id shared by exactly the processes whose ``perf_counter_ns`` is the same clock.

    On Linux this is the kernel's boot id (CLOCK_MONOTONIC counts from boot); elsewhere the
    host name, which assumes a system-wide monotonic clock (true on macOS and Windows).
    Read once per process (the boot id does not change while it runs): a long run's windows
    each ask, and in one measured each read left ~70 bytes more traced memory behind, held
    by CPython past a full collection.
    """
    if not _domain:
        _domain.append(_read_clock_domain())
    return _domain[0]


def _read_clock_domain() -> str:
    try:
        with open(_BOOT_ID_PATH, encoding="ascii") as f:
            boot = f.read().strip()
        if boot:
            return f"boot:{boot}"
    except OSError:
        pass
    return f"host:{socket.gethostname()}"


def wall_anchor(rounds: int = 5) -> dict[str, int]:
    """``time.time_ns()`` paired with ``perf_counter_ns()``; the tightest of ``rounds`` brackets."""
    best: tuple[int, int, int] | None = None
    for _ in range(rounds):
        a = time.perf_counter_ns()
        wall = time.time_ns()
        b = time.perf_counter_ns()
        if best is None or b - a < best[2]:
            best = (wall, (a + b) // 2, b - a)
    assert best is not None
    return {"wall_ns": best[0], "perf_ns": best[1], "bracket_ns": best[2]}


def fill_meta(meta: dict[str, Any]) -> None:
    """Add identity and clock facts to a finished profile's ``meta`` (existing keys win).

    A malformed launcher variable must not lose the profile: it is reported as a warning and
    the rank is left out.
    """
    try:
        ident = process_identity()
    except KprofError as exc:
        warnings.warn(f"kprof: rank unknown: {exc}", RuntimeWarning, stacklevel=3)
        ident = {"host": socket.gethostname(), "pid": os.getpid()}
    for k, v in ident.items():
        meta.setdefault(k, v)
    meta.setdefault("host_clock", "perf_counter_ns")
    meta.setdefault("clock_domain", clock_domain())
    meta.setdefault("wall_anchor", wall_anchor())


def source_label(meta: dict[str, Any]) -> str:
    """How a process is named in merged reports: ``rank 3``, else ``host:pid``."""
    sources = meta.get("sources")
    if isinstance(sources, list):
        return f"merged ({len(sources)} processes)"
    if meta.get("rank") is not None:
        return f"rank {meta['rank']}"
    return f"{meta.get('host', '?')}:{meta.get('pid', '?')}"
