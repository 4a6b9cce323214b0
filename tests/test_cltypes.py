"""The OpenCL declarations kprof writes by hand (``kprof_opencl/_cltypes.h``, so that it builds
without the OpenCL SDK) are the Khronos ones. Where the Khronos headers are installed, a unit
that includes them and then ``_cltypes.h`` compiles (a type declared again as another type, or a
macro defined again with other tokens, is an error), every slot is its entry's index in
``cl_icd_dispatch``, and the interposer's entry points have the Khronos prototypes."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

KHRONOS = Path("/usr/include/CL/cl_icd.h")
#: Each slot of _cltypes.h and its entry in struct _cl_icd_dispatch.
ENTRIES = {
    "SLOT_CREATE_COMMAND_QUEUE": "clCreateCommandQueue",
    "SLOT_CREATE_BUFFER": "clCreateBuffer",
    "SLOT_CREATE_BUFFER_WITH_PROPERTIES": "clCreateBufferWithProperties",
    "SLOT_CREATE_IMAGE": "clCreateImage",
    "SLOT_CREATE_IMAGE_WITH_PROPERTIES": "clCreateImageWithProperties",
    "SLOT_RELEASE_MEM_OBJECT": "clReleaseMemObject",
    "SLOT_GET_MEM_OBJECT_INFO": "clGetMemObjectInfo",
    "SLOT_GET_IMAGE_INFO": "clGetImageInfo",
    "SLOT_RELEASE_KERNEL": "clReleaseKernel",
    "SLOT_GET_KERNEL_INFO": "clGetKernelInfo",
    "SLOT_GET_EVENT_INFO": "clGetEventInfo",
    "SLOT_RETAIN_EVENT": "clRetainEvent",
    "SLOT_RELEASE_EVENT": "clReleaseEvent",
    "SLOT_GET_EVENT_PROFILING_INFO": "clGetEventProfilingInfo",
    "SLOT_ENQUEUE_READ_BUFFER": "clEnqueueReadBuffer",
    "SLOT_ENQUEUE_WRITE_BUFFER": "clEnqueueWriteBuffer",
    "SLOT_ENQUEUE_COPY_BUFFER": "clEnqueueCopyBuffer",
    "SLOT_ENQUEUE_READ_IMAGE": "clEnqueueReadImage",
    "SLOT_ENQUEUE_WRITE_IMAGE": "clEnqueueWriteImage",
    "SLOT_ENQUEUE_COPY_IMAGE": "clEnqueueCopyImage",
    "SLOT_ENQUEUE_COPY_IMAGE_TO_BUFFER": "clEnqueueCopyImageToBuffer",
    "SLOT_ENQUEUE_COPY_BUFFER_TO_IMAGE": "clEnqueueCopyBufferToImage",
    "SLOT_ENQUEUE_NDRANGE_KERNEL": "clEnqueueNDRangeKernel",
    "SLOT_SET_EVENT_CALLBACK": "clSetEventCallback",
    "SLOT_SET_MEM_OBJECT_DESTRUCTOR_CALLBACK": "clSetMemObjectDestructorCallback",
    "SLOT_ENQUEUE_READ_BUFFER_RECT": "clEnqueueReadBufferRect",
    "SLOT_ENQUEUE_WRITE_BUFFER_RECT": "clEnqueueWriteBufferRect",
    "SLOT_ENQUEUE_COPY_BUFFER_RECT": "clEnqueueCopyBufferRect",
    "SLOT_ENQUEUE_FILL_BUFFER": "clEnqueueFillBuffer",
    "SLOT_ENQUEUE_FILL_IMAGE": "clEnqueueFillImage",
    "SLOT_ENQUEUE_MARKER_WITH_WAIT_LIST": "clEnqueueMarkerWithWaitList",
    "SLOT_CREATE_COMMAND_QUEUE_WITH_PROPERTIES": "clCreateCommandQueueWithProperties",
    "SLOT_SVM_ALLOC": "clSVMAlloc",
    "SLOT_SVM_FREE": "clSVMFree",
    "SLOT_ENQUEUE_SVM_FREE": "clEnqueueSVMFree",
    "SLOT_ENQUEUE_SVM_MEMCPY": "clEnqueueSVMMemcpy",
    "SLOT_ENQUEUE_SVM_MEM_FILL": "clEnqueueSVMMemFill",
}


@pytest.fixture
def sources() -> Path:
    spec = importlib.util.find_spec("kprof_opencl")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / "_cltypes.h").exists():
        pytest.skip("no C sources beside the package")
    return folder


def compiles(code: str, tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    if not KHRONOS.exists():
        pytest.skip("no CL/cl_icd.h here (apt-get install opencl-headers)")
    unit = tmp_path / "check.c"
    unit.write_text("#define CL_TARGET_OPENCL_VERSION 300\n" + code)
    ran = subprocess.run(
        [cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", str(unit)],
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr


def test_every_slot_is_checked_here(sources: Path) -> None:
    text = (sources / "_cltypes.h").read_text(encoding="utf-8")
    assert set(re.findall(r"^\s*(SLOT_\w+) = \d+,", text, re.M)) == set(ENTRIES)


def test_the_declarations_are_the_khronos_ones(sources: Path, tmp_path: Path) -> None:
    slots = "".join(
        f"_Static_assert({slot} == offsetof(cl_icd_dispatch, {entry}) / sizeof(void *), "
        f'"{slot}");\n'
        for slot, entry in ENTRIES.items()
    )
    compiles(
        f'#include <CL/cl_icd.h>\n#include "{sources / "_cltypes.h"}"\n#include <stddef.h>\n'
        + slots,
        tmp_path,
    )


def test_the_interposer_has_the_khronos_prototypes(sources: Path, tmp_path: Path) -> None:
    compiles(f'#include <CL/cl.h>\n#include "{sources / "_clpreload.c"}"\n', tmp_path)
