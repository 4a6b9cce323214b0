"""Throughput the user says (``kprof.annotate`` by name): the registry, and how a profile's
end gives it to the kernel rows of those names.

Bytes and flops of single calls travel in the pending entries instead (``kprof.range(name,
flops=, bytes=)`` in its device rows' entries, an annotated kernel object's call as an
``ENTRY_ANNOTATE`` entry, ``harvest_take.annotate``): nothing here runs at launch.
"""

from __future__ import annotations

from kprof_core.data.records import KERNEL, DeviceTable

#: Kernel name -> (bytes, flops) per launch (-1: not said), process-wide.
BY_NAME: dict[str, tuple[int, int]] = {}


def apply_names(table: DeviceTable, names: list[str]) -> int:
    """At a profile's end: every kernel row named in ``BY_NAME`` that has no values of its own
    gets the name's. Returns how many rows were given some (one pass only when a name is
    annotated and recorded)."""
    said = {i: BY_NAME[n] for i, n in enumerate(names) if n in BY_NAME}
    if not said:
        return 0
    t, given = table, 0
    for row, (nid, kind) in enumerate(zip(t.name, t.kind)):
        v = said.get(nid)
        if v is None or kind != KERNEL:
            continue
        b, f = v
        if b >= 0 and t.nbytes[row] < 0:
            t.nbytes[row] = b
        if f >= 0 and t.flops[row] < 0:
            t.flops[row] = f
        given += 1
    return given
