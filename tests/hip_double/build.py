"""Build the HIP test double (hipdouble.c) as ``OUTDIR/lib/libamdhip64.so``.

The ``lib/`` layout is what hip-python 10 probes under ``$ROCM_PATH``, so
``ROCM_PATH=OUTDIR`` selects the double. Test code only; never shipped.

Usage: ``python tests/hip_double/build.py OUTDIR`` (prints the lib dir).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().with_name("hipdouble.c")
LIB_NAME = "libamdhip64.so"
CFLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-Wall", "-Wextra"]


class BuildError(RuntimeError):
    """The double could not be built (no gcc, or a compile error)."""


def build(out_dir: Path) -> Path:
    """Compile the double into ``out_dir/lib`` if missing or older than the source.

    Returns the lib directory. Safe to call from several processes at once:
    the library is compiled to a temporary name and renamed into place, so a
    process that already loaded the old file keeps a consistent copy.
    """
    lib_dir = Path(out_dir).resolve() / "lib"
    lib = lib_dir / LIB_NAME
    if lib.exists() and lib.stat().st_mtime >= SOURCE.stat().st_mtime:
        return lib_dir

    gcc = shutil.which("gcc")
    if gcc is None:
        raise BuildError(
            "gcc not found on PATH: it is needed to build the HIP test double "
            f"({SOURCE.name}); install gcc or skip the hip-python tests"
        )
    lib_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".libamdhip64.", suffix=".so", dir=lib_dir)
    os.close(fd)
    try:
        proc = subprocess.run(
            [gcc, *CFLAGS, "-o", tmp, str(SOURCE)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise BuildError(
                f"gcc failed ({proc.returncode}) building {SOURCE.name}:\n{proc.stderr}"
            )
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib_dir


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUTDIR", file=sys.stderr)
        return 2
    try:
        print(build(Path(argv[1])))
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
