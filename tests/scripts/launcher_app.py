"""A plain script (no MPI in it) for ``mpiexec -n N kprof run --output 'prof-{rank}.kprof'``.

Every rank launches ``step`` twice on the test device; the launcher's variables tell kprof
which rank it is.
"""

from kprof_testbackend import device

q = device.Queue()
with q:
    q.launch("step", 50)
    q.launch("step", 50)
q.finish()
