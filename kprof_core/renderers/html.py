"""A self-contained HTML timeline: one file, no network, with the summary tables below it.

The page (``timeline.html`` with ``timeline.js`` inlined) draws the rows of :mod:`.timeline`
(a header per process, a row per thread and per queue) on a canvas, with zoom (wheel), pan
(drag) and a tooltip per entry. The data is embedded as columnar JSON, streamed to the file
track by track; the script draws only what the view shows, so ~100k records stay responsive.
The summary tables are rendered here, as static HTML.
"""

from __future__ import annotations

import html
import json
from array import array
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import IO, TYPE_CHECKING

from kprof_core.data.records import APPROXIMATE, COPY, HOST_TIMED, KERNEL, UNRESOLVED, QueueRecord
from kprof_core.data.summary import SummaryRow
from kprof_core.io.exports import Target, open_text
from kprof_core.renderers.analysis import analysis_html, report_analysis, skipped_note
from kprof_core.renderers.common import (
    RANGES_TITLE,
    check_profiles,
    first_time,
    footnotes,
    headline,
    host_name,
    offset_of,
    summary_cells,
    window_words,
)
from kprof_core.renderers.timeline import (
    DEVICE,
    HOST_RANGE,
    LAUNCH,
    MARK,
    Timeline,
    device_title,
    thread_title,
)
from kprof_core.renderers.tree_html import tree_html

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

HERE = Path(__file__).parent
DATA_SLOT = "<!--KPROF_DATA-->"
CHUNK = 8192

# Kind codes in the page's ``k`` column (see timeline.js).
K_LAUNCH, K_KERNEL, K_COPY, K_DEVICE_RANGE, K_RANGE, K_MARK = range(6)


def _js(value: object) -> str:
    """JSON for inside a <script> element: no '<' that could close it."""
    return json.dumps(value, default=str).replace("<", "\\u003c")


def _numbers(f: IO[str], values: Iterable[int]) -> None:
    """Write a JSON array of ints in chunks, without holding them all as text."""
    it = iter(values)
    sep = "["
    while chunk := list(islice(it, CHUNK)):
        f.write(sep + ",".join(map(str, chunk)))
        sep = ","
    f.write("[]" if sep == "[" else "]")


def write_html(
    target: Target,
    profiles: Sequence[ProfileData],
    labels: Sequence[str] | None = None,
    *,
    summary: bool = True,
    extra_html: str = "",
) -> None:
    """Write one or more profiles as one self-contained HTML timeline with summary tables.

    ``target`` is a path (written atomically; an unwritable one raises
    :class:`kprof.ExportError`) or an open text file; ``labels`` as for
    :func:`kprof_core.renderers.chrome.write_chrome_trace`. ``summary=False`` leaves the
    summary tables out; ``extra_html`` (trusted, already escaped HTML, such as a comparison)
    goes above them.
    """
    from kprof_core._version import __version__

    names = check_profiles(profiles, labels)
    offsets = [offset_of(p) for p in profiles]
    base = min(first_time(p) + off for p, off in zip(profiles, offsets))
    end = max(p.start_ns + p.span_ns + off for p, off in zip(profiles, offsets))
    if len(profiles) == 1:
        p0 = profiles[0]
        title = f"kprof timeline: {names[0] or host_name(p0, None)}"
        window = window_words(p0.meta)
        title += f", {window}" if window else ""
    else:
        title = f"kprof timeline: {len(profiles)} profiles"
    page = (HERE / "timeline.html").read_text(encoding="utf-8")
    script = (HERE / "timeline.js").read_text(encoding="utf-8")
    tables = (
        "\n".join(
            summary_html(p, name if len(profiles) > 1 else None) for p, name in zip(profiles, names)
        )
        if summary
        else ""
    )
    tables = extra_html + ("\n" if extra_html and tables else "") + tables
    page = (
        page.replace("{{TITLE}}", html.escape(title))
        .replace("{{VERSION}}", __version__)
        .replace("{{SUMMARY}}", tables)
    )
    head, tail = page.split(DATA_SLOT)
    tail = tail.replace("{{SCRIPT}}", script)
    with open_text(target, "HTML timeline") as f:
        f.write(head)
        f.write(f'{{"base_ns":{base},"span_ns":{max(0, end - base)},"profiles":[')
        for k, (p, name, off) in enumerate(zip(profiles, names, offsets)):
            if k:
                f.write(",")
            _write_profile(f, p, name, off - base)
        f.write("]}")
        f.write(tail)


