/* Raw launches kept in C (_batch.c): the batches a plugin's C appends to through the capsule
 * KPROF_RAW_CAPSULE, one pending entry per batch, until the harvest makes rows of them. */
#ifndef KPROF_BATCH_H
#define KPROF_BATCH_H

#include "_crecorder_unit.h"
#include "_layout.h"

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

struct KprofLaunchPath; /* _crecorder.h's LaunchPath */

/* Whether `lp` takes raw records now (its profile is open). */
KPROF_INTERNAL int kprof_batch_open(struct KprofLaunchPath *lp);

/* Appends one raw record of the backend in `slot` to lp's current batch (a new one where the
 * last pending entry is not one of `ops`): `l`'s tokens become the batch's, its objects and
 * `qk` (id of l->queue, kept in lp's live queues), `who` and `site` are the launch path's as
 * kprof_lp_common gives them (borrowed: the batch takes its own references). `flags` is 0, or
 * KPROF_WITH_HOST where the record carries its range's host side (h0, h1); `flops` -1 or the
 * work a range said it does. Then back-pressure. 0; -1 with an exception, the tokens the
 * caller's again, or taken where only the harvest it started failed (*taken says which). */
KPROF_INTERNAL int kprof_batch_add(struct KprofLaunchPath *lp, PyObject *slot,
                                   const KprofRawOps *ops, const KprofRawLaunch *l, PyObject *qk,
                                   PyObject *who, Py_ssize_t site, int64_t flags, int64_t flops,
                                   int *taken);

/* Adds LaunchBatch and the capsule to the module m; -1 with an exception set. */
KPROF_INTERNAL int kprof_batch_init(PyObject *m);

#endif /* KPROF_BATCH_H */
