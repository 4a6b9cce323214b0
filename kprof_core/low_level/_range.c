/* kprof.range's entry and exit in C: the twin of annotations.range._enter_py/_exit_py and of
 * Recorder.device_range_begin/device_range_end for their common case.
 *
 * `RangeBase` is the base class of kprof.range where the compiled recorder is loaded. Its
 * __enter__/__exit__ handle a range entered once (not re-entered before it exited) in a
 * profile whose recorder runs the compiled launch path and whose LaunchPath carries a range
 * plan (recorder.py `_range_plan`: the profile times on the device and does not synchronize;
 * cleared when the profile closes or the process forks). Everything
 * else (outside that case, re-entry, a frame cut by the profile's end or a fork, a backend
 * that broke, a range without a start token on some backend)
 * calls the Python methods `_enter_py`/`_exit_py`, which do it all: both paths make the same
 * frame (name, t0, begun, who, recorder), register it in `open_ranges`, and append the same
 * entries to the pending list: one per backend timed, the last carrying the host range too
 * (WITH_HOST), or the host range's alone where there is none. A backend whose timestamp hook
 * carries a raw stamp (_stamp.c) gets a raw record in the launches' batch instead of its
 * entry: the same row at the harvest. A backend that reports its work itself (the plan's
 * `by_work`) puts no timestamps: its entry is an ENTRY_WORK_RANGE, timed by that work at the
 * profile's end. A backend mirroring ranges to its vendor tool (NVTX) is told at both ends. */

#include "_crecorder_unit.h"
#include <structmember.h>
#include <stddef.h>
#include <time.h>

#include "_layout.h"
#include "_crecorder.h"
#include "_sites.h"
#include "_stamp.h"
#include "_range_plan.h"
#include "_range.h"

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *top;   /* the innermost entry not yet exited: NULL/None, `outside` or a frame */
    PyObject *more;  /* the outer entries of a range object entered again (a list), or NULL */
    long long flops, nbytes;  /* what the user said the range's work does (-1: not said) */
    /* Set by a compiled __enter__ for the frame in `top` (cleared by every exit): the
     * LaunchPath it was entered on and id(frame), its key in open_ranges. */
    PyObject *lp, *key;
} RangeBase;

/* Set once by range_bind(): annotations.py's `active`, `now`, `_OUTSIDE`, `said` and the
 * Python twins, and the numbers an entry carries. */
static PyObject *rg_active, *rg_now, *rg_outside, *rg_said, *rg_enter_py, *rg_exit_py;
static PyObject *rg_kind_range, *rg_entry_host_range, *rg_flag_approximate, *rg_flag_host_timed;
static PyObject *rg_with_host;  /* WITH_HOST, as an int */
static PyObject *rg_kind_work;  /* ENTRY_WORK_RANGE, as an int */
static int rg_clock;  /* rg_now is time.perf_counter_ns: read its clock directly */
static int64_t rg_kind;  /* rg_kind_range, as an int64 (a raw record's kind) */
static PyObject *str_native, *str_broken, *str_approximate, *str_current_queue,
    *str_record_timestamp, *str_flops, *str_bytes, *str_where;
static PyObject *minus_one, *zero;  /* an entry's "none" and "no flags" */

static PyObject *
rg_time(void)
{
#if defined(CLOCK_MONOTONIC) && !defined(__APPLE__)
    if (rg_clock) {  /* perf_counter_ns's own clock on POSIX, without a Python call */
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
            return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
#endif
    return PyObject_CallNoArgs(rg_now);
}

static int
rg_traverse(RangeBase *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->name);
    Py_VISIT(self->top);
    Py_VISIT(self->more);
    Py_VISIT(self->lp);
    Py_VISIT(self->key);
    return 0;
}

static int
rg_clear(RangeBase *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->top);
    Py_CLEAR(self->more);
    Py_CLEAR(self->lp);
    Py_CLEAR(self->key);
    return 0;
}

static void
rg_dealloc(RangeBase *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    rg_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* A value the user said (flops=, bytes=): -1 for None, else annotations.said's answer (an
 * int from 0; it raises for anything else). 0, or -1 with an exception. */
