"""Nested profiles: a finished inner profile's rows taken into the outer one's tables, so
that the outer profile has them too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kprof_core.data.records import PLACED, DeviceTable, HostTable
from kprof_core.recording.configs import TEXT
from kprof_core.recording.sites import raw_of as raw_site
from kprof_core.recording.sites import raw_of_stack

if TYPE_CHECKING:
    from kprof_core.data.records import DeviceClock, Recording
    from kprof_core.recording.tables import Tables


def absorb(into: Tables, clocks: dict[str, DeviceClock], child: Recording) -> None:
    """Append ``child``'s rows to ``into`` (the caller holds the harvest's lock), its ids
    mapped to the outer profile's; its resolved sites and configurations become raw ids and
    text again, as the outer profile's end resolves its own."""
    qmap = [into.intern_queue(q) for q in child.queues]
    tmap = [into.intern_thread(th) for th in child.threads]
    nmap = [into.names(n) for n in child.names]
    smap = {i: raw_site(s) for i, s in enumerate(child.sites)}
    smap[-1] = -1
    cmap = [into.configs.intern(TEXT, c) for c in child.configs] + [-1]
    stmap = [raw_of_stack(st) for st in child.stacks]
    ct = child.table

    def raw(t: DeviceTable | HostTable, i: int) -> int:
        sid = t.stack[i] if t.stack else -1
        return stmap[sid] if sid >= 0 else smap[t.site[i]]

    table = into.table
    for i in range(len(ct)):
        row = table.append(
            nmap[ct.name[i]],
            ct.kind[i],
            qmap[ct.queue[i]],
            tmap[ct.thread[i]],
            ct.launch_start[i],
            ct.launch_end[i],
            ct.start[i],
            ct.duration[i],
            ct.nbytes[i],
            ct.flags[i] | PLACED,
            raw(ct, i),
            cmap[ct.config[i]],
            ct.flops[i],
        )
        if i in child.errors:
            into.errors[row] = child.errors[i]
        if i in child.details:
            into.details[row] = child.details[i]
    ch = child.host
    for i in range(len(ch)):
        into.host.append(
            nmap[ch.name[i]], ch.kind[i], tmap[ch.thread[i]], ch.start[i], ch.end[i], raw(ch, i)
        )
    for k, v in child.clocks.items():
        clocks.setdefault(k, v)
