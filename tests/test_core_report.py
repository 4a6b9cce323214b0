"""The printed report, on a profile with known numbers: header, tables, sorting, footnotes."""

from __future__ import annotations

import re

from kprof_core.data.records import (
    COPY,
    HOST_TIMED,
    KERNEL,
    UNRESOLVED,
    HostTable,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.renderers.common import FOOTNOTE
from kprof_core.result import Profile

HEADER = ["Time (%)", "Total time", "Calls", "Avg time", "Min time", "Max time", "Median", "Name"]


def make_profile(
    device: list[tuple[str, int, int]], host: list[tuple[str, int]], span: int = 100_000
) -> Profile:
    """``device``: (name, duration, flags) rows; ``host``: (name, duration) ranges."""
    p = Profile()
    p.start_ns, p.end_ns = 1_000, 1_000 + span
    p.queues = [QueueRecord("testdev", "testdev 0", "queue 1", "testdev:testdev 0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    names: list[str] = []

    def nid(name: str) -> int:
        if name not in names:
            names.append(name)
        return names.index(name)

    t = p.start_ns
    for name, dur, flags in device:
        p.table.append(nid(name), KERNEL, 0, 0, t, t + 10, t, dur, -1, flags)
        t += 10
    for name, dur in host:
        p.host.append(nid(name), HostTable.RANGE, 0, p.start_ns, p.start_ns + dur)
    p.names = names
    return p


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def section(text: str, title: str) -> list[list[str]]:
    lines = text.splitlines()
    i = lines.index(title)
    assert cells(lines[i + 1]) == HEADER
    assert set(lines[i + 2].replace(" ", "")) == {"─"}
    rows = []
    for line in lines[i + 3 :]:
        if not line.strip():
            break
        rows.append(cells(line))
    return rows


def test_header_tables_and_sorting() -> None:
    p = make_profile(
        device=[
            ("small", 1_000, 0),
            ("small", 2_000, 0),
            ("small", 3_000, 0),
            ("big", 10_000, 0),
            ("lost", 5, UNRESOLVED),
        ],
        host=[("step", 50_000), ("step", 30_000)],
    )
    p.errors = {4: "the device did not reach the timestamp within 1 s"}
    text = p.report()
    lines = text.splitlines()
    assert lines[0] == "Profiled 100 µs, recording 2 ranges, 5 kernels and 0 copies."
    assert section(text, "Device-side activity:") == [
        ["10.0 %", "10 µs", "1", "10 µs", "10 µs", "10 µs", "10 µs", "big"],
        ["6.0 %", "6 µs", "3", "2 µs", "1 µs", "3 µs", "2 µs", "small"],
    ]
    host = section(text, "Host-side activity:")
    assert host[0] == ["80.0 %", "80 µs", "2", "40 µs", "30 µs", "50 µs", "40 µs", "step"]
    # Each launch's host call took 10 ns; ties in total time are sorted by name.
    assert [(r[1], r[2], r[-1]) for r in host[1:]] == [
        ("30 ns", "3", "small"),
        ("10 ns", "1", "big"),
        ("10 ns", "1", "lost"),
    ]
    assert lines[-2:] == [
        "1 device record could not be resolved and is left out of the tables:",
        "  1 × the device did not reach the timestamp within 1 s",
    ]
    assert FOOTNOTE not in text


def test_host_timed_rows_carry_a_star_and_the_footnote() -> None:
    p = make_profile(
        device=[("plain", 999_700, HOST_TIMED), ("dev", 1_234_000, 0)], host=[], span=10_000_000
    )
    text = p.report()
    rows = section(text, "Device-side activity:")
    assert rows[0][-1] == "dev" and rows[0][1] == "1.23 ms"
    assert rows[1][-1] == "plain *" and rows[1][1] == "1 ms"
    assert text.splitlines()[-1] == FOOTNOTE
    assert FOOTNOTE.startswith(" * timed on the host, synchronizing after each launch")
    assert "No host-side activity was recorded." not in text  # the launches are host activity


def test_empty_sections() -> None:
    text = make_profile(device=[], host=[("r", 999)]).report()
    assert text.splitlines()[0] == "Profiled 100 µs, recording 1 range, 0 kernels and 0 copies."
    assert "No device-side activity was recorded." in text
    text = make_profile(device=[], host=[]).report()
    assert "No host-side activity was recorded." in text


def test_copies_show_throughput() -> None:
    p = make_profile(device=[], host=[])
    p.names = ["memcpy", "slow copy"]
    p.end_ns = 2 * 10**9
    p.table.append(0, COPY, 0, 0, 1_000, 1_010, 1_000, 1_000_000, 1024**3, 0)  # 1 GiB in 1 ms
    p.table.append(1, COPY, 0, 0, 1_000, 1_010, 1_000, 10**9, 1024**3, 0)  # 1 GiB in 1 s
    lines = p.report().splitlines()
    i = lines.index("Device-side activity:")
    assert cells(lines[i + 1])[-2:] == ["Throughput", "Name"]
    assert cells(lines[i + 3])[-2:] == ["1 GiB/s", "slow copy"]
    assert cells(lines[i + 4])[-2:] == ["1000 GiB/s", "memcpy"]  # never '1e+03 GiB/s'
