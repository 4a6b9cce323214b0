/* A range's timestamps through a plugin's raw stamp (_stamp.c, a unit of _crecorder): the
 * KprofRawStamp a record_timestamp hook carries (layout.py), for kprof.range's compiled path. */
#ifndef KPROF_STAMP_H
#define KPROF_STAMP_H

#include "_crecorder_unit.h"
#include "_layout.h"
#include "_crecorder.h"

/* The raw stamp of a range plan item (its RG_RAW_STAMP, a capsule), or NULL: none, or one
 * built for another layout (the Python hook answers then, as where there is none). No
 * exception. */
KPROF_INTERNAL const KprofRawStamp *kprof_stamp_of(PyObject *plan_item);

/* A range's start on `queue`: the plugin's Python token for it (the range's frame keeps it,
 * for every path that may end the range), or NULL: none made, with an exception where the
 * plugin failed, else for the Python hook to answer. */
KPROF_INTERNAL PyObject *kprof_stamp_start(const KprofRawStamp *st, PyObject *queue);

/* A range's stop on `queue`, its start `token` being the plugin's: 1 with both as raw tokens
 * (new references) in *start and *stop; 0 none (an exception where the plugin failed). */
KPROF_INTERNAL int kprof_stamp_stop(const KprofRawStamp *st, PyObject *token, PyObject *queue,
                                    void **start, void **stop);

/* A range's device side as one raw record in lp's batch of `slot`: *start and *stop are the
 * batch's (set to NULL) once it took them; `with_host` where the record carries the range's
 * host side (t0 to end, thread `who`, launch site `site`). 0, or -1 with an exception. */
KPROF_INTERNAL int kprof_stamp_record(LaunchPath *lp, PyObject *slot, const KprofRawStamp *st,
                                      void **start, void **stop, PyObject *name,
                                      PyObject *queue, int64_t kind, PyObject *t0,
                                      PyObject *end, int64_t nbytes, int64_t flops,
                                      int with_host, PyObject *who, Py_ssize_t site);

#endif /* KPROF_STAMP_H */
