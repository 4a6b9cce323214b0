/* The kernel-launch wrapper (launcher.c): PyOpenCL's enqueue_nd_range_kernel, its common case
 * in C, handing launches to the compiled recorder's C launch. */
#ifndef KPROF_CLNATIVE_LAUNCHER_H
#define KPROF_CLNATIVE_LAUNCHER_H

#include "clnative.h"

/* Interns the names and makes the Launcher type; -1 with an exception. */
KPROF_INTERNAL int kprof_launcher_init(void);

KPROF_INTERNAL PyObject *kprof_py_launcher(PyObject *module, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_linked(PyObject *module, PyObject *unused);

#endif /* KPROF_CLNATIVE_LAUNCHER_H */
