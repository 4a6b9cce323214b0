"""``kprof run --trace t.json --html t.html script.py``, end to end in a subprocess: the files
are written and valid, on the simulated test device and on PoCL with the README's example."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_html_browser import chromium_fixture, embedded_data, rendered, screenshot  # noqa: F401
from tracecheck import validate_text

import kprof

EXAMPLE = Path(__file__).parent.parent / "examples" / "opencl_pipeline.py"


def kprof_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    return subprocess.run(
        [sys.executable, "-m", "kprof", "run", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=cwd,
    )


def test_run_writes_a_valid_trace_and_timeline_on_the_test_device(tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(
        textwrap.dedent("""
        import threading
        import kprof
        from kprof_testbackend import device

        q1, q2 = device.Queue(), device.Queue()

        def side():
            with q2, kprof.range("side"):
                q2.launch("k2", 100)

        with q1, kprof.range("step"):
            t = threading.Thread(target=kprof.propagate(side), name="side")
            t.start()
            q1.launch("k1", 100)
            t.join()
        q1.finish(); q2.finish()
    """)
    )
    r = kprof_run(
        "--backends", "testdev", "--trace", "t.json", "--html", "t.html", str(script), cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert "kprof: wrote t.json" in r.stderr and "kprof: wrote t.html" in r.stderr
    c = validate_text((tmp_path / "t.json").read_text())
    assert sorted(e["name"] for e in c.all_slices("kernel")) == ["k1", "k2"]
    assert len(c.flows) == 2
    data = embedded_data((tmp_path / "t.html").read_text())
    names = [tr["name"] for proc in data["profiles"][0]["processes"] for tr in proc["tracks"]]
    assert names == [
        "thread 1 (MainThread)",
        "thread 2 (side)",
        "queue 1, thread 1",
        "queue 2, thread 2",
    ]


def _run_in(tmp_path: Path, *args: str, script: str = "print('hi')\n") -> Any:
    """``kprof run ARGS nothing.py`` in ``tmp_path``, its temporary directory there too."""
    (tmp_path / "nothing.py").write_text(script)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    return subprocess.run(
        [sys.executable, "-m", "kprof", "run", "--backends", "testdev", *args, "nothing.py"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "TMPDIR": str(tmp_path / "tmp")},
        cwd=tmp_path,
    )


def test_an_unwritable_output_fails_the_run_and_loses_nothing(tmp_path: Path) -> None:
    r = _run_in(tmp_path, "--trace", "no/t.json", "-o", "no/x.kprof")
    assert r.returncode == 2
    said = [line for line in r.stderr.splitlines() if line.startswith("kprof")]
    why = "the directory no does not exist (create it, or give another path)"
    assert said[:2] == [
        f"kprof: could not write no/t.json: {why}",
        f"kprof: could not write no/x.kprof: {why}",
    ]
    rescued = list((tmp_path / "tmp").glob("kprof-*.kprof"))
    assert len(rescued) == 1 and kprof.load(rescued[0]).span_ns >= 0
    assert said[2] == (
        f"kprof: the profile is saved in {rescued[0]} instead; `kprof show {rescued[0]}` "
        "exports it again (--html, --trace, --perfetto, --speedscope)"
    )
    assert said[3] == "kprof run: 2 outputs could not be written (said above)"
    assert "Profiled" in r.stdout, "the report is still printed"


def test_the_programs_own_exit_code_wins_over_an_unwritten_output(tmp_path: Path) -> None:
    r = _run_in(tmp_path, "-o", "no/x.kprof", script="raise SystemExit(3)\n")
    assert r.returncode == 3
    assert "kprof: could not write no/x.kprof" in r.stderr


def test_unwritable_window_files_fail_the_run_and_each_window_is_kept(tmp_path: Path) -> None:
    script = "import kprof\nfor _ in range(6):\n    kprof.step()\n"
    r = _run_in(tmp_path, "--steps", "1:2", "--every", "3", "-o", "no/w.kprof", script=script)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("kprof: could not write no/w-000") == 2
    rescued = sorted(p.name for p in (tmp_path / "tmp").glob("kprof-*.kprof"))
    assert len(rescued) == 2 and rescued[0].endswith("-0001.kprof")


def test_a_terminal_that_cannot_encode_unicode_gets_ascii(tmp_path: Path) -> None:
    work = (
        "from kprof_testbackend import device\nq = device.Queue()\nq.launch('k', 10)\nq.finish()\n"
    )
    r = _run_in(tmp_path, "-o", "x.kprof", script=work)
    assert r.returncode == 0, r.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    shown = subprocess.run(
        [sys.executable, "-m", "kprof", "show", "x.kprof"],
        capture_output=True,
        env={**env, "PYTHONIOENCODING": "ascii"},
        cwd=tmp_path,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout.decode("ascii")  # every byte is ASCII
    assert " --------  ----------" in out and "Traceback" not in shown.stderr.decode()


@pytest.fixture(scope="module")
def opencl_device() -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")


def test_the_readme_example_on_pocl(opencl_device: None, tmp_path: Path) -> None:
    r = kprof_run(
        "--backends", "opencl", "--trace", "t.json", "--html", "t.html", str(EXAMPLE), cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert "opencl_pipeline: 4 steps" in r.stdout
    c = validate_text((tmp_path / "t.json").read_text())
    device = [e for e in c.all_slices() if e["cat"] in ("kernel", "copy")]
    assert sorted({e["name"] for e in device}) == [
        "[copy device to host]",
        "[copy host to device]",
        "add",
        "scale",
    ]
    assert len(device) == 4 * 6 and len(c.flows) == 4 * 6
    procs = sorted(c.processes.values())
    # The buffers' memory track too: OpenCL memory is on by default through the table hook.
    assert len(procs) == 3 and procs[0].startswith("OpenCL ") and procs[2].startswith("host ")
    assert procs[1] == "device memory"
    # Counters: live bytes in the memory process, busy percentages in the device's.
    by_process: dict[str, set[str]] = {}
    for pid, name in c.counters:
        by_process.setdefault(c.processes[pid], set()).add(name.split(", ")[0])
    assert by_process == {"device memory": {"live bytes"}, procs[0]: {"busy"}}
    assert _rows_are_two_threads_and_their_queues(list(c.threads.values()))
    data = embedded_data((tmp_path / "t.html").read_text())
    rows = [
        tr["name"]
        for proc in data["profiles"][0]["processes"]
        for tr in proc["tracks"]
        if tr["kind"] != "counter"
    ]
    assert _rows_are_two_threads_and_their_queues(rows)


def _rows_are_two_threads_and_their_queues(rows: list[str]) -> bool:
    # Queues are numbered as the plugin first sees them, which the two threads race for.
    host, queues = rows[:2], rows[2:]
    assert host == ["thread 1 (MainThread)", "thread 2 (side_0)"]
    assert sorted(q.split(", ")[1] for q in queues) == ["thread 1", "thread 2"]
    assert len({q.split(", ")[0] for q in queues}) == 2 and all(
        q.startswith("queue ") for q in queues
    )
    return True


def test_the_readme_example_timeline_renders_in_chromium(
    opencl_device: None, chromium: str, tmp_path: Path
) -> None:
    r = kprof_run("--backends", "opencl", "--html", "t.html", str(EXAMPLE), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dom = rendered(chromium, tmp_path / "t.html", tmp_path)
    assert dom.status.get("data-errors") == "0" and dom.status.get("data-state") == "ready"
    assert _rows_are_two_threads_and_their_queues(
        [r for r in dom.rows if not r.startswith("live bytes, ")]  # the memory counter track
    )
    screenshot(chromium, tmp_path / "t.html", tmp_path)
