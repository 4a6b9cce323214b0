"""Records as data for scripts and notebooks: JSON, CSV and a pandas DataFrame.

All three hold the same records, times in nanoseconds relative to the profile's start (as the
record views ``p.kernels``, ``p.ranges`` are):

- device records: kernels, copies and the device time of ranges, with their launch's host
  interval, queue, thread, bytes, ``host_timed``, ``approximate`` (observed on the host) and,
  for records the device never timed, ``error`` (their ``start_ns``/``duration_ns`` are then the launch's, not device times),
  ``detail``: what the backend said about the row (a CUDA kernel's grid and block), and
  ``config``: its launch configuration as text (``summary(by=("name", "config"))``'s), and
  ``flops``: the floating-point operations the user said it does (``nbytes``: the bytes);
- host records: ranges and markers.

Each record's launch site is in ``file``, ``line`` and ``function``, and its launch stack
(``profile(stacks=True)``) in ``stack``: in JSON an index into the header's ``stacks`` (each a
list of frames, outermost first), in CSV and DataFrames the frames as text, outermost first,
``;`` between them (``/src/train.py:12 main;/src/model.py:30 forward``), as folded stacks are.

Files are written through :func:`open_text`: a path that cannot be written raises
:class:`ExportError` (an ``OSError``) saying so, no partial file is left behind, and the
profile itself is never changed by an export.
"""

from __future__ import annotations

import contextlib
import csv
import heapq
import io
import json
import os
from collections.abc import Iterator
from dataclasses import asdict
from typing import IO, TYPE_CHECKING, Any, TextIO, Union

from kprof_core.data.records import APPROXIMATE, HOST_TIMED, KIND_NAMES, UNRESOLVED, HostTable

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData
    from kprof_core.data.sites import Site

#: Where an export goes: a path, or an open text file (written to, not closed).
Target = Union[str, "os.PathLike[str]", TextIO, IO[str]]
#: Where a binary export goes: a path, or an open binary file (written to, not closed).
BinaryTarget = Union[str, "os.PathLike[str]", IO[bytes]]

#: The columns of ``to_csv`` and ``to_dataframe``, in order.
COLUMNS = (
    "record",
    "kind",
    "name",
    "backend",
    "device",
    "queue",
    "thread",
    "start_ns",
    "duration_ns",
    "launch_start_ns",
    "launch_end_ns",
    "nbytes",
    "host_timed",
    "approximate",
    "error",
    "detail",
    "config",
    "flops",
    "file",
    "line",
    "function",
    "stack",
)

FORMAT = "kprof.records/1"


class ExportError(OSError):
    """An export could not be written; the profile is unchanged and can be exported again."""


@contextlib.contextmanager
def open_text(target: Target, what: str) -> Iterator[IO[str]]:
    """Yield a text file to write ``what`` (e.g. "Chrome trace") to.

    A path is written through a temporary file beside it, renamed into place only once
    complete, so a failed export leaves no truncated file. An open file is written as is.
    """
    if not isinstance(target, (str, os.PathLike)):
        yield target
        return
    # A lone surrogate in a name (possible in str, not in UTF-8) is written as \udXXX.
    with _atomic(os.fspath(target), what, "w") as f:
        yield f


@contextlib.contextmanager
def open_binary(target: BinaryTarget, what: str) -> Iterator[IO[bytes]]:
    """:func:`open_text` for binary formats (the Perfetto trace): a path is written
    atomically, an open binary file as is."""
    if not isinstance(target, (str, os.PathLike)):
        yield target
        return
    with _atomic(os.fspath(target), what, "wb") as f:
        yield f


@contextlib.contextmanager
def _atomic(path: str, what: str, mode: str) -> Iterator[Any]:
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        if "b" in mode:
            f = open(tmp, mode)  # closed below
        else:
            f = open(tmp, mode, encoding="utf-8", errors="backslashreplace", newline="")
    except OSError as exc:
        raise _export_error(exc, what, path) from exc
    try:
        with f:
            yield f
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, ExportError):
            raise _export_error(exc, what, path) from exc
        raise


def _export_error(exc: OSError, what: str, path: str) -> ExportError:
    reason = exc.strerror or str(exc)
    return ExportError(
        exc.errno,
        f"kprof could not write the {what} ({reason}); the profile is "
        "unchanged in memory: export it again to a writable path",
        path,
    )