def _write_profile(f: IO[str], p: ProfileData, label: str | None, shift: int) -> None:
    tl = Timeline(p)
    t, h = p.table, p.host
    f.write(
        f'{{"label":{_js(label)},"start_ns":{p.start_ns + shift},"names":{_js(p.names)},'
        f'"sites":{_js([[s.label, s.location] for s in p.sites])},"processes":['
    )
    for pi, proc in enumerate(tl.processes):
        if proc.kind == "host":
            pname = host_name(p, label)
        else:
            pname = f"{label}: {proc.name}" if label else proc.name
        f.write(("," if pi else "") + f'{{"name":{_js(pname)},"kind":{_js(proc.kind)},"tracks":[')
        for ti, track in enumerate(proc.tracks):
            name = track.name
            if track.kind == "thread":
                name = thread_title(p.threads[track.thread], name)
                if track.lane:
                    name += f" (overlap {track.lane})"
            items = track.items
            starts, durs = array("q"), array("q")
            for it in items:
                b0, b1 = tl.bounds(it)
                starts.append(b0 + shift)
                durs.append(b1 - b0)
            f.write(
                ("," if ti else "") + f'{{"name":{_js(name)},"kind":{_js(track.kind)},'
                f'"depth":{track.max_depth + 1},"md":{max(durs, default=0)},"s":'
            )
            _numbers(f, starts)
            f.write(',"d":')
            _numbers(f, durs)
            f.write(',"n":')
            _numbers(
                f, (h.name[it >> 2] if it & 3 >= HOST_RANGE else t.name[it >> 2] for it in items)
            )
            f.write(',"k":')
            _numbers(f, (_kind(p, it) for it in items))
            f.write(',"z":')
            _numbers(f, track.depths)
            if track.kind == "queue" and any(t.nbytes[it >> 2] >= 0 for it in items):
                f.write(',"b":')
                _numbers(f, (t.nbytes[it >> 2] for it in items))
            sites = [h.site[it >> 2] if it & 3 >= HOST_RANGE else t.site[it >> 2] for it in items]
            if p.sites and max(sites, default=-1) >= 0:
                f.write(',"st":')  # each entry's launch site, an index into "sites"
                _numbers(f, sites)
            if any(_flags(p, it) for it in items):
                f.write(',"f":')
                _numbers(f, (_flags(p, it) for it in items))
            f.write("}")
        f.write("]}")
    _write_memory(f, p, label, shift, bool(tl.processes))
    f.write("]}")


def _write_memory(f: IO[str], p: ProfileData, label: str | None, shift: int, comma: bool) -> None:
    """Live bytes per device as a process of counter tracks (kind ``"counter"``): ``s`` the
    times of its allocations and frees, ``v`` the live bytes after each, ``max`` the peak."""
    m = p.memory
    if not m:
        return
    name = f"{label}: device memory" if label else "device memory"
    f.write(("," if comma else "") + f'{{"name":{_js(name)},"kind":"memory","tracks":[')
    t, after = m.table, m.live_after
    for d, dev in enumerate(m.labels):
        rows = [i for i, x in enumerate(t.device) if x == d]
        f.write(
            ("," if d else "") + f'{{"name":{_js("live bytes, " + dev)},"kind":"counter",'
            f'"depth":2,"md":0,"max":{max((after[i] for i in rows), default=0)},"s":'
        )
        _numbers(f, (t.time[i] + shift for i in rows))
        f.write(',"v":')
        _numbers(f, (after[i] for i in rows))
        f.write(',"d":[],"n":[],"k":[],"z":[]}')
    f.write("]}")