static int
rg_said_value(PyObject *v, PyObject *what, long long *out)
{
    if (v == NULL || v == Py_None) {
        *out = -1;
        return 0;
    }
    PyObject *n = PyObject_CallFunctionObjArgs(rg_said, v, what, str_where, NULL);
    if (n == NULL)
        return -1;
    *out = PyLong_AsLongLong(n);
    Py_DECREF(n);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* range(name, flops=None, bytes=None): checked as annotations._RangeSlots.__init__ does. */
static int
rg_init(RangeBase *self, PyObject *args, PyObject *kwargs)
{
    PyObject *name, *flops = NULL, *nbytes = NULL;
    static char *kwlist[] = {"name", "flops", "bytes", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:range", kwlist, &name, &flops, &nbytes))
        return -1;
    if (!PyUnicode_Check(name)) {
        PyObject *tn = PyObject_GetAttrString((PyObject *)Py_TYPE(name), "__name__");
        if (tn != NULL)
            PyErr_Format(PyExc_TypeError, "range name must be a str, not %U", tn);
        Py_XDECREF(tn);
        return -1;
    }
    if (PyUnicode_GetLength(name) == 0) {
        PyErr_SetString(PyExc_ValueError, "range name must not be empty");
        return -1;
    }
    if (rg_said_value(flops, str_flops, &self->flops) < 0
        || rg_said_value(nbytes, str_bytes, &self->nbytes) < 0)
        return -1;
    Py_INCREF(name);
    Py_XSETREF(self->name, name);
    Py_CLEAR(self->top);
    Py_CLEAR(self->more);
    Py_CLEAR(self->lp);
    Py_CLEAR(self->key);
    return 0;
}

#define RG_NONE(o) ((o) == NULL || (o) == Py_None)

/* The LaunchPath of `rec` (a new reference) if it carries a range plan, else NULL; no
 * exception either way. */
static LaunchPath *
rg_path(PyObject *rec)
{
    PyObject *lp = PyObject_GetAttr(rec, str_native);
    if (lp == NULL) {
        PyErr_Clear();
        return NULL;
    }
    LaunchPath *path = NULL;
    if (Py_TYPE(lp) == (PyTypeObject *)kprof_LaunchPathType
        && !RG_NONE(((LaunchPath *)lp)->range_plan) && ((LaunchPath *)lp)->open_ranges != NULL)
        path = (LaunchPath *)lp;
    else
        Py_DECREF(lp);
    return path;
}

/* The Python twin, called as a function (no bound method made per call). */
static PyObject *
rg_python(PyObject *fn, RangeBase *self)
{
    return PyObject_CallFunctionObjArgs(fn, (PyObject *)self, NULL);
}

static PyObject *
rg_enter(RangeBase *self, PyObject *unused)
{
    PyObject *rec = PyObject_CallNoArgs(rg_active);
    if (rec == NULL)
        return NULL;
    LaunchPath *lp = NULL;
    if (!RG_NONE(self->top) || (rec != Py_None && (lp = rg_path(rec)) == NULL)) {
        Py_DECREF(rec);  /* re-entered, or not this path's case: the Python method */
        return rg_python(rg_enter_py, self);
    }
    if (rec == Py_None) {
        Py_DECREF(rec);
        Py_INCREF(rg_outside);
        Py_XSETREF(self->top, rg_outside);
        Py_INCREF(self);
        return (PyObject *)self;
    }
    /* As device_range_begin: a timestamp on each backend with a current queue, the host
     * range's start taken before them (it encloses them). */
    PyObject *plan = lp->range_plan;  /* tuple of plan items (RG_ITEM_LEN each) */
    Py_INCREF(plan);  /* (lp, ours: a hook may rebind the recorder's meanwhile) */
    PyObject *t0 = NULL, *begun = NULL, *who = NULL, *frame = NULL, *key = NULL, *result = NULL;
    t0 = rg_time();
    begun = PyList_New(0);
    if (t0 == NULL || begun == NULL)
        goto done;
    Py_ssize_t n = PyTuple_Size(plan);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(plan, i);
        PyObject *b = PyTuple_GetItem(item, 0), *cq = PyTuple_GetItem(item, 1);
        PyObject *rt = PyTuple_GetItem(item, 2);
        PyObject *broken = PyObject_GetAttr(b, str_broken);
        if (broken == NULL)
            goto done;
        int skip = broken != Py_None;
        Py_DECREF(broken);
        if (skip)
            continue;
        /* A backend whose work times the range is asked for no queue (the work's own). */
        int by_work = PyTuple_GetItem(item, RG_BY_WORK) == Py_True;
        PyObject *q = by_work ? Py_NewRef(Py_None) : PyObject_CallFunctionObjArgs(cq, b, NULL);
        if (q == NULL) {
            if (kprof_plan_hook_failed(rec, b, str_current_queue) < 0)
                goto done;
            continue;
        }
        if (q == Py_None && !by_work) {
            Py_DECREF(q);
            continue;
        }
        int pushed = kprof_plan_push(rec, item, self->name);
        if (pushed <= 0) {
            Py_DECREF(q);
            if (pushed < 0)
                goto done;
            continue;
        }
        PyObject *tok = Py_None;
        Py_INCREF(tok);
        const KprofRawStamp *st = rt != Py_None ? kprof_stamp_of(item) : NULL;
        if (st != NULL) {
            PyObject *raw_tok = kprof_stamp_start(st, q);
            if (raw_tok != NULL) {
                Py_DECREF(tok);
                tok = raw_tok;
                rt = Py_None; /* done */
            } else if (PyErr_Occurred()) {
                Py_DECREF(q);
                Py_DECREF(tok);
                if (kprof_plan_hook_failed(rec, b, str_record_timestamp) < 0 || kprof_plan_pop(rec, item) < 0)
                    goto done;
                continue;
            }
        }
        if (rt != Py_None) {
            Py_DECREF(tok);
            tok = PyObject_CallFunctionObjArgs(rt, b, NULL);
            if (tok == NULL) {  /* the vendor tool's range stack kept balanced */
                Py_DECREF(q);
                if (kprof_plan_hook_failed(rec, b, str_record_timestamp) < 0 || kprof_plan_pop(rec, item) < 0)
                    goto done;
                continue;
            }
        }
        PyObject *entry = PyTuple_Pack(3, b, q, tok);
        Py_DECREF(q);
        Py_DECREF(tok);
        if (entry == NULL || PyList_Append(begun, entry) < 0) {
            Py_XDECREF(entry);
            goto done;
        }
        Py_DECREF(entry);
    }
    who = kprof_lp_who(lp);
    if (who == NULL)
        goto done;
    frame = PyTuple_Pack(5, self->name, t0, begun, who, rec);
    if (frame == NULL)
        goto done;
    /* Registered with the recorder: a profile ending while the range is open records it. */
    key = PyLong_FromVoidPtr(frame);  /* id(frame) */
    if (key == NULL || PyDict_SetItem(lp->open_ranges, key, frame) < 0)
        goto done;
    Py_INCREF(frame);
    Py_XSETREF(self->top, frame);
    Py_INCREF(lp);
    Py_XSETREF(self->lp, (PyObject *)lp);
    Py_INCREF(key);
    Py_XSETREF(self->key, key);
    Py_INCREF(self);
    result = (PyObject *)self;
done:
    Py_XDECREF(key);
    Py_XDECREF(frame);
    Py_XDECREF(who);
    Py_XDECREF(begun);
    Py_XDECREF(t0);
    Py_DECREF(plan);
    Py_DECREF(lp);
    Py_DECREF(rec);
    return result;
}

/* The entries below are packed by position (PyTuple_Pack with KPROF_ENTRY_LEN values): this
 * fails to compile if layout.py's entry changes without them following. */
typedef char kprof_range_entry_matches_layout_py[
    (KPROF_ENTRY_LEN == 14 && KPROF_E_CONFIG == 12 && KPROF_E_FLOPS == 13) ? 1 : -1];

/* Appends `entry` to the pending list (untracked: see lp_launch in _crecorder.c), then
 * back-pressure. */
static int
rg_append(LaunchPath *lp, PyObject *entry)
{
    PyObject_GC_UnTrack(entry);
    return PyList_Append(lp->incoming, entry) < 0 ? -1 : kprof_lp_pressure(lp);
}

/* Appends the range's device entry on the backend of `slot` (on queue `q`, None for none; its
 * tokens; its flags as an int): 0, or -1 with an exception. */
static int
rg_entry(LaunchPath *lp, RangeBase *self, PyObject *slot, PyObject *kind, PyObject *q,
         PyObject *who, PyObject *t0, PyObject *end, PyObject *tok, PyObject *stop, PyObject *fl,
         PyObject *site)
{
    PyObject *qk = q == Py_None ? Py_NewRef(Py_None) : kprof_lp_queue_key(lp, q);
    if (qk == NULL)
        return -1;
    PyObject *nbytes = PyLong_FromLongLong(self->nbytes);
    PyObject *flops = nbytes == NULL ? NULL : PyLong_FromLongLong(self->flops);
    PyObject *entry = flops == NULL ? NULL
        : PyTuple_Pack(KPROF_ENTRY_LEN, slot, kind, self->name, qk, who, t0, end, tok, stop,
                       nbytes, fl, site, Py_None, flops);  /* no launch configuration */
    Py_XDECREF(nbytes);
    Py_XDECREF(flops);
    Py_DECREF(qk);
    if (entry == NULL)
        return -1;
    int bad = rg_append(lp, entry);
    Py_DECREF(entry);
    return bad;
}

static PyObject *
rg_exit(RangeBase *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *frame = self->top;
    if (RG_NONE(frame))
        Py_RETURN_NONE;
    if (self->more != NULL && self->more != Py_None
        && (!PyList_Check(self->more) || PyList_Size(self->more) > 0))
        return rg_python(rg_exit_py, self);
    if (frame == rg_outside) {
        Py_CLEAR(self->top);
        Py_RETURN_NONE;
    }
    /* The common case only: a frame this path entered, on a LaunchPath still its recorder's
     * (rebinding clears the old one's plan), not forked since (then the child's part is host
     * time only), every backend still well and with a token, and still open (its profile did
     * not end and cut it first). Anything else is _exit_py's, with nothing changed yet. */
    LaunchPath *lp = (LaunchPath *)self->lp;
    PyObject *begun = NULL;
    int fast = lp != NULL && self->key != NULL && !RG_NONE(lp->range_plan)
               && PyTuple_Check(frame) && PyTuple_Size(frame) == 5
               && PyLong_AsVoidPtr(self->key) == (void *)frame
               && PyDict_Check(lp->forked_ranges) && PyDict_Size(lp->forked_ranges) == 0;
    if (fast) {
        begun = PyTuple_GetItem(frame, 2);
        fast = PyList_Check(begun);
    }
    Py_ssize_t nb = fast ? PyList_Size(begun) : 0;
    for (Py_ssize_t i = 0; fast && i < nb; i++) {
        PyObject *item = PyList_GetItem(begun, i);
        PyObject *broken = PyObject_GetAttr(PyTuple_GetItem(item, 0), str_broken);
        PyObject *plan_item = kprof_plan_item(lp->range_plan, PyTuple_GetItem(item, 0));
        /* A token where the plan still stamps the backend; none where it is timed by work. */
        fast = broken == Py_None && plan_item != NULL
               && (PyTuple_GetItem(item, 2) != Py_None
                       ? PyTuple_GetItem(plan_item, RG_RT) != Py_None
                       : PyTuple_GetItem(plan_item, RG_BY_WORK) == Py_True);
        Py_XDECREF(broken);
        PyErr_Clear();
    }
    if (fast && PyDict_DelItem(lp->open_ranges, self->key) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError))
            return NULL;
        PyErr_Clear();
        fast = 0;  /* cut by its profile's end: _exit_py says so */
    }
    if (!fast) {  /* the frame in `top` exits by the Python path */
        Py_CLEAR(self->lp);
        Py_CLEAR(self->key);
        return rg_python(rg_exit_py, self);
    }
    PyObject *result = NULL, *stops = NULL, *site = NULL, *end = NULL, *rec = NULL;
    /* Ours: a hook called below may rebind the recorder's plan; its items are read here. */
    PyObject *plan = lp->range_plan;
    Py_INCREF(plan);
    /* Where a plugin's raw stamp times the range (the first RG_RAW backends): its start and
     * stop as raw tokens (new references) until they join a batch, stops[i] Py_Ellipsis. */
    enum { RG_RAW = 8 };
    void *raw_start[RG_RAW] = {NULL}, *raw_stop[RG_RAW] = {NULL};
    const KprofRawStamp *raw_of[RG_RAW] = {NULL};
    Py_ssize_t sid = -1;
    Py_INCREF(frame);  /* ours now: out of the range object and of open_ranges */
    Py_INCREF(begun);
    Py_CLEAR(self->top);
    self->lp = NULL;  /* its reference is ours now */
    Py_CLEAR(self->key);
    rec = PyTuple_GetItem(frame, 4);
    PyObject *who = PyTuple_GetItem(frame, 3);  /* the thread that entered it, as in Python */
    PyObject *t0 = PyTuple_GetItem(frame, 1);
    /* As device_range_end: the stop timestamps, then the host end after the last of them. */
    if (lp->sites == NULL) {
        site = minus_one;
        Py_INCREF(site);
    } else {
        sid = kprof_site_capture((SiteCatcher *)lp->sites);
        site = sid == -2 ? NULL : PyLong_FromSsize_t(sid);
        if (site == NULL)
            goto done;
    }
    stops = PyList_New(nb);
    if (stops == NULL)
        goto done;
    Py_ssize_t last = -1;  /* the last device entry made: it carries the host side */
    for (Py_ssize_t i = 0; i < nb; i++) {
        PyObject *item = PyList_GetItem(begun, i);
        PyObject *b = PyTuple_GetItem(item, 0);
        PyObject *plan_item = kprof_plan_item(plan, b);
        PyObject *rt = PyTuple_GetItem(plan_item, RG_RT);
        if (PyTuple_GetItem(item, 2) == Py_None) {  /* by work: no stop timestamp */
            Py_INCREF(Py_NotImplemented);
            PyList_SetItem(stops, i, Py_NotImplemented);
            last = i;
            continue;
        }
        const KprofRawStamp *st = i < RG_RAW && kprof_batch_open(lp) ? kprof_stamp_of(plan_item)
                                                                       : NULL;
        PyObject *stop = NULL;
        if (st != NULL && kprof_stamp_stop(st, PyTuple_GetItem(item, 2), PyTuple_GetItem(item, 1),
                                           &raw_start[i], &raw_stop[i])) {
            raw_of[i] = st;
            stop = Py_Ellipsis;
            Py_INCREF(stop);
        }
        if (stop == NULL && !PyErr_Occurred())  /* (an exception: the plugin's stamp failed) */
            stop = PyObject_CallFunctionObjArgs(rt, b, NULL);
        if (stop == NULL) {
            if (kprof_plan_hook_failed(rec, b, str_record_timestamp) < 0)
                goto done;
            PyObject *r = PyObject_CallMethod(rec, "_release", "OOO", b,
                                              PyTuple_GetItem(item, 2), Py_None);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
            if (kprof_plan_pop(rec, plan_item) < 0)
                goto done;
            continue;  /* left out below (its slot stays NULL) */
        }
        PyList_SetItem(stops, i, stop);
        last = i;
    }
    end = rg_time();
    if (end == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nb; i++) {
        PyObject *stop = PyList_GetItem(stops, i);  /* borrowed; NULL: its hook raised */
        if (stop == NULL)
            continue;
        PyObject *item = PyList_GetItem(begun, i);
        PyObject *b = PyTuple_GetItem(item, 0), *q = PyTuple_GetItem(item, 1);
        PyObject *tok = PyTuple_GetItem(item, 2);
        PyObject *plan_item = kprof_plan_item(plan, b);
        if (kprof_plan_pop(rec, plan_item) < 0)
            goto done;
        if (stop == Py_NotImplemented) {  /* timed by its work at the end (work_ranges.py) */
            if (rg_entry(lp, self, PyTuple_GetItem(plan_item, RG_SLOT), rg_kind_work, Py_None,
                         who, t0, end, Py_None, Py_None, i == last ? rg_with_host : zero, site)
                < 0)
                goto done;
            continue;
        }
        if (i < RG_RAW && raw_of[i] != NULL) {  /* one raw record in the launches' batch */
            if (kprof_stamp_record(lp, PyTuple_GetItem(plan_item, RG_SLOT), raw_of[i],
                                   &raw_start[i], &raw_stop[i], self->name, q, rg_kind, t0,
                                   end, self->nbytes, self->flops, i == last, who, sid)
                < 0)
                goto done;
            continue;
        }
        long flags = 0;
        if (stop == Py_None) {
            /* No stop timestamp after all: the start one is given back and the range is
             * timed on the host, its queue synchronized (device_range_end). */
            PyObject *r = PyObject_CallMethod(rec, "_release", "OOO", b, tok, Py_None);
            Py_XDECREF(r);
            r = r == NULL ? NULL : PyObject_CallMethod(rec, "_sync", "OO", b, q);
            Py_XDECREF(r);
            PyObject *t = r == NULL ? NULL : rg_time();
            if (t == NULL)
                goto done;
            PyList_SetItem(stops, i, t);  /* kept alive by the list */
            stop = t;
            tok = Py_None;
            flags = PyLong_AsLong(rg_flag_host_timed);
        } else if (PyObject_HasAttr(stop, str_approximate)) {
            /* Tokens that are host observations say so (see launch_observed). HasAttr first:
             * where the attribute is missing (every device token) it makes no exception
             * object, where GetAttr would make and drop one per range. */
            PyObject *approx = PyObject_GetAttr(stop, str_approximate);
            if (approx == NULL)
                goto done;
            if (approx == Py_True)
                flags = PyLong_AsLong(rg_flag_approximate);
            Py_DECREF(approx);
        }
        if (i == last)
            flags |= KPROF_WITH_HOST;  /* the host range travels in the last device entry */
        PyObject *fl = flags == 0 ? zero : flags == KPROF_WITH_HOST ? rg_with_host : NULL;
        if (fl != NULL)
            Py_INCREF(fl);
        else if ((fl = PyLong_FromLong(flags)) == NULL)
            goto done;
        int bad = rg_entry(lp, self, PyTuple_GetItem(plan_item, RG_SLOT), rg_kind_range, q, who,
                           t0, end, tok, stop, fl, site);
        Py_DECREF(fl);
        if (bad)
            goto done;
    }
    if (last < 0) {  /* no device entry: the host range alone (host_range) */
        PyObject *host = PyTuple_Pack(KPROF_ENTRY_LEN, Py_None, rg_entry_host_range, self->name,
                                      Py_None, who, t0, end, Py_None, Py_None, minus_one, zero,
                                      site, Py_None, minus_one);
        if (host == NULL)
            goto done;
        int bad = rg_append(lp, host);
        Py_DECREF(host);
        if (bad)
            goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < RG_RAW; i++)  /* raw timestamps no batch took */
        if (raw_of[i] != NULL && raw_start[i] != NULL)
            raw_of[i]->ops->release(raw_start[i], raw_stop[i]);
    Py_XDECREF(end);
    Py_XDECREF(stops);
    Py_XDECREF(site);
    Py_DECREF(plan);
    Py_DECREF(begun);
    Py_DECREF(frame);
    Py_DECREF(lp);
    return result;
}

