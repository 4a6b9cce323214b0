"""What reporting HIP allocations costs per ``hipMalloc`` + ``hipFree`` (issue 23), against the
HIP test double (tests/hip_double), in CPU time of the calling thread, paired:

    python tests/hip_double/build.py tests/hip_double/build
    ROCM_PATH=tests/hip_double/build python bench/memory_hip.py [--rounds 21]

Each round: N pairs in a profile of the hip backend (the wrappers report two events) and N
outside any profile (the originals), the order flipped every other round; printed: the medians
of each and of the per-round difference, on both recorder paths.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

N = 20_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=21)
    rounds = ap.parse_args().rounds
    from hip import hip

    import kprof
    from kprof_core.low_level import native

    def pairs() -> float:
        malloc, free = hip.hipMalloc, hip.hipFree  # the wrappers while a profile runs
        t0 = time.thread_time_ns()
        for _ in range(N):
            free(malloc(256)[1])
        return (time.thread_time_ns() - t0) / N

    def profiled(compiled: bool) -> float:
        native.use_compiled(compiled)
        try:
            with kprof.profile(backends="hip") as p:
                ns = pairs()
            assert len(p.memory) == 2 * N, len(p.memory)
            return ns
        finally:
            native.use_compiled(True)

    out: dict[str, float] = {}
    for label, compiled in (("compiled", True), ("pure", False)):
        on: list[float] = []
        off: list[float] = []
        for r in range(rounds):
            for which in ("on", "off") if r % 2 else ("off", "on"):
                (on if which == "on" else off).append(
                    profiled(compiled) if which == "on" else pairs()
                )
        out[f"{label}_off_ns"] = statistics.median(off)
        out[f"{label}_on_ns"] = statistics.median(on)
        out[f"{label}_delta_ns"] = statistics.median(a - b for a, b in zip(on, off))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
