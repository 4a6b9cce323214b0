"""Device memory a profile saw allocated and freed (``Profile.memory``), as data.

Plugins report each allocation and free (``kprof.plugin.allocated``/``freed``); a profile keeps
them column-wise, in ``MemoryTable`` (``array('q')`` columns, devices and sites interned), and
``Memory`` answers from the columns: the events, live bytes over time per device, the peak,
and the allocations still live at the end (possible leaks).

How frees are matched: a free is matched with the latest allocation of the same address on the
same device that is still live; its size is that allocation's when the plugin gave none. A free
of an address the profile never saw allocated (memory allocated before the profile) is kept as
an event but changes no live count (``unmatched_frees`` counts them). An allocation at an
address still live (a free the plugin could not see) ends the earlier one there.
"""

from __future__ import annotations

import dataclasses
from array import array
from dataclasses import dataclass
from typing import Any

#: Kinds of memory events (the ``kind`` column).
FREE, ALLOC = 0, 1
MEMORY_KINDS = {FREE: "free", ALLOC: "alloc"}
#: Fields of one event in the flat row a recorder appends (the columns' order).
STRIDE = 6
_TITLES = {"opencl": "OpenCL", "cuda": "CUDA", "hip": "HIP"}


class MemoryTable:
    """Memory events, one ``array('q')`` column per field, in the order they were reported.

    ``time``: host time (``perf_counter_ns``, absolute); ``device``: index into the profile's
    memory devices; ``kind``: ``ALLOC`` or ``FREE``; ``nbytes``: the size (-1: a free whose
    size the plugin did not give); ``address``: the address or handle, as a signed 64-bit int;
    ``site``: index into the sites, or -1 when none is known.
    """

    COLUMNS = ("time", "device", "kind", "nbytes", "address", "site")

    time: array[int]
    device: array[int]
    kind: array[int]
    nbytes: array[int]
    address: array[int]
    site: array[int]

    def __init__(self) -> None:
        for c in self.COLUMNS:
            setattr(self, c, array("q"))

    @classmethod
    def from_rows(cls, rows: array[int]) -> MemoryTable:
        """The columns of a flat array of rows (``STRIDE`` values each, in column order)."""
        t = cls()
        for i, c in enumerate(cls.COLUMNS):
            setattr(t, c, rows[i::STRIDE])
        return t

    def __len__(self) -> int:
        return len(self.time)

    def extend(
        self,
        other: MemoryTable,
        device_map: list[int],
        site_map: list[int],
        time: array[int] | None = None,
    ) -> None:
        """Append ``other``'s rows, its device and site indices mapped to this table's (and
        its times replaced by ``time``, when given: shifted onto another clock)."""
        self.time.extend(other.time if time is None else time)
        self.device.extend(device_map[d] for d in other.device)
        self.kind.extend(other.kind)
        self.nbytes.extend(other.nbytes)
        self.address.extend(other.address)
        self.site.extend(-1 if s < 0 else site_map[s] for s in other.site)


@dataclass(frozen=True)
class MemoryEvent:
    """One allocation or free: ``time_ns`` relative to the profile's start, ``device`` (its
    label), ``kind`` (``"alloc"`` or ``"free"``), ``nbytes`` (-1: a free of memory allocated
    before the profile, size unknown), ``address``, ``site`` (where in the code, or None)."""

    time_ns: int
    device: str
    kind: str
    nbytes: int
    address: int
    site: str | None


@dataclass(frozen=True)
class Allocation:
    """An allocation still live at the profile's end (a possible leak): its ``device``,
    ``nbytes``, ``address``, ``time_ns`` (when it was allocated, relative to the start) and
    ``site`` (or None)."""

    device: str
    nbytes: int
    address: int
    time_ns: int
    site: str | None


#: One pass's answers (``Memory._resolve``).
_Resolved = tuple["array[int]", "array[int]", dict[tuple[int, int], int], int]


