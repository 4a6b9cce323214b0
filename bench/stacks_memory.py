"""What stacks add per record, in memory and in ``.kprof`` files, on 1M launches from 1,000
distinct sites (``python bench/stacks_memory.py [N]``; the issue's target: at most 8 B).

A tiny PyOpenCL kernel launched N times (default 1,000,000) from 1,000 functions of generated
user code (1,000 lines, so 1,000 sites and 1,000 stacks), called in a shuffled order (seed
0) under 30 frames of user code, so that each stack has 32 frames. Profiled twice on the
compiled path, with ``sites=True`` and with ``stacks=True``; the figures are the differences:

- in memory: the bytes of the tables' columns (``array`` buffers) and of the resolved sites
  and stacks (each object counted once, ``sys.getsizeof``), stacks minus sites, per record;
- in the file: the ``.kprof`` file's size, stacks minus sites, per record.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from harness import opencl


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of ``obj`` and what it holds (tuples, lists, dataclasses, strs), each once."""
    seen = set() if seen is None else seen
    todo, total = [obj], 0
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, (tuple, list)):
            todo.extend(o)
        elif hasattr(o, "__dataclass_fields__"):
            todo.extend(getattr(o, f) for f in o.__dataclass_fields__)
    return total


def main(n: int = 1_000_000, distinct: int = 1000) -> dict[str, Any]:
    import kprof

    _cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    src = "".join(f"def site{i}(k, q, g, b):\n    k(q, g, None, b)\n" for i in range(distinct))
    user: dict[str, Any] = {"__name__": "user_code"}
    exec(compile(src, "/bench/user_code.py", "exec"), user)
    funcs = [user[f"site{i}"] for i in range(distinct)]
    order = [funcs[i % distinct] for i in range(n)]
    random.Random(0).shuffle(order)
    g = (64,)

    def down(k: int) -> None:
        if k:
            return down(k - 1)
        for i, f in enumerate(order):
            f(tiny, q, g, buf)
            if i % 50_000 == 0:
                q.finish()
        return None

    out: dict[str, Any] = {"launches": n, "distinct_sites": distinct}
    sizes: dict[str, dict[str, int]] = {}
    for mode, kw in (("sites", {"sites": True}), ("stacks", {"stacks": 32})):
        with kprof.profile(backends=["opencl"], **kw) as p:
            down(30)
        assert len(p.kernels) == n and len(p.sites) == distinct, (len(p.kernels), len(p.sites))
        if mode == "stacks":
            assert len(p.stacks) == distinct and all(len(s) == 32 for s in p.stacks)
        cols = sum(c.buffer_info()[1] * c.itemsize for c in (*p.table.columns(), p.table.stack))
        cols += sum(getattr(p.host, c).buffer_info()[1] * 8 for c in (*p.host.COLUMNS, "stack"))
        seen: set[int] = set()
        interned = deep_size(p.sites, seen) + deep_size(p.stacks, seen)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.kprof")
            p.save(path)
            fsize = os.path.getsize(path)
        sizes[mode] = {"columns_bytes": cols, "interned_bytes": interned, "file_bytes": fsize}
        del p
    out["sizes"] = sizes
    s, t = sizes["sites"], sizes["stacks"]
    out["memory_per_record_b"] = round(
        (t["columns_bytes"] + t["interned_bytes"] - s["columns_bytes"] - s["interned_bytes"]) / n, 2
    )
    out["file_per_record_b"] = round((t["file_bytes"] - s["file_bytes"]) / n, 2)
    return out


if __name__ == "__main__":
    print(json.dumps(main(*(int(a) for a in sys.argv[1:])), indent=2))