def _kind(p: ProfileData, item: int) -> int:
    tag = item & 3
    if tag == LAUNCH:
        return K_LAUNCH
    if tag == HOST_RANGE:
        return K_RANGE
    if tag == MARK:
        return K_MARK
    k = p.table.kind[item >> 2]
    return K_KERNEL if k == KERNEL else K_COPY if k == COPY else K_DEVICE_RANGE


def _flags(p: ProfileData, item: int) -> int:
    tag = item & 3
    if tag == DEVICE:
        flags = p.table.flags[item >> 2]
        return 1 if flags & HOST_TIMED else 4 if flags & APPROXIMATE else 0
    if tag == LAUNCH:
        return 2 if p.table.flags[item >> 2] & UNRESOLVED else 0
    return 0


# -- the summary tables ------------------------------------------------------------------------------


def _table(title: str, rows: Sequence[SummaryRow], throughput: bool = False) -> str:
    """The text report's table (``summary_cells``), as HTML."""
    headers, body = summary_cells(rows, throughput)
    out = [f"<h3>{html.escape(title)}</h3>", "<table><thead><tr>"]
    out += [f"<th>{html.escape(c)}</th>" for c in headers]
    out.append('<th class="name">Name</th></tr></thead><tbody>')
    for r, cells in zip(rows, body):
        out.append(
            "<tr>"
            + "".join(f"<td>{html.escape(c)}</td>" for c in cells)
            + f'<td class="name">{html.escape(r.label)}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


def _of_window(p: ProfileData) -> str:
    """`` of window 2, steps 100-109`` for a window of a scheduled profile, else nothing."""
    w = window_words(p.meta)
    return f" of {w}" if w else ""


def summary_html(p: ProfileData, label: str | None) -> str:
    s = p.summary()
    out = [
        f"<h2>{html.escape(label)}</h2>"
        if label
        else f"<h2>Summary{html.escape(_of_window(p))}</h2>",
        f"<p>{html.escape(headline(p))}</p>",
    ]
    out.append(
        _table("Host-side activity", s.host)
        if s.host
        else "<p>No host-side activity was recorded.</p>"
    )
    out.append(
        _table("Device-side activity", s.device, True)
        if s.device
        else "<p>No device-side activity was recorded.</p>"
    )
    if s.device_ranges:
        out.append(_table(RANGES_TITLE, s.device_ranges, True))
    if s.device:
        tree = tree_html(p)
        if tree:
            out.append(tree)
    if s.markers:
        out.append(
            '<h3>Markers</h3><table><thead><tr><th>Count</th><th class="name">Marker'
            "</th></tr></thead><tbody>"
            + "".join(
                f'<tr><td>{n}</td><td class="name">{html.escape(m)}</td></tr>' for m, n in s.markers
            )
            + "</tbody></table>"
        )
    if s.device:
        a = report_analysis(p)
        out.append(analysis_html(a) if a else f'<p class="note">{html.escape(skipped_note())}</p>')
    for note in footnotes(s):
        out.append(f'<p class="note">{html.escape(note.strip())}</p>')
    reasons: dict[str, int] = {}
    flags = p.table.flags
    for i in range(len(flags)):
        if flags[i] & UNRESOLVED:
            why = p.errors.get(i, "unresolved")
            reasons[why] = reasons.get(why, 0) + 1
    if reasons:
        n = sum(reasons.values())
        out.append(
            f"<p>{n} device record{'s' * (n != 1)} could not "
            "be resolved (their launches are shown, without device time):</p><ul>"
            + "".join(f"<li>{n} × {html.escape(why)}</li>" for why, n in reasons.items())
            + "</ul>"
        )
    if p.clocks:
        out.append(
            "<h3>Device clocks placed on the host timeline</h3><ul>"
            + "".join(
                f"<li>{html.escape(device_title(QueueRecord(c.backend, c.device, '', '')))}: "
                f"{html.escape(c.describe())}</li>"
                for c in p.clocks.values()
            )
            + "</ul>"
        )
    return "\n".join(out)