def device_label(backend: str, device: str) -> str:
    """A memory device as views name it, as ``device_title`` names queues' devices:
    ``"OpenCL <device>"``, or the device alone when it starts with the backend's title, or
    when the backend is ``""`` (devices of several ranks, named in full by ``combine``)."""
    if not backend:
        return device
    title = _TITLES.get(backend, backend)
    return device if device.lower().startswith(title.lower()) else f"{title} {device}"


class Memory:
    """``Profile.memory``: the device memory the profile saw allocated and freed.

    Data: ``table`` (a ``MemoryTable``), ``devices`` (``(backend, device)`` pairs its ``device``
    column indexes), ``sites`` (the launch sites its ``site`` column indexes), ``start_ns`` (the
    profile's start, which relative times count from). Answers, per device label
    (``labels``): ``peak``, ``peak_at`` (relative ns), ``live(label)`` (live bytes over time),
    ``live_at_end`` (allocations never freed), ``events``; ``unmatched_frees``. Empty (false)
    when the profile's backends report no memory.
    """

    def __init__(
        self,
        table: MemoryTable | None = None,
        devices: list[tuple[str, str]] | None = None,
        sites: list[str] | None = None,
        start_ns: int = 0,
    ) -> None:
        self.table = table if table is not None else MemoryTable()
        self.devices = list(devices or [])
        self.sites = list(sites or [])
        self.start_ns = start_ns
        self._resolved: _Resolved | None = None

    def __len__(self) -> int:
        return len(self.table)

    def __bool__(self) -> bool:
        return len(self.table) > 0

    def __repr__(self) -> str:
        return f"<kprof Memory: {len(self)} events, peak {self.peak}>"

    @property
    def labels(self) -> list[str]:
        """Each device's label, in the order of ``devices``."""
        return [device_label(b, d) for b, d in self.devices]

    def _site(self, i: int) -> str | None:
        return None if i < 0 else self.sites[i]

    def _resolve(self) -> _Resolved:
        """One pass over the events: each event's signed change of live bytes, the live bytes
        of its device after it, the allocations left live ((device, address) -> row), and the
        count of unmatched frees. Cached (the table does not change once the profile ended)."""
        if self._resolved is not None:
            return self._resolved
        t = self.table
        delta, after = array("q", bytes(8 * len(t))), array("q", bytes(8 * len(t)))
        live = [0] * len(self.devices)
        open_: dict[tuple[int, int], int] = {}
        unmatched = 0
        for i, (dev, kind, nbytes, addr) in enumerate(zip(t.device, t.kind, t.nbytes, t.address)):
            key = (dev, addr)
            prev = open_.pop(key, None)
            if kind == ALLOC:
                change = nbytes - (0 if prev is None else t.nbytes[prev])
                open_[key] = i
            elif prev is not None:
                change = -t.nbytes[prev]
            else:
                change = 0
                unmatched += 1
            live[dev] += change
            delta[i], after[i] = change, live[dev]
        self._resolved = (delta, after, open_, unmatched)
        return self._resolved

    @property
    def live_after(self) -> array[int]:
        """Per event (row of ``table``): the live bytes of its device after it."""
        return self._resolve()[1]

    @property
    def peak(self) -> dict[str, int]:
        """The most bytes live at once on each device (allocations made in the profile)."""
        return {label: b for label, (b, _t) in self._peaks().items()}

    @property
    def peak_at(self) -> dict[str, int]:
        """When each device's peak was first reached (ns, relative to the start)."""
        return {label: t for label, (_b, t) in self._peaks().items()}

    def _peaks(self) -> dict[str, tuple[int, int]]:
        _delta, after, _open, _u = self._resolve()
        labels, t = self.labels, self.table
        best: list[tuple[int, int]] = [(0, 0)] * len(self.devices)
        for i, (dev, live) in enumerate(zip(t.device, after)):
            if live > best[dev][0]:
                best[dev] = (live, t.time[i] - self.start_ns)
        return dict(zip(labels, best))

    def live(self, device: str) -> tuple[list[int], list[int]]:
        """Live bytes on one device (its label) over time: ``(times, bytes)``, one point per
        event of that device, times relative to the start; bytes after each event."""
        idx = self.labels.index(device) if device in self.labels else None
        if idx is None:
            raise KeyError(f"no memory events on device {device!r}; devices: {self.labels}")
        _delta, after, _open, _u = self._resolve()
        t, o = self.table, self.start_ns
        rows = [i for i, d in enumerate(t.device) if d == idx]
        return [t.time[i] - o for i in rows], [after[i] for i in rows]

    @property
    def live_at_end(self) -> list[Allocation]:
        """Allocations made in the profile and never freed in it, largest first."""
        _delta, _after, open_, _u = self._resolve()
        t, labels = self.table, self.labels
        out = [
            Allocation(
                labels[t.device[i]],
                t.nbytes[i],
                t.address[i],
                t.time[i] - self.start_ns,
                self._site(t.site[i]),
            )
            for i in sorted(open_.values())
        ]
        return sorted(out, key=lambda a: -a.nbytes)

    @property
    def live_bytes_at_end(self) -> dict[str, int]:
        """Bytes still live at the end on each device."""
        out = dict.fromkeys(self.labels, 0)
        for a in self.live_at_end:
            out[a.device] += a.nbytes
        return out

    @property
    def unmatched_frees(self) -> int:
        """Frees of memory the profile never saw allocated (allocated before it began)."""
        return self._resolve()[3]

    def to_dict(self) -> dict[str, Any]:
        """As JSON-able data (what ``Profile.to_json`` holds under ``"memory"``)."""
        return memory_dict(self)

    def to_dataframe(self) -> Any:
        """The events as a ``pandas.DataFrame`` (``MemoryEvent``'s fields and ``live_bytes``).

        Needs pandas, which kprof does not depend on: ``pip install pandas``.
        """
        try:
            import pandas
        except ImportError as exc:
            raise ImportError(
                "Memory.to_dataframe() needs pandas, which is not installed: pip install "
                "pandas (or use to_dict(), which needs nothing)"
            ) from exc
        cols = ["time_ns", "device", "kind", "nbytes", "address", "site", "live_bytes"]
        return pandas.DataFrame(memory_records(self), columns=cols)

    @property
    def events(self) -> list[MemoryEvent]:
        """Every allocation and free, in the order reported; a free's size is its allocation's."""
        delta, _after, _open, _u = self._resolve()
        t, labels, o = self.table, self.labels, self.start_ns
        return [
            MemoryEvent(
                t.time[i] - o,
                labels[t.device[i]],
                MEMORY_KINDS[t.kind[i]],
                t.nbytes[i] if t.kind[i] == ALLOC else (-delta[i] if delta[i] else t.nbytes[i]),
                t.address[i],
                self._site(t.site[i]),
            )
            for i in range(len(t))
        ]


def memory_records(m: Memory) -> list[dict[str, Any]]:
    """Every event as a JSON-able dict (``MemoryEvent``'s fields and ``live_bytes``: its
    device's live bytes after it)."""
    return [
        {**dataclasses.asdict(e), "live_bytes": live} for e, live in zip(m.events, m.live_after)
    ]


def memory_dict(m: Memory) -> dict[str, Any]:
    """``Memory`` as JSON-able data: ``devices``, ``peak``, ``peak_at_ns``,
    ``live_bytes_at_end``, ``live_at_end`` (allocations), ``unmatched_frees``, ``events``."""
    return {
        "devices": m.labels,
        "peak": m.peak,
        "peak_at_ns": m.peak_at,
        "live_bytes_at_end": m.live_bytes_at_end,
        "live_at_end": [dataclasses.asdict(a) for a in m.live_at_end],
        "unmatched_frees": m.unmatched_frees,
        "events": memory_records(m),
    }


__all__ = [
    "ALLOC",
    "FREE",
    "MEMORY_KINDS",
    "STRIDE",
    "Allocation",
    "Memory",
    "MemoryEvent",
    "MemoryTable",
    "device_label",
]
