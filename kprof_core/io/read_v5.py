"""The reader of format version 5 (``fileformat.py``): every column of each table (the device
and host records with their launch sites, stacks, configurations and flops; the device-memory
events), and the header fields they index. The header and the columns are read and checked by
``read_frame``, as for version 1; what version 5 adds to the header is checked here."""

from __future__ import annotations

from array import array
from typing import Any, TypeVar

from kprof_core.data.memory import MEMORY_KINDS, Memory, MemoryTable
from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import STACK_TYPE, DeviceTable, HostTable
from kprof_core.data.sites import Site
from kprof_core.data.values import VALUE_LIMIT
from kprof_core.io.filecheck import Checker
from kprof_core.io.fileformat import MAX_STACK_FRAMES
from kprof_core.io.read_v1 import read_frame

P = TypeVar("P", bound=ProfileData)

#: Every column of version 5, in the order a file lists them.
V5_COLUMNS = {
    "device": (*DeviceTable.COLUMNS, "stack"),
    "host": (*HostTable.COLUMNS, "stack"),
    "memory": MemoryTable.COLUMNS,
}


def _sites(r: Checker, rows: Any, what: str) -> list[Site]:
    sites = [Site(f, line, fn) for f, line, fn in r.rows(rows, what, (str, int, str))]
    if any(s.line < 0 for s in sites):
        raise r.fail(f"header field {what!r} has a negative line")
    return sites


def read_v5(data: bytes, pos: int, name: str, cls: type[P]) -> P:
    p, header, r, more = read_frame(data, pos, name, cls, V5_COLUMNS)

    # Launch sites and stacks: -1 in a row's column where none is known.
    p.sites = _sites(r, r.get(header, "sites", list), "sites")
    frames = _sites(r, r.get(header, "frames", list), "frames")
    raw_stacks = r.get(header, "stacks", list)
    if not all(
        isinstance(s, list) and s and all(type(i) is int and 0 <= i < len(frames) for i in s)
        for s in raw_stacks
    ):
        raise r.fail("header field 'stacks' is not a list of lists of frame indexes")
    deepest = max(map(len, raw_stacks), default=0)
    if deepest > MAX_STACK_FRAMES:
        raise r.fail(
            f"a stack holds {deepest} frames, more than the {MAX_STACK_FRAMES} kprof records"
        )
    p.stacks = tuple(tuple(frames[i] for i in s) for s in raw_stacks)
    for records, label in ((p.table, "device"), (p.host, "host")):
        r.between(records.site, -1, len(p.sites) - 1, f"{label}.site")
        r.between(records.stack, -1, len(p.stacks) - 1, f"{label}.stack")
        # Without stacks (every row -1), the column is held empty, as the recorder leaves it.
        records.stack = array(STACK_TYPE, records.stack if p.stacks else ())

    # Launch configurations (the texts the column indexes) and the flops a user gave.
    configs = r.get(header, "configs", list)
    if not all(isinstance(c, str) for c in configs):
        raise r.fail("header field 'configs' is not a list of strings")
    p.configs = configs
    r.between(p.table.config, -1, len(configs) - 1, "device.config")
    r.between(p.table.flops, -1, VALUE_LIMIT - 1, "device.flops")

    # Device memory: the events, the devices and the allocation sites they index.
    mem = r.get(header, "memory", dict)
    devices = r.rows(mem.get("devices"), "memory.devices", (str, str))
    memory_sites = r.get(mem, "sites", list)
    if not all(isinstance(s, str) for s in memory_sites):
        raise r.fail("header field 'memory.sites' holds a non-string")
    table = MemoryTable()
    for column, values in more["memory"].items():
        setattr(table, column, values)
    r.index(table.device, len(devices), "memory device")
    r.between(table.kind, min(MEMORY_KINDS), max(MEMORY_KINDS), "memory.kind")
    r.between(table.nbytes, -1, 2**63 - 1, "memory.nbytes")
    r.between(table.site, -1, len(memory_sites) - 1, "memory.site")
    if len(table) or devices:
        p.memory = Memory(table, [(b, d) for b, d in devices], list(memory_sites), p.start_ns)
    return p
