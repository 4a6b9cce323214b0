"""The names of the rows that move or set data, written once for every backend."""

from __future__ import annotations

from typing import Final


class RowNames:
    """Row names for copies and fills (``kprof.plugin.RowNames``), shared by every backend so
    that the same movement reads the same, and sums up together, wherever it ran. A plugin
    names a ``COPY`` row with one of these where one fits, and with its own bracketed name
    (``"[copy host to array]"``) where none does."""

    HOST_TO_DEVICE: Final = "[copy host to device]"
    DEVICE_TO_HOST: Final = "[copy device to host]"
    DEVICE_TO_DEVICE: Final = "[copy device to device]"
    HOST_TO_HOST: Final = "[copy host to host]"
    PEER_TO_PEER: Final = "[copy peer to peer]"
    #: A copy whose direction the API leaves to the runtime (``hipMemcpyDefault``).
    ANY_DIRECTION: Final = "[copy]"
    SHARED_VIRTUAL_MEMORY: Final = "[copy shared virtual memory]"
    #: OpenCL's fills (``clEnqueueFillBuffer``, ``clEnqueueFillImage``, SVM fills).
    FILL: Final = "[fill device memory]"
    #: CUDA's and HIP's memsets.
    MEMSET: Final = "[memset]"