static PyMethodDef rg_methods[] = {
    {"__enter__", (PyCFunction)rg_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))rg_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef rg_members[] = {
    {"name", T_OBJECT, offsetof(RangeBase, name), 0, NULL},
    {"_top", T_OBJECT, offsetof(RangeBase, top), 0, NULL},
    {"_more", T_OBJECT, offsetof(RangeBase, more), 0, NULL},
    {"flops", T_LONGLONG, offsetof(RangeBase, flops), 0, NULL},
    {"nbytes", T_LONGLONG, offsetof(RangeBase, nbytes), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot rg_slots[] = {
    {Py_tp_dealloc, rg_dealloc},
    {Py_tp_traverse, rg_traverse},
    {Py_tp_clear, rg_clear},
    {Py_tp_init, rg_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_methods, rg_methods},
    {Py_tp_members, rg_members},
    {Py_tp_doc, "kprof.range's compiled entry and exit (see kprof_core/recording/annotations.py)."},
    {0, NULL},
};

static PyType_Spec rg_spec = {
    "kprof_core.low_level._crecorder.RangeBase", sizeof(RangeBase), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, rg_slots,
};

static PyObject *RangeBaseType;

/* range_bind(active, now, outside, kind_range, entry_host_range, flag_approximate,
 *            flag_host_timed, said, enter_py, exit_py) */
static PyObject *
range_bind(PyObject *module, PyObject *args)
{
    PyObject *o[10];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO:range_bind", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9]))
        return NULL;
    PyObject **fields[10] = {&rg_active, &rg_now, &rg_outside, &rg_kind_range,
                             &rg_entry_host_range, &rg_flag_approximate, &rg_flag_host_timed,
                             &rg_said, &rg_enter_py, &rg_exit_py};
    for (int i = 0; i < 10; i++) {
        Py_INCREF(o[i]);
        Py_XSETREF(*fields[i], o[i]);
    }
    if (!kprof_as_i64(rg_kind_range, &rg_kind)) {
        PyErr_SetString(PyExc_TypeError, "range_bind: kind_range is not an int");
        return NULL;
    }
    PyObject *time_mod = PyImport_ImportModule("time");
    PyObject *pc = time_mod == NULL ? NULL : PyObject_GetAttrString(time_mod, "perf_counter_ns");
    Py_XDECREF(time_mod);
    if (pc == NULL)
        return NULL;
    rg_clock = pc == rg_now;
    Py_DECREF(pc);
    Py_RETURN_NONE;
}

static PyMethodDef range_functions[] = {
    {"range_bind", range_bind, METH_VARARGS,
     "range_bind(active, now, outside, kind_range, entry_host_range, flag_approximate, "
     "flag_host_timed, said, enter_py, exit_py): what "
     "RangeBase's compiled path needs of kprof_core.recording.annotations."},
    {NULL, NULL, 0, NULL},
};

int
kprof_range_init(PyObject *m)
{
    str_native = PyUnicode_InternFromString("_native");
    str_broken = PyUnicode_InternFromString("broken");
    str_approximate = PyUnicode_InternFromString("approximate");
    str_current_queue = PyUnicode_InternFromString("current_queue");
    str_record_timestamp = PyUnicode_InternFromString("record_timestamp");
    str_flops = PyUnicode_InternFromString("flops");
    str_bytes = PyUnicode_InternFromString("bytes");
    str_where = PyUnicode_InternFromString("kprof.range");
    rg_with_host = PyLong_FromLong(KPROF_WITH_HOST);
    rg_kind_work = PyLong_FromLong(KPROF_ENTRY_WORK_RANGE);
    minus_one = PyLong_FromLong(-1);
    zero = PyLong_FromLong(0);
    if (!str_native || !str_broken || !str_approximate || !str_current_queue
        || !str_record_timestamp || !str_flops || !str_bytes || !str_where || !rg_with_host
        || !minus_one || !zero || !rg_kind_work || kprof_range_plan_init() < 0)
        return -1;
    RangeBaseType = PyType_FromSpec(&rg_spec);
    if (RangeBaseType == NULL)
        return -1;
    Py_INCREF(RangeBaseType);
    if (PyModule_AddObject(m, "RangeBase", RangeBaseType) < 0) {
        Py_DECREF(RangeBaseType);
        return -1;
    }
    return PyModule_AddFunctions(m, range_functions);
}
