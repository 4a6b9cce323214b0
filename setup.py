"""Build configuration beyond pyproject.toml: kprof's optional compiled parts.

The extensions are optional (``optional=True``): where no C compiler exists, or the build
fails, ``pip install`` still succeeds and kprof runs its pure-Python path, with the same
behaviour (see ``kprof_core/low_level/native.py``; ``kprof backends`` says which path is in use).
They use the limited API, so one wheel per platform serves CPython 3.10 and later (abi3).
Free-threaded CPython has no limited API before 3.15: there they are not built and kprof runs
pure Python, which is safe without the GIL.
"""

import sysconfig

from setuptools import Extension, setup

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
LIMITED = [("Py_LIMITED_API", "0x030A0000")]


def extension(name: str, *sources: str, depends: tuple[str, ...] = ()) -> Extension:
    """One extension module: its C sources (compiled apart, linked into one module)."""
    return Extension(
        name,
        list(sources),
        depends=list(depends),  # shipped in the sdist, and a change rebuilds the module
        optional=True,
        py_limited_api=True,
        define_macros=LIMITED,
    )


if FREE_THREADED:
    setup()
else:
    setup(
        ext_modules=[
            # The recorder's launch path: every plugin's captured launches go through it. Its
            # other units: launch sites, kprof.range's entry and exit, the idle analysis, the
            # batches of raw launches that a plugin's C hands over, the harvest's columns.
            extension(
                "kprof_core.low_level._crecorder",
                "kprof_core/low_level/_crecorder.c",
                "kprof_core/low_level/_sites.c",
                "kprof_core/low_level/_range.c",
                "kprof_core/low_level/_range_plan.c",
                "kprof_core/low_level/_stamp.c",
                "kprof_core/low_level/_idle.c",
                "kprof_core/low_level/_batch.c",
                "kprof_core/low_level/_columns.c",
                depends=(
                    # Generated from kprof_core/low_level/layout.py (gen_header.py).
                    "kprof_core/low_level/_layout.h",
                    "kprof_core/low_level/_crecorder_unit.h",
                    "kprof_core/low_level/_crecorder.h",
                    "kprof_core/low_level/_sites.h",
                    "kprof_core/low_level/_range.h",
                    "kprof_core/low_level/_stamp.h",
                    "kprof_core/low_level/_range_plan.h",
                    "kprof_core/low_level/_idle.h",
                    "kprof_core/low_level/_batch.h",
                    "kprof_core/low_level/_columns.h",
                ),
            ),
            # The Perfetto trace's encoder (Profile.export_perfetto): one track's packets in C.
            extension(
                "kprof_core.low_level._perfetto",
                "kprof_core/low_level/_perfetto.c",
                # Generated from kprof_core/low_level/perfetto_fields.py (gen_header.py).
                depends=("kprof_core/low_level/_perfetto_fields.h",),
            ),
            # The OpenCL plugin's PyOpenCL side: the compiled launcher, the batch reader of event
            # times, kprof.range's hooks; one unit a concern, in a folder named as _clhook's is.
            extension(
                "kprof_opencl._clnative",
                "kprof_opencl/_clnative_src/module.c",
                "kprof_opencl/_clnative_src/launcher.c",
                "kprof_opencl/_clnative_src/reader.c",
                "kprof_opencl/_clnative_src/range_hooks.c",
                "kprof_opencl/_current_queue.c",
                depends=(
                    "kprof_opencl/_cltypes.h",  # the OpenCL declarations, shared
                    "kprof_opencl/_cunit.h",
                    "kprof_opencl/_clnative_src/clnative.h",
                    "kprof_opencl/_clnative_src/launcher.h",
                    "kprof_opencl/_clnative_src/reader.h",
                    "kprof_opencl/_clnative_src/range_hooks.h",
                    "kprof_opencl/_current_queue.h",
                ),
            ),
            # The OpenCL dispatch-table hook: enqueues from C libraries (VkFFT, CLBlast) too; one
            # unit a concern, in a folder not named after the module (that is a namespace package).
            extension(
                "kprof_opencl._clhook",
                "kprof_opencl/_clhook_src/module.c",
                "kprof_opencl/_clhook_src/table.c",
                "kprof_opencl/_clhook_src/install.c",
                "kprof_opencl/_clhook_src/enqueue.c",
                "kprof_opencl/_clhook_src/queues.c",
                "kprof_opencl/_clhook_src/kernel_names.c",
                "kprof_opencl/_clhook_src/events.c",
                "kprof_opencl/_clhook_src/ranges.c",
                "kprof_opencl/_clhook_src/memory.c",
                "kprof_opencl/_current_queue.c",  # the thread's current queue, as _clnative's
                depends=(
                    "kprof_opencl/_cltypes.h",
                    "kprof_opencl/_cunit.h",
                    "kprof_opencl/_clhook_src/clhook.h",
                    "kprof_opencl/_clhook_src/table.h",
                    "kprof_opencl/_clhook_src/install.h",
                    "kprof_opencl/_clhook_src/enqueue.h",
                    "kprof_opencl/_clhook_src/queues.h",
                    "kprof_opencl/_clhook_src/kernel_names.h",
                    "kprof_opencl/_clhook_src/events.h",
                    "kprof_opencl/_clhook_src/ranges.h",
                    "kprof_opencl/_clhook_src/memory.h",
                    "kprof_opencl/_current_queue.h",
                    # The raw launch it hands the recorder (generated from layout.py).
                    "kprof_core/low_level/_layout.h",
                ),
            ),
            # Its fallback: an interposer `kprof run` preloads where a table cannot be hooked.
            extension(
                "kprof_opencl._clpreload",
                "kprof_opencl/_clpreload.c",
                depends=("kprof_opencl/_cltypes.h",),
            ),
            # The CUDA plugin's CUPTI reader: C buffer callbacks, decoding and the join in C.
            # Built without NVIDIA's headers (the offsets come from kprof_cuda/cupti_abi.py).
            # One unit a concern, as _clhook's.
            extension(
                "kprof_cuda._cupti",
                "kprof_cuda/_cupti_src/module.c",
                "kprof_cuda/_cupti_src/buffers.c",
                "kprof_cuda/_cupti_src/decode.c",
                "kprof_cuda/_cupti_src/join.c",
                "kprof_cuda/_cupti_src/intern.c",
                "kprof_cuda/_cupti_src/rows.c",
                "kprof_cuda/_cupti_src/sites.c",
                depends=(
                    # Generated from kprof_cuda/cupti_layout.py (gen_cupti_header.py).
                    "kprof_cuda/_cupti_layout.h",
                    "kprof_cuda/_cupti_src/reader.h",
                    "kprof_cuda/_cupti_src/buffers.h",
                    "kprof_cuda/_cupti_src/decode.h",
                    "kprof_cuda/_cupti_src/join.h",
                    "kprof_cuda/_cupti_src/intern.h",
                    "kprof_cuda/_cupti_src/rows.h",
                    "kprof_cuda/_cupti_src/sites.h",
                ),
            ),
        ],
        options={"bdist_wheel": {"py_limited_api": "cp310"}},
    )
