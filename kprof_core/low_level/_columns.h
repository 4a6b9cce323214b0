/* The harvest's and placement's column arithmetic (_columns.c). */
#ifndef KPROF_COLUMNS_H
#define KPROF_COLUMNS_H

#include "_crecorder_unit.h"

/* Adds run_columns, checked_rel_dur, max_diff, add_codes and or_const to the module m; -1 with
 * an exception set. */
KPROF_INTERNAL int kprof_columns_init(PyObject *m);

#endif /* KPROF_COLUMNS_H */
