/* The launch path's object, LaunchPath (_crecorder.c owns it). kprof.range's compiled path
 * (_range.c) reads it too: a range's entries go to the same pending list, through the same
 * queue cache, and its plan and the recorder's range dicts are carried here. */
#ifndef KPROF_CRECORDER_H
#define KPROF_CRECORDER_H

#include "_crecorder_unit.h"
#include "_batch.h"

typedef struct KprofLaunchPath {
    PyObject_HEAD
    PyObject *incoming;     /* list: the recorder's pending entries */
    PyObject *live;         /* dict: id(queue) -> queue, kept alive while pending */
    PyObject *timed;        /* frozenset: slots of the backends this profile times */
    PyObject *slow;         /* Recorder._launch_py, bound: every other case */
    PyObject *pressure;     /* Recorder._pressure, bound */
    PyObject *tls;          /* kprof_core.recording.threads._tls */
    PyObject *running_loop; /* asyncio._get_running_loop */
    PyObject *who;          /* kprof_core.recording.threads.who */
    PyObject *sites;        /* a SiteCatcher, or NULL: sites off (every entry's site -1) */
    Py_ssize_t next_harvest;
    /* Caches of the last launch's backend and queue (most launches repeat them): */
    PyObject *last_backend, *last_slot;  /* the backend and its slot, if timed */
    PyObject *last_queue, *last_qk;      /* the queue and id(queue), kept in `live` */
    /* kprof.range's compiled path (_range.c): (backend, current_queue, record_timestamp or
     * None) per backend, or None where every range takes the Python path (recorder.py). */
    PyObject *range_plan;
    /* The recorder's open_ranges and forked_ranges dicts (recorder.py binds them): the range's
     * frame goes in and out of the first, and the second says whether the process forked. */
    PyObject *open_ranges, *forked_ranges;
    /* Raw launches (_batch.c): the pending entry of the batch they go to now, while it is the
     * last entry (owned; NULL: none), and the count of records its batches hold beyond one
     * each, which the pending count adds (shared with the batches: they may outlive it). */
    PyObject *batch_entry;
    KprofPendingCount *count;
} LaunchPath;

KPROF_INTERNAL extern PyObject *kprof_LaunchPathType;

/* The calling thread's key (and task), as kprof_core.recording.threads.who() returns it. */
KPROF_INTERNAL PyObject *kprof_lp_who(LaunchPath *self);

/* What every common launch needs (see _crecorder.c): 1 with new references, 0 where the profile
 * does not time `backend`, -1 with an exception. */
KPROF_INTERNAL int kprof_lp_common(LaunchPath *self, PyObject *backend, PyObject *queue,
                                   PyObject **slot, PyObject **qk, PyObject **who,
                                   Py_ssize_t *site);

/* id(queue) (a new reference), the queue kept in the live queues while entries name it; NULL
 * with an exception. */
KPROF_INTERNAL PyObject *kprof_lp_queue_key(LaunchPath *self, PyObject *queue);

/* Harvests once enough is pending; -1 with an exception. */
KPROF_INTERNAL int kprof_lp_pressure(LaunchPath *self);

/* The LaunchPath behind `rec.launch` (borrowed), or NULL where `rec` launches through Python
 * (an exception set only on an error). */
KPROF_INTERNAL LaunchPath *kprof_lp_of(PyObject *rec);

#endif /* KPROF_CRECORDER_H */
