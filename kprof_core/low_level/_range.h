/* kprof.range's compiled entry and exit (_range.c). */
#ifndef KPROF_RANGE_H
#define KPROF_RANGE_H

#include "_crecorder_unit.h"

/* Adds RangeBase and range_bind() to the module m; -1 with an exception set. */
KPROF_INTERNAL int kprof_range_init(PyObject *m);

#endif /* KPROF_RANGE_H */
