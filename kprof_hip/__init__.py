"""kprof's HIP backend: AMD GPUs through hip-python (``pip install 'kprof[hip]'``).

Launches and copies made through ``hip.hip`` while a ``kprof.profile()`` is active are timed
on the device with pooled ``hipEvent``s (see ``kprof_hip.capture`` for what is captured).
hip-python has no current stream, so for ``kprof.range``/``kprof.kernel`` name one::

    with kprof.profile() as p, kprof_hip.use_stream(stream):
        with kprof.range("step"):
            hip.hipModuleLaunchKernel(f, 256, 1, 1, 64, 1, 1, 0, stream, None, None)

Verified only against a software test double of the HIP runtime (tests/hip_double), through
the real hip-python 10 bindings; not on AMD hardware.

Importing this package does not import hip-python.
"""

from .runtime import HipError, current_stream, name_function, use_stream

__all__ = ["HipError", "current_stream", "name_function", "use_stream"]
