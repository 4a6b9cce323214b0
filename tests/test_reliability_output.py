"""What kprof writes stays inert whatever the names hold: no terminal escape sequence or forged
line reaches a terminal, no formula reaches a spreadsheet, and deep nesting stays readable."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_storage import fixture_profile
from tracecheck import synthetic

import kprof
from kprof_core.data.records import HostTable, ThreadRecord
from kprof_core.ranks.merge import merge_report
from kprof_core.ranks.summary import cross_rank_summary, format_cross_rank
from kprof_core.renderers.console import MAX_INDENT
from kprof_core.renderers.terminal import escape

KPROF = str(Path(sys.executable).with_name("kprof"))
HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\r\nProfiled 0 ns, forged\x9b31m\u202egnp.exe\ud800"


def hostile_profile() -> kprof.Profile:
    """Every printed name holds escapes, CR/LF, C1, a bidi override and a lone surrogate."""
    p = fixture_profile()
    p.names = [f"{n} {HOSTILE}" for n in p.names]
    p.queues = [
        type(q)(q.backend, q.device + HOSTILE, q.label + HOSTILE, q.device_key) for q in p.queues
    ]
    p.threads = [
        ThreadRecord(t.ident, t.name + HOSTILE, t.task and t.task + HOSTILE) for t in p.threads
    ]
    p.errors = {k: v + HOSTILE for k, v in p.errors.items()}
    p.clocks = {
        k: type(c)(c.backend, c.device + HOSTILE, c.method + HOSTILE, c.error_ns, c.shift_ns)
        for k, c in p.clocks.items()
    }
    p.meta = {**p.meta, "host": "node" + HOSTILE}
    return p


def inert(text: str, lines: int | None = None) -> None:
    """No control character but the newlines between lines; encodable; no forged line."""
    text.encode("utf-8")
    assert not any(c in text for c in "\x1b\x07\r\x9b\u202e")
    assert all(ord(c) >= 0x20 or c == "\n" for c in text)
    assert "\nProfiled 0 ns, forged" not in text
    if lines is not None:
        assert text.count("\n") + 1 == lines


def test_the_report_and_trace_escape_every_name() -> None:
    p = hostile_profile()
    clean = fixture_profile()
    text = p.report(trace=True)
    inert(text, lines=clean.report(trace=True).count("\n") + 1)  # not one line more
    assert (
        "evil\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0aProfiled 0 ns, forged\\x9b31m\\u202egnp.exe\\ud800"
        in text
    )


def test_merge_output_escapes_every_name(tmp_path: Path) -> None:
    a, b = hostile_profile(), hostile_profile()
    b.meta = {**b.meta, "pid": 5, "rank": 0}
    text = merge_report([a, b])
    inert(text)
    inert(format_cross_rank(cross_rank_summary([a, b]), 2))
    a.save(tmp_path / "a.kprof")
    b.save(tmp_path / "b.kprof")
    out = subprocess.run(
        [KPROF, "merge", str(tmp_path / "a.kprof"), str(tmp_path / "b.kprof")],
        capture_output=True,
        text=True,
        timeout=120,
        errors="surrogateescape",
    )
    assert out.returncode == 0, out.stderr
    inert(out.stdout.rstrip("\n"))


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_escape_leaves_nothing_that_acts_on_a_terminal(s: str) -> None:
    e = escape(s)
    e.encode("utf-8")
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) <= 0x9F for c in e)
    if s.isprintable() and not any(
        0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in s
    ):
        assert e == s  # printable text (µ, ≤, CJK, box drawing) is kept as it is


def test_deep_nesting_is_capped_and_says_its_depth() -> None:
    p = fixture_profile()
    depth = 10_000
    p.threads.append(ThreadRecord(7, "deep"))
    base = p.start_ns
    first = len(p.host)
    for k in range(depth):
        p.host.append(2, HostTable.RANGE, 2, base + k, base + 2 * depth - k)
    text = p.report(trace=True)
    assert len(text) < 2_000_000  # was 201 MB
    lines = [ln for ln in text.splitlines() if "step" in ln]
    assert len(lines) >= depth
    assert f"[depth {depth - 1}] step" in text
    assert f"[depth {MAX_INDENT}]" not in text and f"[depth {MAX_INDENT + 1}] step" in text
    assert len(p.host) - first == depth


def test_the_merge_heading_names_processes_in_the_singular() -> None:
    a, b = synthetic(10, seed=1), synthetic(10, seed=2)
    b.meta = {"host": "other", "pid": 5}
    text = merge_report([a, b])
    assert "(total per process):" in text and "processe)" not in text


@pytest.mark.parametrize("name", ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_never_holds_a_formula(name: str) -> None:
    p = fixture_profile()
    p.names[0] = name
    text = p.to_csv() or ""
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == len(p.table) + len(p.host)  # a CR in a name splits no row
    cells = [r["name"] for r in rows]
    assert "'" + name in cells
    assert not any(
        c.startswith(("=", "+", "-", "@", "\t", "\r"))
        for r in rows
        for c in r.values()
        if c and not c.lstrip("-").isdigit()
    )
    assert all(float(r["start_ns"]) == int(r["start_ns"]) for r in rows)  # numbers untouched
    assert p.to_json()["device"][0]["name"] == name  # JSON keeps the name as it is


# -- kprof run: the outputs survive what happens to stdout ------------------------------------------


def run_script(tmp_path: Path, body: str, close_reader: bool) -> tuple[int, str, str]:
    """``kprof run -o out.kprof --html out.html script.py``; with ``close_reader`` its stdout
    is a pipe nobody reads (as ``| head`` leaves it), else captured."""
    import os

    script = tmp_path / "script.py"
    script.write_text(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env["KPROF_PLUGINS"] = "testdev"
    cmd = [
        KPROF,
        "run",
        "-o",
        str(tmp_path / "out.kprof"),
        "--html",
        str(tmp_path / "out.html"),
        str(script),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path
    )
    assert proc.stdout is not None and proc.stderr is not None
    if close_reader:
        proc.stdout.close()
        out = b""
    else:
        out = proc.stdout.read()
    err = proc.stderr.read()
    return proc.wait(timeout=120), out.decode(), err.decode()


SCRIPT = """
import sys, kprof
with kprof.range("work"):
    {work}
{tail}
"""


@pytest.mark.parametrize("exit_code", [0, 3])
def test_run_into_a_closed_pipe_writes_its_files_and_keeps_the_exit_code(
    tmp_path: Path, exit_code: int
) -> None:
    code, _out, err = run_script(
        tmp_path, SCRIPT.format(work="pass", tail=f"sys.exit({exit_code})"), True
    )
    assert code == exit_code, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert kprof.load(tmp_path / "out.kprof").ranges[0].name == "work"
    assert "work" in (tmp_path / "out.html").read_text()


def test_run_of_a_script_that_closes_stdout_still_reports(tmp_path: Path) -> None:
    code, out, err = run_script(
        tmp_path,
        SCRIPT.format(work='print("hello from the script")', tail="sys.stdout.close()"),
        False,
    )
    assert code == 0, err
    assert "Traceback" not in err, err
    assert "hello from the script" in out and "Profiled" in out and "work" in out
    assert (tmp_path / "out.kprof").exists() and (tmp_path / "out.html").exists()


def test_merge_show_diff_and_backends_into_a_closed_pipe(tmp_path: Path) -> None:
    """`kprof merge ... | head`: the files are written first, no traceback; the same for
    `kprof show`, `kprof diff` and `kprof backends | head`."""
    import os

    fixture_profile().save(tmp_path / "a.kprof")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env["KPROF_PLUGINS"] = "testdev"
    a = str(tmp_path / "a.kprof")
    for cmd, files in (
        (
            [KPROF, "merge", a, "-o", str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html")],
            ["t.json", "t.html"],
        ),
        (
            [
                KPROF,
                "show",
                a,
                "-t",
                "--trace",
                str(tmp_path / "s.json"),
                "--html",
                str(tmp_path / "s.html"),
            ],
            ["s.json", "s.html"],
        ),
        ([KPROF, "diff", a, a, "--html", str(tmp_path / "d.html")], ["d.html"]),
        ([KPROF, "backends"], []),
    ):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0, err
        assert "Traceback" not in err and "Exception ignored" not in err, err
        for f in files:
            assert (tmp_path / f).stat().st_size > 0
