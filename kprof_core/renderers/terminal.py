"""Text that is safe to write to a terminal: the one escaping every text renderer goes through.

Names in a profile come from the profiled program, from plugins and from files, and a file may
be crafted. Written raw, an escape sequence in a kernel name retitles or clears the terminal,
and a CR or LF forges report lines. So every line of text output (the summary, the trace,
``kprof merge``, ``kprof backends``, the pytest plugin's summary and the one-line errors
that name files) is passed through :func:`escape` once it is laid out:
control characters (C0, DEL, C1), Unicode line separators, bidirectional overrides (which
reorder what is displayed) and lone surrogates (which cannot be encoded) are written as Python
escapes (``\\x1b``, ``\\u202e``, ``\\ud800``). Everything else, ``µ``, ``≤``, box drawing and
non-Latin names included, is kept as it is, unless the stream it is written to cannot encode
it (``PYTHONIOENCODING=ascii``, a C locale): then kprof's own layout characters are written as
ASCII (``─`` as ``-``, ``µs`` as ``us``, ``→`` as ``->``) and anything else as an escape
(:func:`for_stream`), never an exception.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escaped(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


#: kprof's own layout characters as ASCII, for a stream that cannot encode them.
_ASCII = str.maketrans(
    {
        "─": "-",
        "│": "|",
        "├": "|",
        "└": "`",
        "→": "->",
        "←": "<-",
        "×": "x",
        "µ": "u",
        "≤": "<=",
        "≥": ">=",
        "±": "+/-",
        "…": "...",
        "·": ".",
        "▁": "_",
        "▂": ".",
        "▃": ":",
        "▄": "-",
        "▅": "=",
        "▆": "+",
        "▇": "*",
        "█": "#",
    }
)


def for_stream(text: str, stream: object) -> str:
    """``text`` as ``stream`` can encode it: unchanged where it can, else with kprof's layout
    characters in ASCII and anything else (a non-Latin kernel name) as an escape."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        return text.translate(_ASCII).encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: leave it to the stream
        return text


def escape(text: str) -> str:
    """``text`` with every character that could act on a terminal written as an escape."""
    return _UNSAFE.sub(_escaped, text)


def lines(rows: Iterable[str]) -> str:
    """Lines of output joined by newlines, each escaped (so none can hold another newline)."""
    return "\n".join(escape(r) for r in rows)


def say(text: str) -> None:
    """One line for the user on stderr (an error, a warning, ``wrote FILE``), escaped: it may
    hold a file name, a test id or a kernel name."""
    print(for_stream(escape(text), sys.stderr), file=sys.stderr)


def silence_stdout() -> None:
    """Point stdout at /dev/null after a broken pipe, so that Python's own flush at exit does
    not fail too (as Python's documentation on SIGPIPE advises)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def print_text(text: str) -> None:
    """``text`` and a newline on stdout, whatever happened to it; never an exception.

    A reader that went away (``| head``) read what it wanted: the rest is dropped quietly. A
    ``sys.stdout`` that a profiled script closed or replaced: the text goes to the process's
    own stdout (file descriptor 1).
    """
    out = sys.stdout
    try:
        if out is None or out.closed:
            raise ValueError("sys.stdout is closed")
        out.flush()
        out.write(for_stream(text, out) + "\n")
        out.flush()
        return
    except BrokenPipeError:
        silence_stdout()
        return
    except (OSError, ValueError):
        pass
    try:
        with open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False) as f:
            f.write(text + "\n")
    except OSError as exc:
        print(f"kprof: could not print the report: {exc}", file=sys.stderr)
