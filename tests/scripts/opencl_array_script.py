"""A user's script for `kprof run`: pyopencl.array work, then behaves as argv[1] says."""

import sys

import numpy as np
import pyopencl.array as cla

import kprof_opencl

print(f"__name__={__name__}")
print(f"argv={sys.argv[1:]}")
queue = kprof_opencl.profiling_queue()
a = cla.to_device(queue, np.arange(4096, dtype=np.float32))
b = (2 * a + 1).get()
assert b[10] == 21.0
print("computed", flush=True)

if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    if mode == "raise":
        raise ValueError("boom from the script")
    if mode == "exit3":
        sys.exit(3)
