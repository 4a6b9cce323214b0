"""A profile in a notebook (``Profile._repr_html_``): the timeline and the summary tables.

The timeline is the HTML page of :mod:`.html`, in an ``<iframe srcdoc>``: a document of its
own, so that its element ids, styles and script cannot clash with the notebook's or with
another profile's in the same notebook, and nothing is fetched from a network. The summary
tables are static HTML beside it, so they show also where scripts and frames do not run (a
notebook viewer, an untrusted notebook). Past :data:`TIMELINE_LIMIT` records the timeline is
left out (the notebook would carry it in every save); ``export_html`` writes it to a file.
"""

from __future__ import annotations

import html
import io
from typing import TYPE_CHECKING

from kprof_core.data.timefmt import format_time
from kprof_core.renderers.common import window_words
from kprof_core.renderers.console import render_trace
from kprof_core.renderers.html import summary_html, write_html
from kprof_core.renderers.timeline import Timeline

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

TIMELINE_LIMIT = 200_000
TRACE_LINES = 2_000

# Inside the frame: fit the frame's height to the page once drawn (the frame is same-origin,
# made from srcdoc; where it is not, the estimated height stays).
_FIT = """<script>
(function () {
  var frame = null;
  try { frame = window.frameElement; } catch (e) { return; }
  if (!frame) return;
  function fit() { frame.style.height = (document.documentElement.scrollHeight + 2) + "px"; }
  fit();
  window.addEventListener("resize", fit);
})();
</script>
"""

STYLE = """<style>
.kprof-nb table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 2px 0 8px; }
.kprof-nb th, .kprof-nb td { padding: 1px 10px; text-align: right; border-bottom: 1px solid #eef0f3; }
.kprof-nb th { border-bottom: 1px solid #d9dde5; }
.kprof-nb td.name, .kprof-nb th.name { text-align: left; font-family: ui-monospace, monospace; }
.kprof-nb h2 { font-size: 14px; margin: 8px 0 4px; }
.kprof-nb h3 { font-size: 13px; margin: 10px 0 2px; }
.kprof-nb iframe { width: 100%; border: 1px solid #d9dde5; border-radius: 3px; }
</style>"""


def _estimated_height(p: ProfileData) -> int:
    """The frame's height before its script fits it: header, axis, and each row's lanes."""
    tl = Timeline(p)
    rows = sum(22 + sum((tr.max_depth + 1) * 18 + 6 for tr in proc.tracks) for proc in tl.processes)
    return min(800, 80 + rows)


def _frame_title(p: ProfileData) -> str:
    """``kprof timeline, window 2, steps 100-109`` (a window's steps), else ``kprof timeline``."""
    w = window_words(p.meta)
    return "kprof timeline" + (f", {w}" if w else "")


def timeline_frame(p: ProfileData) -> str:
    """The profile's timeline page in an ``<iframe srcdoc>``."""
    buf = io.StringIO()
    write_html(buf, [p], summary=False)
    # The tables are beside the frame, so the page's (empty) summary section takes no room.
    page = (
        buf.getvalue()
        .replace('<section id="kprof-summary">', '<section id="kprof-summary" hidden>', 1)
        .replace("</body>", _FIT + "</body>")
    )
    return (
        f'<iframe class="kprof-frame" title="{html.escape(_frame_title(p), quote=True)}"'
        f' style="height:{_estimated_height(p)}px"'
        f' srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )


def notebook_html(p: ProfileData) -> str | None:
    """The rich display of a finished profile; None while it is still running."""
    if p.start_ns and p.end_ns < p.start_ns:
        return None
    out = ['<div class="kprof-nb">', STYLE]
    n = len(p.table) + len(p.host)
    if n <= TIMELINE_LIMIT:
        out.append(timeline_frame(p))
    else:
        out.append(
            f"<p>The timeline is left out here ({n} records); "
            '<code>p.export_html("timeline.html")</code> writes it to a file.</p>'
        )
    out.append(summary_html(p, None))
    if p.trace:
        lines = render_trace(p)
        cut = len(lines) - TRACE_LINES
        text = "\n".join(lines[:TRACE_LINES]) + (
            f"\n… {cut} more lines (print(p) shows all)" if cut > 0 else ""
        )
        out.append(
            f"<details><summary>Trace ({format_time(p.span_ns)})</summary>"
            f"<pre>{html.escape(text)}</pre></details>"
        )
    out.append("</div>")
    # A name may hold a lone surrogate (os.fsdecode of a non-UTF-8 path): the front end could
    # not encode it (UnicodeEncodeError in the cell). Written as \udcff, as every output does.
    return "\n".join(out).encode("utf-8", "backslashreplace").decode("utf-8")
