"""CUPTI's binary interface as kprof reads it: activity kinds, record field offsets, and the
callback ids of the API calls that enqueue device work. Defined once: the pure-Python reader
(``cupti_pure``) reads records with these offsets, and the compiled one (``_cupti_src/``) is
handed them at start (``layout()``), so neither needs NVIDIA's headers to build.

Offsets: only fields at the same offset in every supported header version (CUDA 12.6 to 13.5:
CUpti_ActivityKernel9 to Kernel13, Memcpy5 to Memcpy7, Memset4 to Memset5; new versions only
append fields). Records are stepped with CUPTI's own record sizes (``cuptiActivityGetNextRecord``),
never ``sizeof`` of a compiled struct. ``tests/test_cupti_abi.py`` compiles a check of every
number here against the headers of each nvidia-cuda-cupti wheel installed.
"""

from __future__ import annotations

from kprof.plugin import RowNames

from .cupti_layout import OFFSETS

__all__ = [
    "API",
    "BATCH_DRIVER",
    "BATCH_RUNTIME",
    "CALLBACK",
    "COPY_NAMES",
    "EXT",
    "GRAPH_DRIVER",
    "GRAPH_RUNTIME",
    "KERNEL",
    "KIND",
    "MEMCPY",
    "MEMORY",
    "MEMORY_DRIVER",
    "MEMORY_RUNTIME",
    "MEMSET",
    "NEWEST_CHECKED_API",
    "SEVERAL_DRIVER",
    "SEVERAL_RUNTIME",
    "WORK_DRIVER",
    "WORK_RUNTIME",
    "layout",
]

#: CUpti_ActivityKind values kprof uses.
KIND = {
    "MEMCPY": 1,
    "MEMSET": 2,
    "DRIVER": 4,
    "RUNTIME": 5,
    "CONCURRENT_KERNEL": 10,
    "EXTERNAL_CORRELATION": 39,
    "MEMORY2": 49,
}
#: CUpti_ExternalCorrelationKind kprof pushes its scopes as (CUSTOM2, as Kineto's user kind).
EXT_KIND_CUSTOM2 = 5
#: CUpti_ActivityFlag for a flush that also returns buffers holding incomplete records.
FLAG_FLUSH_FORCED = 1
#: CUPTI API version from which refusing a buffer is safe (Kineto: before it, CUPTI crashed).
REFUSE_BUFFERS_FROM_API = 27
#: The newest CUPTI API version whose headers the offsets here were checked against
#: (tests/test_cupti_abi.py fails until this is raised with a newer header). A newer CUPTI is
#: still read, at these offsets, and kprof says so.
NEWEST_CHECKED_API = 130500

# Field offsets in bytes (every record starts with its uint32 kind at 0).
#: CUpti_ActivityKernel9..13 (CONCURRENT_KERNEL).
KERNEL = {
    "start": 16,
    "end": 24,
    "deviceId": 40,
    "contextId": 44,
    "streamId": 48,
    "gridX": 52,
    "gridY": 56,
    "gridZ": 60,
    "blockX": 64,
    "blockY": 68,
    "blockZ": 72,
    "correlationId": 92,
    "name": 104,
    "graphNodeId": 144,
    "graphId": 156,
}
#: CUpti_ActivityMemcpy5..7.
MEMCPY = {
    "copyKind": 4,
    "bytes": 8,
    "start": 16,
    "end": 24,
    "deviceId": 32,
    "contextId": 36,
    "streamId": 40,
    "correlationId": 44,
}
#: CUpti_ActivityMemset4..5.
MEMSET = {
    "bytes": 8,
    "start": 16,
    "end": 24,
    "deviceId": 32,
    "contextId": 36,
    "streamId": 40,
    "correlationId": 44,
}
#: CUpti_ActivityMemory4 (MEMORY2 records; the same offsets in Memory3).
MEMORY = {
    "memoryOperationType": 4,
    "memoryKind": 8,
    "correlationId": 12,
    "address": 16,
    "bytes": 24,
    "timestamp": 32,
    "deviceId": 52,
    "contextId": 56,
    "streamId": 60,
}
#: CUpti_ActivityMemoryOperationType: an allocation, a release.
MEMORY_ALLOCATION, MEMORY_RELEASE = 1, 2
#: CUpti_ActivityMemoryKind values of host memory (pageable, pinned): not a device's.
MEMORY_KIND_HOST = frozenset((1, 2))
#: CUpti_ActivityAPI (DRIVER and RUNTIME records).
API = {
    "cbid": 4,
    "start": 8,
    "end": 16,
    "threadId": 28,
    "correlationId": 32,
    "returnValue": 36,
}
#: CUpti_ActivityExternalCorrelation.
EXT = {"externalKind": 4, "externalId": 8, "correlationId": 16}
#: CUpti_CallbackData (what the callback API hands a subscriber for a driver or runtime call;
#: ``callbackSite`` is CUPTI_API_ENTER or CUPTI_API_EXIT).
CALLBACK = {"callbackSite": 0, "correlationId": 64}
#: CUpti_ApiCallbackSite: the callback at a call's entry; CUpti_CallbackDomain: driver, runtime.
API_ENTER = 0
DOMAIN_DRIVER, DOMAIN_RUNTIME = 1, 2
#: CUptiResult of cuptiSubscribe (and others) when another tool already subscribed.
ERROR_MULTIPLE_SUBSCRIBERS = 39

