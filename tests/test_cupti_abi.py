"""kprof's CUPTI record offsets, kinds and callback ids (``kprof_cuda/cupti_abi.py``) against
the public headers of every nvidia-cuda-cupti wheel here.

The readers never see NVIDIA's headers: the offsets they read are the ones in cupti_abi, which
must be the same in every supported header version (CUDA 12.6 to 13.5). For each header
version found (the test extra installs CUDA 12's and CUDA 13's; more directories can be given
in ``KPROF_CUPTI_HEADER_DIRS``, separated by ``os.pathsep``), a C file of ``_Static_assert``s
on ``offsetof`` of the newest kernel, memcpy and memset records that version defines, the API
and external-correlation records, and the enum values, is compiled with the system cc.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kprof_cuda import cupti_abi as abi

sys.path.insert(0, str(Path(__file__).resolve().parent / "cupti_double"))
import build as cupti_build


def _header_dirs() -> list[Path]:
    dirs: list[Path] = []
    for site in cupti_build._site_dirs():
        dirs += sorted(p.parent for p in (site / "nvidia").glob("*/include/cupti_activity.h"))
    for d in os.environ.get("KPROF_CUPTI_HEADER_DIRS", "").split(os.pathsep):
        if d and (Path(d) / "cupti_activity.h").is_file():
            dirs.append(Path(d))
    return dirs


def _api_version(d: Path) -> int:
    m = re.search(r"#define\s+CUPTI_API_VERSION\s+(\d+)", (d / "cupti_version.h").read_text())
    assert m is not None, d
    return int(m.group(1))


HEADERS = {_api_version(d): d for d in _header_dirs()}


def test_the_newest_checked_version_is_the_newest_header() -> None:
    """cupti_abi.NEWEST_CHECKED_API names the newest header the offsets were checked against:
    a newer header here means raising it (after the checks below pass with it)."""
    assert max(HEADERS) == abi.NEWEST_CHECKED_API, (sorted(HEADERS), abi.NEWEST_CHECKED_API)


def test_at_least_two_header_versions() -> None:
    """The check below is worth something only across versions (CUDA 12 and 13 at least)."""
    assert len(HEADERS) >= 2, f"CUPTI headers found: {HEADERS} (pip install -e '.[cuda,test]')"
    assert any(v < 100 for v in HEADERS) and any(v >= 130000 for v in HEADERS), HEADERS


def _newest(text: str, base: str) -> str:
    versions = [int(v) for v in re.findall(rf"}}\s*CUpti_Activity{base}(\d+)\s*;", text)]
    assert versions, base
    return f"CUpti_Activity{base}{max(versions)}"


def _enum_ids(path: Path, prefix: str) -> dict[str, int]:
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(rf"{prefix}(\w+)\s*=\s*(\d+)", path.read_text())
        if m.group(1) not in ("SIZE", "INVALID") and not m.group(1).startswith("FORCE")
    }


@pytest.mark.parametrize("version", sorted(HEADERS))
def test_offsets_match_the_headers(version: int, tmp_path: Path) -> None:
    d = HEADERS[version]
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc is not None, "no C compiler: it checks kprof's CUPTI offsets"
    text = "".join(p.read_text(errors="replace") for p in sorted(d.glob("cupti_activity*.h")))
    structs = {
        "KERNEL": _newest(text, "Kernel"),
        "MEMCPY": _newest(text, "Memcpy"),
        "MEMSET": _newest(text, "Memset"),
        "API": "CUpti_ActivityAPI",
        "EXT": "CUpti_ActivityExternalCorrelation",
        "MEMORY": _newest(text, "Memory"),
    }
    callback_struct = "CUpti_CallbackData"
    checks = []
    for table, struct in structs.items():
        for field, offset in getattr(abi, table).items():
            checks.append(
                f'_Static_assert(offsetof({struct}, {field}) == {offset}, "{struct}.{field}");'
            )
        checks.append(f'_Static_assert(offsetof({struct}, kind) == 0, "{struct}.kind");')
    for field, offset in abi.CALLBACK.items():
        checks.append(
            f"_Static_assert(offsetof({callback_struct}, {field}) == {offset}, "
            f'"{callback_struct}.{field}");'
        )
    for name, value in (
        ("CUPTI_API_ENTER", abi.API_ENTER),
        ("CUPTI_CB_DOMAIN_DRIVER_API", abi.DOMAIN_DRIVER),
        ("CUPTI_CB_DOMAIN_RUNTIME_API", abi.DOMAIN_RUNTIME),
        ("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", abi.ERROR_MULTIPLE_SUBSCRIBERS),
    ):
        checks.append(f'_Static_assert({name} == {value}, "{name}");')
    for name, value in abi.KIND.items():
        checks.append(f'_Static_assert(CUPTI_ACTIVITY_KIND_{name} == {value}, "{name}");')
    checks.append(
        f"_Static_assert(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 == {abi.EXT_KIND_CUSTOM2}, "
        '"CUSTOM2");'
    )
    checks.append(
        f"_Static_assert(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED == {abi.FLAG_FLUSH_FORCED}, "
        '"FLUSH_FORCED");'
    )
    checks.append(
        f"_Static_assert(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION == "
        f'{abi.MEMORY_ALLOCATION}, "ALLOCATION");'
    )
    checks.append(
        f'_Static_assert(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE == {abi.MEMORY_RELEASE}, "RELEASE");'
    )
    for name, value in (("PAGEABLE", 1), ("PINNED", 2)):
        assert value in abi.MEMORY_KIND_HOST
        checks.append(f'_Static_assert(CUPTI_ACTIVITY_MEMORY_KIND_{name} == {value}, "{name}");')
    kinds = ("HTOD", "DTOH", "HTOA", "ATOH", "ATOA", "ATOD", "DTOA", "DTOD", "HTOH", "PTOP")
    for i, k in enumerate(kinds, 1):
        checks.append(f'_Static_assert(CUPTI_ACTIVITY_MEMCPY_KIND_{k} == {i}, "{k}");')
    src = tmp_path / "offsets.c"
    src.write_text(
        "#include <stddef.h>\n#include <cupti_activity.h>\n#include <cupti_callbacks.h>\n"
        + "\n".join(checks)
        + "\n"
    )
    includes = [d, cupti_build.find_header("cuda.h"), cupti_build.find_header("crt/host_defines.h")]
    proc = subprocess.run(
        [cc, "-c", "-o", str(tmp_path / "offsets.o"), *(f"-I{i}" for i in includes), str(src)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"CUPTI API {version} ({d}):\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("version", sorted(HEADERS))
def test_work_callback_ids_match_the_headers(version: int) -> None:
    """The calls that enqueue work (Launch but LaunchHostFunc, Memcpy, Memset) by name, the
    graph launches and the batched copies, have the ids cupti_abi lists (ids are only appended). Ids CUDA 13
    retired (``cuda44``, once ``cu64MemcpyHtoD``) stay listed: never called, harmless."""
    d = HEADERS[version]
    for header, prefix, work, graph, batch in (
        (
            "cupti_driver_cbid.h",
            "CUPTI_DRIVER_TRACE_CBID_",
            abi.WORK_DRIVER,
            abi.GRAPH_DRIVER,
            abi.BATCH_DRIVER,
        ),
        (
            "cupti_runtime_cbid.h",
            "CUPTI_RUNTIME_TRACE_CBID_",
            abi.WORK_RUNTIME,
            abi.GRAPH_RUNTIME,
            abi.BATCH_RUNTIME,
        ),
    ):
        ids = _enum_ids(d / header, prefix)
        known = set(ids.values())
        want = {
            v
            for n, v in ids.items()
            if ("Launch" in n and "HostFunc" not in n) or "Memcpy" in n or "Memset" in n
        }
        assert want <= work, (header, sorted(want - work))
        extra = {n: v for n, v in ids.items() if v in work - want}
        assert all(re.fullmatch(r"cuda\d+", n) for n in extra), (header, extra)
        assert {v for n, v in ids.items() if "GraphLaunch" in n} == graph & known, header
        batched = {v for n, v in ids.items() if re.search(r"Memcpy(3D)?Batch", n)}
        assert batched == batch & known and batch <= work, header


#: The names of the calls that allocate or free, whose API records carry a MEMORY2 record's
#: scope (cupti_abi.MEMORY_DRIVER / MEMORY_RUNTIME): arrays and mipmapped arrays left out.
_MEMORY_CALLS = {
    "cupti_driver_cbid.h": re.compile(
        r"cuMem(Alloc|Free|HostAlloc|AllocHost|FreeHost|AllocManaged|AllocPitch|AllocAsync|"
        r"FreeAsync|AllocFromPoolAsync)(_v2|_ptsz)?"
    ),
    "cupti_runtime_cbid.h": re.compile(
        r"cuda(Malloc|Free|MallocHost|FreeHost|HostAlloc|MallocPitch|Malloc3D|MallocManaged|"
        r"MallocAsync|FreeAsync|MallocFromPoolAsync)(_ptsz)?_v\d+"
    ),
}


@pytest.mark.parametrize("version", sorted(HEADERS))
def test_memory_callback_ids_match_the_headers(version: int) -> None:
    """The allocating and freeing calls have the ids cupti_abi lists (every one of them in
    CUDA 12.6's header), none of them a call that enqueues work (never waited for)."""
    d = HEADERS[version]
    for header, prefix, mem, work in (
        ("cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_", abi.MEMORY_DRIVER, abi.WORK_DRIVER),
        ("cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_", abi.MEMORY_RUNTIME, abi.WORK_RUNTIME),
    ):
        ids = _enum_ids(d / header, prefix)
        want = {v for n, v in ids.items() if _MEMORY_CALLS[header].fullmatch(n)}
        assert want <= mem, (header, sorted(want - mem))
        # Ids a later header retired (cuMemHostAlloc_v2 in CUDA 13) stay listed: harmless.
        extra = {n: v for n, v in ids.items() if v in mem - want}
        assert all(re.fullmatch(r"cuda\d+", n) for n in extra), (header, extra)
        assert not mem & work, header
