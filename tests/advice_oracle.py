"""Reads the printed "Where the device time went" section back and checks that its verdict and
advice agree with the figures printed beside them, from the text alone (not kprof's data): the
kind names the largest printed share, the share the verdict quotes is the one in the table, and
each piece of advice stands on the figures the line gives (docs/guides/analysis.md's rules)."""

from __future__ import annotations

import re

HEADER = "Where the device time went"
#: Column printed -> the kind it decides.
KIND_OF = {
    "Busy": "device-bound",
    "Wait launch": "launch-bound",
    "Wait host": "host-bound",
    "Wait queue": "dependency-bound",
    "Wait start": "start-bound",
}
UNITS = {"ns": 1.0, "µs": 1e3, "ms": 1e6, "s": 1e9}


def share(text: str) -> float:
    """A printed share (``"64 %"``, ``"0.1 %"``, ``"< 0.1 %"``) as a percentage."""
    text = text.strip()
    if text.startswith("<"):
        return 0.05
    return float(text.rstrip("%").strip())


def duration(text: str) -> float:
    value, unit = text.strip().split()
    return float(value) * UNITS[unit]


def section(report: str) -> tuple[str, dict[str, str]]:
    """The verdict line and the busiest device's row (column -> printed cell)."""
    lines = report.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    verdict = lines[at + 1].strip()
    header = lines[at + 2]
    # Columns are right-aligned under headers separated by two or more spaces.
    names = [m.group(0) for m in re.finditer(r"\S+(?: \S+)*", header)]
    ends = [m.end() for m in re.finditer(r"\S+(?: \S+)*", header)]
    row = lines[at + 4]
    cells, start = {}, 0
    for name, end in zip(names, ends):
        cells[name] = row[start:end].strip()
        start = end
    return verdict, cells


def check(report: str) -> str:
    """Asserts that the section's verdict and advice agree with its printed figures; returns
    the kind."""
    verdict, cells = section(report)
    kind = verdict.split(":")[0]
    shares = {col: share(cells[col]) for col in KIND_OF}
    # The printed shares cover the span (each rounded to a whole percent or one decimal).
    assert abs(sum(shares.values()) - 100) <= 2.5, (shares, report)
    if kind in (
        "too few device rows to tell why the device waits",
        "cannot tell why the device waits",
    ):
        assert "fuse" not in verdict and "warm" not in verdict, verdict
        return kind
    col = next(c for c, k in KIND_OF.items() if k == kind)
    assert shares[col] >= max(shares.values()), (kind, shares, verdict)
    quoted = {
        "device-bound": r"^device-bound: (.+?) busy",
        "launch-bound": r"idle (.+?) of the span",
        "host-bound": r"idle (.+?) of the span",
        "dependency-bound": r"idle (.+?) of the span",
        "start-bound": r"waited (.+?) of the span",
    }[kind]
    m = re.search(quoted, verdict)
    assert m and m.group(1) == cells[col], (m and m.group(1), cells[col], verdict)
    if kind in ("host-bound", "dependency-bound", "start-bound"):  # these quote Busy too
        m = re.search(r"; ([^;]+?) busy", verdict)
        assert m and m.group(1) == cells["Busy"], verdict
    fuse, warm = "fuse kernels" in verdict, "warm kernels up" in verdict
    if kind == "device-bound":
        assert verdict == f"device-bound: {cells['Busy']} busy" or " (on " in verdict, verdict
    elif kind == "launch-bound" and "kernels ran a median" in verdict:
        m = re.search(r"kernels ran a median (.+?) against (.+?) per launch call", verdict)
        assert m, verdict
        assert fuse == (duration(m.group(1)) < duration(m.group(2))), verdict
    elif kind == "start-bound":
        m = re.search(r"; ([^;]+?) came before a kernel's first launch", verdict)
        assert warm == bool(m), verdict
        if m:
            assert 2 * share(m.group(1)) >= shares["Wait start"] - 1, verdict  # rounding
        m = re.search(r"kernels ran a median (.+?) against a median (.+?) of waiting", verdict)
        assert fuse == bool(m), verdict
        if m:
            assert duration(m.group(1)) < duration(m.group(2)), verdict
    else:
        assert not fuse and not warm, verdict
    return kind
