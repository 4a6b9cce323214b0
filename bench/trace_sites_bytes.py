"""What launch sites add to a Chrome trace: bytes per event, on 100,000 launches.

``python bench/trace_sites_bytes.py [N] [SITES]`` builds one profile of N launches (default
100,000) from SITES distinct lines of code (default 1,000), a ``step`` range around every 10
launches, directly in the tables (as the recorder leaves them: deterministic, no device), and
writes its Chrome trace twice: with the sites, and with the same rows without them. It prints
the sizes, the bytes added per launch and per trace event, and what the same sites would have
cost written out per event as text (``"site"``, ``"file"``, ``"line"`` arguments, as kprof
wrote them before the stack ids).
"""

from __future__ import annotations

import io
import json
import sys
from array import array

from kprof_core.data.records import KERNEL, PLACED, HostTable, QueueRecord, ThreadRecord
from kprof_core.data.sites import Site
from kprof_core.renderers.chrome import write_chrome_trace
from kprof_core.result import Profile


def build(n: int, n_sites: int) -> Profile:
    p = Profile()
    p.meta = {"host": "bench", "pid": 1}
    p.names = ["step", "gemm", "softmax", "layernorm"]
    p.queues = [QueueRecord("testdev", "dev 0", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.sites = sorted(
        Site(f"/home/user/project/model/layer_{k // 10:03d}.py", 40 + k % 10, f"forward_{k % 7}")
        for k in range(n_sites)
    )
    t0, now = 1_000_000_000, 1_000_000_000
    p.start_ns = t0
    for i in range(n):
        if i % 10 == 0:
            p.host.append(0, HostTable.RANGE, 0, now, now + 10 * 3000 - 500, (i // 10) % n_sites)
        p.table.append(
            1 + i % 3, KERNEL, 0, 0, now, now + 1000, now + 1500, 2000, -1, PLACED, i % n_sites
        )
        now += 3000
    p.end_ns = now + 5000
    return p


def size(p: Profile) -> tuple[int, int, int]:
    """The trace's bytes, its events, and the bytes of its stacks and frames table."""
    buf = io.StringIO()
    write_chrome_trace(buf, [p])
    text = buf.getvalue()
    data = json.loads(text)
    other = data["otherData"]
    table = sum(len(f', "{k}": {json.dumps(other[k])}') for k in ("frames", "stacks") if k in other)
    return len(text.encode()), len(data["traceEvents"]), table


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    n_sites = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000
    p = build(n, n_sites)
    with_sites, events, table = size(p)
    sites, dsite, hsite = p.sites, p.table.site, p.host.site
    # The old layout: the site as text on every launch and range event.
    as_text = sum(
        len(f',"site":{json.dumps(s.label)},"file":{json.dumps(s.file)},"line":{s.line}')
        for col in (dsite, hsite)
        for s in (sites[i] for i in col)
    )
    p.sites = []
    p.table.site = array("q", [-1] * len(dsite))
    p.host.site = array("q", [-1] * len(hsite))
    without, events_off, _ = size(p)
    assert events == events_off
    added = with_sites - without
    print(f"{n} launches from {n_sites} sites, {len(hsite)} ranges, {events} trace events")
    print(f"trace without sites: {without} B; with sites (stack ids): {with_sites} B")
    print(f"added: {added} B = {added / n:.1f} B per launch, {added / events:.2f} B per event")
    print(
        f"of which the stacks and frames table: {table} B; the ids on events: "
        f"{(added - table) / n:.1f} B per launch"
    )
    print(
        f"the same sites as text per event (site, file, line): {as_text} B = "
        f"{as_text / n:.1f} B per launch, {as_text / events:.2f} B per event"
    )


if __name__ == "__main__":
    main()
