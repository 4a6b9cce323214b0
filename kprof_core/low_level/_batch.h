/* Raw launches kept in C (_batch.c): the batches a plugin's C appends to through the capsule
 * KPROF_RAW_CAPSULE, one pending entry per batch, until the harvest makes rows of them. */
#ifndef KPROF_BATCH_H
#define KPROF_BATCH_H

#include "_crecorder_unit.h"

/* How many records a recorder's batches hold beyond one per pending entry, so that the pending
 * count (len(incoming) + extra) bounds live tokens as one entry per launch did. Shared by a
 * LaunchPath and its batches, which may outlive it; freed with the last holder. Under the GIL. */
typedef struct {
    Py_ssize_t extra;
    Py_ssize_t refs;
} KprofPendingCount;

/* A new count with one holder; NULL when out of memory. */
KPROF_INTERNAL KprofPendingCount *kprof_count_new(void);

/* One holder fewer (NULL is ignored). */
KPROF_INTERNAL void kprof_count_drop(KprofPendingCount *count);

/* Adds LaunchBatch and the capsule to the module m; -1 with an exception set. */
KPROF_INTERNAL int kprof_batch_init(PyObject *m);

#endif /* KPROF_BATCH_H */