#: Row names of CUpti_ActivityMemcpyKind values (kprof's shared ones where they exist).
COPY_NAMES = {
    1: RowNames.HOST_TO_DEVICE,
    2: RowNames.DEVICE_TO_HOST,
    3: "[copy host to array]",
    4: "[copy array to host]",
    5: "[copy array to array]",
    6: "[copy array to device]",
    7: "[copy device to array]",
    8: RowNames.DEVICE_TO_DEVICE,
    9: RowNames.HOST_TO_HOST,
    10: RowNames.PEER_TO_PEER,
}
MEMSET_NAME = RowNames.MEMSET

# Callback ids (CUpti_driver_api_trace_cbid / CUpti_runtime_api_trace_cbid of every header
# version from CUDA 12.6 to 13.5; ids are only appended, a few retired ones renamed ``cudaNN``) of the calls that enqueue device work: names with
# "Launch" (not "LaunchHostFunc"), "Memcpy" or "Memset". API records are enabled for these
# only, and only these keep their correlation entry.
# fmt: off
WORK_DRIVER = frozenset(
    (
        43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64,
        65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 115, 116, 117,
        216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 227, 232, 233, 234, 248, 249,
        250, 251, 252, 253, 254, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287,
        288, 289, 290, 291, 292, 293, 305, 306, 307, 318, 319, 320, 321, 397, 398, 399, 400,
        401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 418,
        419, 420, 421, 422, 423, 424, 425, 426, 427, 428, 429, 430, 431, 432, 433, 442, 477,
        478, 480, 504, 505, 506, 507, 508, 514, 515, 520, 562, 563, 652, 653, 776, 777, 778,
        779, 796, 797, 798, 799, 837, 838, 839, 840
    )
)
# fmt: on
# fmt: off
WORK_RUNTIME = frozenset(
    (
        13, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51,
        52, 142, 143, 144, 145, 160, 161, 162, 163, 211, 213, 214, 215, 216, 217, 218, 219, 220,
        221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 243,
        244, 245, 246, 249, 250, 269, 270, 272, 290, 291, 292, 293, 294, 295, 311, 312, 332,
        333, 350, 351, 352, 353, 354, 355, 356, 357, 358, 430, 431, 482, 483, 484, 485, 505,
        506, 509, 510, 511, 512, 554, 555, 556, 557
    )
)
# fmt: on
#: Graph launches (cuGraphLaunch, _ptsz; cudaGraphLaunch_v10000, _ptsz): several records
#: share their correlation id.
GRAPH_DRIVER = frozenset((514, 515))
GRAPH_RUNTIME = frozenset((311, 312))
#: Batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync and their _v2 and _ptsz forms;
#: cudaMemcpyBatchAsync, cudaMemcpy3DBatchAsync of 12.8 and 13.0): a copy record per copy,
#: all with the call's correlation id.
BATCH_DRIVER = frozenset((776, 777, 778, 779, 796, 797, 798, 799))
BATCH_RUNTIME = frozenset((482, 483, 484, 485, 509, 510, 511, 512))
#: The calls whose records share one correlation id, however many (graphs and batches): the
#: readers keep such a launch until its profile ends, every record of it a row.
SEVERAL_DRIVER = GRAPH_DRIVER | BATCH_DRIVER
SEVERAL_RUNTIME = GRAPH_RUNTIME | BATCH_RUNTIME


# Callback ids of the calls that allocate or free memory (CUPTI writes a MEMORY2 record for
# each that did): cuMemAlloc*, cuMemFree*, cuMemHostAlloc*, cuMemAllocManaged, the async and
# pool forms; cudaMalloc*, cudaFree*, cudaHostAlloc (not arrays). Their API records are enabled
# only while memory is recorded, and a profile's end never waits for their records (a failed
# call, or cudaFree(0), writes none).
MEMORY_DRIVER = frozenset(
    (29, 31, 33, 37, 38, 39, 243, 244, 245, 271, 294, 371, 598, 599, 600, 601, 611, 612)
)
MEMORY_RUNTIME = frozenset((20, 21, 22, 25, 26, 27, 140, 206, 373, 374, 375, 376, 391, 392))


def layout() -> tuple[int, ...]:
    """The offsets the compiled reader is configured with, in its order (``cupti_layout.OFFSETS``,
    which the compiled reader's generated header enumerates)."""
    tables = {
        "KERNEL": KERNEL,
        "MEMCPY": MEMCPY,
        "MEMSET": MEMSET,
        "API": API,
        "EXT": EXT,
        "MEMORY": MEMORY,
        "CALLBACK": CALLBACK,
    }
    return tuple(tables[record][field] for record, field in OFFSETS)
