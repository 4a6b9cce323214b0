"""Build the CUPTI test double: ``OUTDIR/libcupti.so.<major>`` and ``OUTDIR/libcuda.so.1``.

Both are compiled with the system ``cc`` against the public headers NVIDIA's wheels ship in
site-packages: ``cupti_*.h`` (nvidia-cuda-cupti), ``cuda.h`` and ``builtin_types.h``
(nvidia-cuda-runtime) and ``crt/host_defines.h`` (nvidia-cuda-nvcc), so every record layout
is the header's. Test code only; never shipped.

Usage: ``python tests/cupti_double/build.py OUTDIR`` (prints the two library paths).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CUPTI_SOURCE = HERE / "cuptidouble.c"
DRIVER_SOURCE = HERE / "cudadriver.c"
CFLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-Wall", "-Wextra"]


class BuildError(RuntimeError):
    """The double could not be built (no cc, headers missing, or a compile error)."""


def _site_dirs() -> list[Path]:
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    dirs.update(p for p in sys.path if p.endswith("site-packages"))
    return [Path(d) for d in sorted(dirs) if Path(d).is_dir()]


def find_header(name: str, prefer: str = "cuda_cupti") -> Path:
    """The include directory under ``site-packages/nvidia`` that holds ``name`` (``prefer``'s
    first: CUDA 12's CUPTI headers go with the CUDA 12 ``cuda.h`` the test extra brings)."""
    for site in _site_dirs():
        root = site / "nvidia"
        if not root.is_dir():
            continue
        hits = sorted(root.glob(f"*/include/{name}"), key=lambda p: p.parts[-3] != prefer)
        for hit in hits:
            return hit.parents[len(Path(name).parts) - 1]
    raise BuildError(
        f"{name} not found under site-packages/nvidia: install the test extra "
        f"(pip install -e '.[cuda,test]': nvidia-cuda-cupti-cu12, "
        f"nvidia-cuda-runtime-cu12, nvidia-cuda-nvcc-cu12)"
    )


def cupti_major(cupti_include: Path) -> int:
    """The CUDA major of the CUPTI headers (the double's soname): CUPTI_API_VERSION is 24-28
    in CUDA 12 and major * 10000 + minor * 100 from CUDA 13 on."""
    import re

    text = (cupti_include / "cupti_version.h").read_text(errors="replace")
    m = re.search(r"#define\s+CUPTI_API_VERSION\s+(\d+)", text)
    if m is None:
        raise BuildError(f"no CUPTI_API_VERSION in {cupti_include / 'cupti_version.h'}")
    v = int(m.group(1))
    return v // 10000 if v >= 10000 else 12


def record_types(cupti_include: Path) -> list[str]:
    """``-D`` flags naming the newest kernel, memcpy, memset and memory record structs the headers
    define: what a libcupti built from these headers writes, and what the matching
    kprof must read at its common offsets (Kernel9/Memcpy6/Memset4 in CUDA 12.9's,
    Kernel13/Memcpy7/Memset5 in
    CUDA 13.5's)."""
    import re

    text = "".join(
        p.read_text(errors="replace") for p in sorted(cupti_include.glob("cupti_activity*.h"))
    )
    flags = []
    for macro, base in (
        ("KERNEL_RECORD", "Kernel"),
        ("MEMCPY_RECORD", "Memcpy"),
        ("MEMSET_RECORD", "Memset"),
        ("MEMORY_RECORD", "Memory"),
    ):
        versions = [int(v) for v in re.findall(rf"}}\s*CUpti_Activity{base}(\d+)\s*;", text)]
        if not versions:
            raise BuildError(f"no CUpti_Activity{base}N record in {cupti_include}")
        flags.append(f"-D{macro}=CUpti_Activity{base}{max(versions)}")
    return flags


def _compile(
    cc: str,
    source: Path,
    out: Path,
    soname: str,
    includes: list[Path],
    extra: list[str] | None = None,
) -> None:
    if out.exists() and out.stat().st_mtime >= source.stat().st_mtime:
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{soname}.", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        cmd = [
            cc,
            *CFLAGS,
            *(extra or []),
            *(f"-I{d}" for d in includes),
            f"-Wl,-soname,{soname}",
            "-o",
            tmp,
            str(source),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(
                f"cc failed ({proc.returncode}) building {source.name}:\n{proc.stderr}"
            )
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build(out_dir: Path) -> tuple[Path, Path]:
    """Compile both libraries into ``out_dir`` (if missing or older than their source);
    return ``(libcupti, libcuda)``. Safe for concurrent builders (rename into place)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BuildError("no C compiler (cc) on PATH: it builds the CUPTI test double")
    includes = [
        find_header("cupti_activity.h"),
        find_header("cuda.h"),
        find_header("crt/host_defines.h"),
    ]
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    soname = f"libcupti.so.{cupti_major(includes[0])}"
    cupti = out / soname
    driver = out / "libcuda.so.1"
    _compile(cc, CUPTI_SOURCE, cupti, soname, includes, record_types(includes[0]))
    _compile(cc, DRIVER_SOURCE, driver, "libcuda.so.1", includes)
    return cupti, driver


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUTDIR", file=sys.stderr)
        return 2
    try:
        for p in build(Path(argv[1])):
            print(p)
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
