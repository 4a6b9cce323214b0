"""kprof's HIP backend: AMD GPUs through hip-python (``pip install 'kprof[hip]'``).

Launches and copies made through ``hip.hip`` while a ``kprof.profile()`` is active are timed
on the device with pooled ``hipEvent``s (see ``kprof_hip.capture`` for what is captured).
hip-python has no current stream, so for ``kprof.range``/``kprof.kernel`` name one::

    with kprof.profile() as p, kprof_hip.use_stream(stream):
        with kprof.range("step"):
            hip.hipModuleLaunchKernel(f, 256, 1, 1, 64, 1, 1, 0, stream, None, None)

Capture patches the attributes of the ``hip.hip`` module while a profile is active: a
function imported by name before the profile started (``from hip.hip import
hipModuleLaunchKernel``) is the original and escapes capture. Kernels are named after what
``hipModuleGetFunction`` was given while capture was installed; name a function obtained
earlier with ``kprof_hip.name_function(f, "name")``, or it shows as ``kernel@0x...``.

Verified only against a software test double of the HIP runtime (tests/hip_double), through
the real hip-python 10 bindings; not on AMD hardware.

Importing this package does not import hip-python.
"""

from .runtime import HipError, current_stream, name_function, use_stream

__all__ = ["HipError", "current_stream", "name_function", "use_stream"]