# -- records as rows ------------------------------------------------------------------------------


def _site(p: ProfileData, i: int) -> dict[str, Any]:
    """The launch site's columns (None where it is unknown)."""
    if i < 0:
        return {"file": None, "line": None, "function": None}
    s = p.sites[i]
    return {"file": s.file, "line": s.line, "function": s.function}


def _stack(col: Any, i: int) -> int | None:
    """A row's stack id (None: none known)."""
    return col[i] if col and col[i] >= 0 else None


def folded(stack: tuple[Site, ...]) -> str:
    """A stack as one line of text, outermost frame first, ``;`` between frames."""
    return ";".join(f"{s.file}:{s.line} {s.function}" for s in stack)


def _as_text(p: ProfileData, rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Rows with their stack as text (CSV and DataFrames)."""
    texts = [folded(s) for s in p.stacks]
    for r in rows:
        if r["stack"] is not None:
            r["stack"] = texts[r["stack"]]
        yield r


def _device_rows(p: ProfileData, order: Any = None) -> Iterator[dict[str, Any]]:
    t, names, queues, o = p.table, p.names, p.queues, p.start_ns
    labels = [th.label for th in p.threads]
    for i in range(len(t)) if order is None else order:
        q = queues[t.queue[i]]
        flags, nbytes = t.flags[i], t.nbytes[i]
        yield {
            "record": "device",
            "kind": KIND_NAMES[t.kind[i]],
            "name": names[t.name[i]],
            "backend": q.backend,
            "device": q.device,
            "queue": q.label,
            "thread": labels[t.thread[i]],
            "start_ns": t.start[i] - o,
            "duration_ns": t.duration[i],
            "launch_start_ns": t.launch_start[i] - o,
            "launch_end_ns": t.launch_end[i] - o,
            "nbytes": None if nbytes < 0 else nbytes,
            "host_timed": bool(flags & HOST_TIMED),
            "approximate": bool(flags & APPROXIMATE),
            "error": p.errors.get(i, "unresolved") if flags & UNRESOLVED else None,
            "detail": p.details.get(i),
            "config": p.configs[c] if (c := t.config[i]) >= 0 else None,
            "flops": f if (f := t.flops[i]) >= 0 else None,
            **_site(p, t.site[i]),
            "stack": _stack(t.stack, i),
        }


def _host_rows(p: ProfileData, order: Any = None) -> Iterator[dict[str, Any]]:
    h, names, o = p.host, p.names, p.start_ns
    labels = [th.label for th in p.threads]
    for j in range(len(h)) if order is None else order:
        yield {
            "record": "host",
            "kind": "marker" if h.kind[j] == HostTable.MARK else "range",
            "name": names[h.name[j]],
            "backend": None,
            "device": None,
            "queue": None,
            "thread": labels[h.thread[j]],
            "start_ns": h.start[j] - o,
            "duration_ns": h.end[j] - h.start[j],
            "launch_start_ns": None,
            "launch_end_ns": None,
            "nbytes": None,
            "host_timed": False,
            "approximate": False,
            "error": None,
            "detail": None,
            "config": None,
            "flops": None,
            **_site(p, h.site[j]),
            "stack": _stack(h.stack, j),
        }


def iter_rows(p: ProfileData) -> Iterator[dict[str, Any]]:
    """Every record (device and host) as a dict of :data:`COLUMNS`, by start time."""
    dev = sorted(range(len(p.table)), key=p.table.start.__getitem__)
    host = sorted(range(len(p.host)), key=p.host.start.__getitem__)
    return heapq.merge(_device_rows(p, dev), _host_rows(p, host), key=lambda r: r["start_ns"])


# -- JSON -------------------------------------------------------------------------------------------


def _header(p: ProfileData) -> dict[str, Any]:
    from kprof_core._version import __version__

    s = p.summary()
    return {
        "format": FORMAT,
        "kprof_version": __version__,
        "meta": dict(p.meta),
        "start_ns": p.start_ns,
        "span_ns": s.span_ns,
        "clocks": [
            {
                "backend": c.backend,
                "device": c.device,
                "method": c.method,
                "error_ns": c.error_ns,
                "shift_ns": c.shift_ns,
                "description": c.describe(),
            }
            for c in p.clocks.values()
        ],
        **({"stacks": [[asdict(f) for f in st] for st in p.stacks]} if p.stacks else {}),
        "summary": {
            "host": [asdict(r) for r in s.host],
            "device": [asdict(r) for r in s.device],
            "device_ranges": [asdict(r) for r in s.device_ranges],
            "markers": [{"name": n, "count": c} for n, c in s.markers],
        },
    }


def _strip(row: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: row[k] for k in keys}


# A device record's keys are the CSV columns after "record" (which table the row came from).
_DEVICE_KEYS = COLUMNS[1:]
_HOST_KEYS = (
    "kind",
    "name",
    "thread",
    "start_ns",
    "duration_ns",
    "file",
    "line",
    "function",
    "stack",
)


def to_json(p: ProfileData, path: Target | None = None) -> dict[str, Any] | None:
    """The profile as JSON-able data: ``meta``, ``clocks``, ``summary``, ``device`` and
    ``host`` records (times in ns from the profile's start), and ``memory``
    (``Memory.to_dict()``) when the profile saw allocations.

    With ``path`` (a path or an open text file) it is streamed there as JSON and ``None`` is
    returned; without, the dict is returned.
    """
    head = _header(p)
    if path is None:
        head["device"] = [_strip(r, _DEVICE_KEYS) for r in _device_rows(p)]
        head["host"] = [_strip(r, _HOST_KEYS) for r in _host_rows(p)]
        if p.memory:  # only then: exports of profiles without memory stay as they were
            head["memory"] = p.memory.to_dict()
        return head
    with open_text(path, "JSON export") as f:
        text = json.dumps(head, default=str)
        f.write(text[:-1])  # the header without its closing brace; the records follow
        for key, rows, keys in (
            ("device", _device_rows(p), _DEVICE_KEYS),
            ("host", _host_rows(p), _HOST_KEYS),
        ):
            f.write(f', "{key}": [')
            sep = "\n"
            for r in rows:
                f.write(sep + json.dumps(_strip(r, keys)))
                sep = ",\n"
            f.write("]")
        if p.memory:
            f.write(f', "memory": {json.dumps(p.memory.to_dict())}')
        f.write("}\n")
    return None


# -- CSV and DataFrame --------------------------------------------------------------------------------


#: What a spreadsheet reads as the start of a formula (OWASP's list for CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """A CSV cell: text that a spreadsheet would run as a formula (``=cmd|...``) gets a leading
    ``'``, as OWASP recommends; numbers are written as they are."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def to_csv(p: ProfileData, path: Target | None = None) -> str | None:
    """Every record as CSV (:data:`COLUMNS`, by start time); returns the text when ``path`` is
    ``None``, else writes it there and returns ``None``. Missing values are empty cells; text
    starting with ``= + - @``, a tab or a CR is prefixed with ``'`` so that spreadsheets show
    it instead of evaluating it (``to_json`` and ``to_dataframe`` keep names as they are)."""

    def write(f: IO[str]) -> None:
        # Text quoted, numbers not: a CR inside a name (which QUOTE_MINIMAL leaves unquoted
        # with "\n" line ends) cannot split a row.
        w = csv.writer(f, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(COLUMNS)
        for r in _as_text(p, iter_rows(p)):
            w.writerow([_cell(r[c]) for c in COLUMNS])

    if path is None:
        buf = io.StringIO()
        write(buf)
        return buf.getvalue()
    with open_text(path, "CSV export") as f:
        write(f)
    return None


def to_dataframe(p: ProfileData) -> Any:
    """Every record as a ``pandas.DataFrame`` (:data:`COLUMNS`, by start time).

    Needs pandas, which kprof does not depend on: ``pip install pandas``.
    """
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(
            "Profile.to_dataframe() needs pandas, which is not installed: "
            "pip install pandas (or use to_csv() / to_json(), which need nothing)"
        ) from exc
    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for r in _as_text(p, iter_rows(p)):
        for c in COLUMNS:
            cols[c].append(r[c])
    data: dict[str, Any] = dict(cols)
    for c in ("launch_start_ns", "launch_end_ns", "nbytes"):  # ints with gaps: nullable ints
        data[c] = pandas.array(cols[c], dtype="Int64")
    for c in ("start_ns", "duration_ns"):
        data[c] = pandas.array(cols[c], dtype="int64")
    data["host_timed"] = pandas.array(cols["host_timed"], dtype="bool")
    data["approximate"] = pandas.array(cols["approximate"], dtype="bool")
    return pandas.DataFrame(data, columns=list(COLUMNS))
