/* The harvest's and placement's column arithmetic (_columns.c). */
#ifndef KPROF_COLUMNS_H
#define KPROF_COLUMNS_H

#include "_crecorder_unit.h"

/* A fast-queue triple of `backend` on a device in `known`: 1 with its queue id and the device's
 * reference begin time (0 where `known` holds no int), else 0 (no exception set). */
KPROF_INTERNAL int kprof_fast_queue(PyObject *q, PyObject *backend, PyObject *known,
                                    int64_t *qid, int64_t *refb);

/* Adds run_columns, checked_rel_dur, max_diff, add_codes and or_const to the module m; -1 with
 * an exception set. */
KPROF_INTERNAL int kprof_columns_init(PyObject *m);

#endif /* KPROF_COLUMNS_H */
