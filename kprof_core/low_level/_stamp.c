/* A range's timestamps through a plugin's raw stamp, a unit of _crecorder.
 *
 * A backend whose record_timestamp hook carries a KprofRawStamp (layout.py; kprof_opencl's
 * does for the queues its hook records raw) times a range without a Python token per stop: the
 * start is a Python token (the range's frame keeps it, so that a profile's end, a fork or the
 * Python exit path can still use it), the stop is raw, and the range's device side joins the
 * launches' batch as one raw record (_batch.c), read column-wise with them at the harvest. */
#include "_stamp.h"
#include <string.h>

#include "_batch.h"
#include "_range_plan.h"

/* The last capsule looked at and its verdict (held: its address is compared). */
static PyObject *last_capsule;
static const KprofRawStamp *last_api;

const KprofRawStamp *
kprof_stamp_of(PyObject *plan_item)
{
    PyObject *cap = PyTuple_Size(plan_item) > RG_RAW_STAMP ? PyTuple_GetItem(plan_item, RG_RAW_STAMP)
                                                          : Py_None;
    if (cap == NULL || cap == Py_None) {
        PyErr_Clear();
        return NULL;
    }
    if (cap != last_capsule) {
        const KprofRawStamp *api
            = (const KprofRawStamp *)PyCapsule_GetPointer(cap, KPROF_RAW_STAMP_CAPSULE);
        if (api == NULL)
            PyErr_Clear();
        else if (api->signature == NULL || strcmp(api->signature, KPROF_LAYOUT_SIGNATURE) != 0)
            api = NULL;
        Py_INCREF(cap);
        Py_XSETREF(last_capsule, cap);
        last_api = api;
    }
    return last_api;
}

PyObject *
kprof_stamp_start(const KprofRawStamp *st, PyObject *queue)
{
    void *raw = st->stamp(queue);
    if (raw == NULL)
        return NULL;
    PyObject *tok = st->ops->token(raw);
    if (tok == NULL)
        st->ops->release(raw, raw);
    return tok;
}

int
kprof_stamp_stop(const KprofRawStamp *st, PyObject *token, PyObject *queue, void **start,
                 void **stop)
{
    void *s = st->raw(token);
    if (s == NULL)
        return 0;
    void *e = st->stamp(queue);
    if (e == NULL) {
        st->ops->release(s, s); /* the frame's token keeps its own reference */
        return 0;
    }
    *start = s;
    *stop = e;
    return 1;
}

int
kprof_stamp_record(LaunchPath *lp, PyObject *slot, const KprofRawStamp *st, void **start,
                   void **stop, PyObject *name, PyObject *queue, int64_t kind, PyObject *t0,
                   PyObject *end, int64_t nbytes, int64_t flops, int with_host, PyObject *who,
                   Py_ssize_t site)
{
    int64_t h0, h1;
    if (!kprof_as_i64(t0, &h0) || !kprof_as_i64(end, &h1)) {
        PyErr_SetString(PyExc_OverflowError, "kprof.range: a host time is not an int64");
        return -1;
    }
    PyObject *qk = kprof_lp_queue_key(lp, queue);
    if (qk == NULL)
        return -1;
    KprofRawLaunch l = {.start = *start, .stop = *stop, .name = name, .queue = queue,
                        .config = NULL, .kind = kind, .h0 = h0, .h1 = h1, .nbytes = nbytes};
    int taken;
    int r = kprof_batch_add(lp, slot, st->ops, &l, qk, who, site,
                            with_host ? KPROF_WITH_HOST : 0, flops, &taken);
    Py_DECREF(qk);
    if (taken)
        *start = *stop = NULL;
    return r;
}
