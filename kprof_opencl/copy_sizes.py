"""Which row a PyOpenCL copy or fill makes, and its byte count, read from the native entry
point's arguments (``COPIES``); ``capture.py`` wraps each entry point with these.

Row names are shared by every path that moves data the same way (so they sum up together),
the dispatch-table hook's (``hook.py``) included.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kprof.plugin import RowNames

# Names of copy rows, shared by every path that moves the same way (so they sum up together).
H2D = RowNames.HOST_TO_DEVICE
D2H = RowNames.DEVICE_TO_HOST
D2D = RowNames.DEVICE_TO_DEVICE
FILL = RowNames.FILL
SVM_COPY = RowNames.SHARED_VIRTUAL_MEMORY

NBytes = Callable[[tuple[Any, ...], dict[str, Any]], int]


def _arg(
    args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str, default: Any = None
) -> Any:
    """Argument ``i`` (counted after the queue) of a native call, by position or keyword."""
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _host_nbytes(buf: Any) -> int:
    n = getattr(buf, "nbytes", None)
    if isinstance(n, int):
        return n
    return memoryview(buf).nbytes


def _region(region: Any) -> int:
    return math.prod(int(r) for r in region)


def _hostbuf(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return _host_nbytes(_arg(args, kwargs, 1, "hostbuf"))


def _copy_buffer(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    count = _arg(args, kwargs, 2, "byte_count", -1)
    if count is not None and count >= 0:
        return int(count)
    # As PyOpenCL does for byte_count=-1: the smaller of what is left in source and destination.
    src, dst = args[0] if args else kwargs["src"], _arg(args, kwargs, 1, "dst")
    return min(
        int(src.size) - int(_arg(args, kwargs, 3, "src_offset", 0)),
        int(dst.size) - int(_arg(args, kwargs, 4, "dst_offset", 0)),
    )


def _region_at(i: int) -> NBytes:
    def nbytes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        return _region(_arg(args, kwargs, i, "region"))

    return nbytes


def _image_region_at(i: int, image_at: int) -> NBytes:
    """Bytes of an image transfer: pixels in the region times the image's pixel size."""

    def nbytes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        image = args[image_at]  # images are passed positionally (enqueue_copy does)
        return _region(_arg(args, kwargs, i, "region")) * int(image.element_size)

    return nbytes


def _fill_buffer(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return int(_arg(args, kwargs, 3, "size"))


def _svm_size(p: Any) -> int:
    size = getattr(p, "size", None)
    if isinstance(size, int):
        return size
    return _host_nbytes(getattr(p, "mem", p))


def _svm_memcpy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    count = _arg(args, kwargs, 4, "byte_count")
    if count is not None:
        return int(count)
    return min(_svm_size(_arg(args, kwargs, 1, "dst")), _svm_size(_arg(args, kwargs, 2, "src")))


def _svm_memfill(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    count = _arg(args, kwargs, 2, "byte_count")
    return int(count) if count is not None else _svm_size(_arg(args, kwargs, 0, "dst"))


# Native copy entry points of pyopencl._cl: (name, row name, bytes from the args after queue).
COPIES: tuple[tuple[str, str, NBytes], ...] = (
    ("_enqueue_write_buffer", H2D, _hostbuf),
    ("_enqueue_read_buffer", D2H, _hostbuf),
    ("_enqueue_copy_buffer", D2D, _copy_buffer),
    ("_enqueue_write_buffer_rect", H2D, _region_at(4)),
    ("_enqueue_read_buffer_rect", D2H, _region_at(4)),
    ("_enqueue_copy_buffer_rect", D2D, _region_at(4)),
    ("_enqueue_write_image", H2D, _image_region_at(2, 0)),
    ("_enqueue_read_image", D2H, _image_region_at(2, 0)),
    ("_enqueue_copy_image", D2D, _image_region_at(4, 0)),
    ("_enqueue_copy_image_to_buffer", D2D, _image_region_at(3, 0)),
    ("_enqueue_copy_buffer_to_image", D2D, _image_region_at(4, 1)),
    ("_enqueue_fill_buffer", FILL, _fill_buffer),
    ("enqueue_fill_image", FILL, _image_region_at(3, 0)),
    ("_enqueue_svm_memcpy", SVM_COPY, _svm_memcpy),
    ("_enqueue_svm_memfill", FILL, _svm_memfill),
)
# AMD's peer-to-peer copy takes the platform first and the queue second.
P2P = "enqueue_copy_buffer_p2p_amd"


def p2p_bytes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    count = _arg(args, kwargs, 2, "byte_count")
    return int(count) if count is not None else _copy_buffer(args[:2], {})
