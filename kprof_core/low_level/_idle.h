/* The idle analysis's helpers (_idle.c). */
#ifndef KPROF_IDLE_H
#define KPROF_IDLE_H

#include "_crecorder_unit.h"

/* Adds IDLE_VERSION and the idle_* functions to the module m; -1 with an exception set. */
KPROF_INTERNAL int kprof_idle_init(PyObject *m);

#endif /* KPROF_IDLE_H */
