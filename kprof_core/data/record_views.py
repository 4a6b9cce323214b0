"""Record views over a device table: ``KernelRecord``s built one by one, only when asked for
(``Profile.kernels``, ``device_ranges``, ``unresolved``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kprof_core.data.records import (
    APPROXIMATE,
    HOST_TIMED,
    KIND_NAMES,
    UNRESOLVED,
    DeviceTable,
    KernelRecord,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.data.sites import Site


def iter_device_records(
    table: DeviceTable,
    names: list[str],
    queues: list[QueueRecord],
    threads: list[ThreadRecord],
    errors: dict[int, str],
    origin: int = 0,
    sites: Sequence[Site] = (),
    configs: Sequence[str] = (),
) -> Iterator[KernelRecord]:
    """Build record views; times are given relative to ``origin``."""
    site_col, config_col, flops_col = table.site, table.config, table.flops
    for i in range(len(table)):
        q = queues[table.queue[i]]
        flags = table.flags[i]
        nbytes = table.nbytes[i]
        yield KernelRecord(
            name=names[table.name[i]],
            kind=KIND_NAMES[table.kind[i]],
            backend=q.backend,
            device=q.device,
            queue=q.label,
            thread=threads[table.thread[i]].label,
            start_ns=table.start[i] - origin,
            duration_ns=table.duration[i],
            launch_start_ns=table.launch_start[i] - origin,
            launch_end_ns=table.launch_end[i] - origin,
            nbytes=None if nbytes < 0 else nbytes,
            host_timed=bool(flags & HOST_TIMED),
            error=errors.get(i) if flags & UNRESOLVED else None,
            approximate=bool(flags & APPROXIMATE),
            site=sites[site_col[i]] if site_col[i] >= 0 else None,
            config=configs[config_col[i]] if config_col[i] >= 0 else None,
            flops=flops_col[i] if flops_col[i] >= 0 else None,
        )
