"""The pure-Python reader's rows of MEMORY2 records (``cupti_pure``; ``_cupti_src/`` does the
same in C): an allocation is a row of kind 2, a free of kind 3, joined as work by its call's
correlation id; ``begin`` = ``end`` = its time, ``name`` = CUPTI's memory kind, ``nbytes`` and
``address`` (``cupti_layout.ROW_COLUMNS`` says so)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import cupti_abi as abi

__all__ = ["memory_rows"]

#: Reads a field of the records at offsets ``o``: ``(o, field offset) -> int64 column``.
Field = Callable[[np.ndarray, int], np.ndarray]


def memory_rows(o: np.ndarray, u32: Field, u64: Field) -> dict[str, np.ndarray] | None:
    """The raw rows (``cupti_join.RAW_COLUMNS``) of the MEMORY2 records at offsets ``o``:
    allocations and releases only (other operation types skipped), or None."""
    if not len(o):
        return None
    f = abi.MEMORY
    op = u32(o, f["memoryOperationType"])
    o = o[(op == abi.MEMORY_ALLOCATION) | (op == abi.MEMORY_RELEASE)]
    if not len(o):
        return None
    op = u32(o, f["memoryOperationType"])
    zeros = np.zeros(len(o), np.int64)
    t = u64(o, f["timestamp"])
    return {
        "correlation": u32(o, f["correlationId"]),
        "kind": np.where(op == abi.MEMORY_ALLOCATION, 2, 3).astype(np.int64),
        "name": u32(o, f["memoryKind"]),
        "device": u32(o, f["deviceId"]),
        "context": u32(o, f["contextId"]),
        "stream": u32(o, f["streamId"]),
        "begin": t,
        "end": t,
        "nbytes": u64(o, f["bytes"]),
        "grid_x": zeros,
        "grid_y": zeros,
        "grid_z": zeros,
        "block_x": zeros,
        "block_y": zeros,
        "block_z": zeros,
        "address": u64(o, f["address"]),
    }
