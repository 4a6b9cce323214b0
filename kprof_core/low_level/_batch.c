/* Raw launches kept in C batches, a unit of _crecorder.
 *
 * A plugin's C hands each launch over as a KprofRawLaunch (layout.py's RAW_LAUNCH_FIELDS)
 * through the capsule KPROF_RAW_CAPSULE: no Python object is made per launch (its tokens stay
 * raw, its objects are referenced). The recorder keeps a run of them in one LaunchBatch, which
 * is one pending entry (ENTRY_LAUNCH_BATCH) while no other entry follows it; the harvest
 * (recording/harvest_batch.py) makes rows of a batch's complete records column-wise, reading
 * their times through the plugin's KprofRawOps, and gives their tokens back in the same pass.
 * A record it cannot take goes to the one-by-one route as the ordinary entry LaunchPath.launch
 * makes, with Python tokens (pop_entry), before the batch; where nothing more may be asked of
 * the device, the whole rest does (explode), in the batch's place.
 *
 * Which launches come here is LaunchPath.launch's rule (kprof_lp_common): a timed backend of
 * a profile still open; every other case is the caller's to send through rec.launch.
 */
#include "_crecorder_unit.h"
#include "_layout.h"
#include "_crecorder.h"
#include "_batch.h"
#include "_columns.h"

/* One raw record as a batch keeps it: the objects owned (config None where there is none).
 * A launch's flags are 0 and its flops -1; a range's (kprof.range, _range.c) say whether it
 * carries its host side (KPROF_WITH_HOST) and the work it said it does. */
typedef struct {
    void *start, *stop;
    PyObject *name, *qk, *who, *config;
    int64_t kind, h0, h1, nbytes, site, flags, flops;
} Raw;

typedef struct {
    PyObject_HEAD
    const KprofRawOps *ops;
    PyObject *slot;
    KprofPendingCount *count;
    Raw *recs;
    Py_ssize_t head, n, cap; /* the records still held are recs[head:n] */
    int closed;              /* takes no more records */
    int counted;             /* its entry is in the pending list, counted there as one */
} LaunchBatch;

/* Why `columns` stopped before its limit (beside KPROF_RAW_NOT_DONE and KPROF_RAW_FAILED): the
 * next record's queue, device, thread, name or configuration is not known yet. */
#define BATCH_UNKNOWN 3

static PyObject *BatchType;
static PyObject *entry_kind;

KprofPendingCount *
kprof_count_new(void)
{
    KprofPendingCount *c = (KprofPendingCount *)PyMem_Malloc(sizeof *c);
    if (c != NULL) {
        c->extra = 0;
        c->refs = 1;
    }
    return c;
}

void
kprof_count_drop(KprofPendingCount *c)
{
    if (c != NULL && --c->refs == 0)
        PyMem_Free(c);
}

/* The first k records leave the batch: their tokens given back (`release`), or handed on. */
static void
leave(LaunchBatch *b, Py_ssize_t k, int release)
{
    for (Py_ssize_t i = b->head; i < b->head + k; i++) {
        Raw *r = &b->recs[i];
        if (release)
            b->ops->release(r->start, r->stop);
        Py_DECREF(r->name);
        Py_DECREF(r->qk);
        Py_DECREF(r->who);
        Py_DECREF(r->config);
    }
    b->head += k;
    b->count->extra -= k;
    if (b->head == b->n && !b->closed)
        b->head = b->n = 0; /* empty: the next records start at the front */
}

/* No more records; its entry leaves the pending list (it counted one there). */
static void
uncount(LaunchBatch *b)
{
    b->closed = 1;
    if (b->counted) {
        b->counted = 0;
        b->count->extra += 1;
    }
}

static void
batch_dealloc(LaunchBatch *b)
{
    PyTypeObject *tp = Py_TYPE(b);
    if (b->count != NULL) {
        b->closed = 1;
        leave(b, b->n - b->head, 1);
        uncount(b);
        kprof_count_drop(b->count);
    }
    PyMem_Free(b->recs);
    Py_XDECREF(b->slot);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(b);
    Py_DECREF(tp);
}

static Py_ssize_t
batch_len(LaunchBatch *b)
{
    return b->n - b->head;
}

/* A new batch of `slot` appended to the pending list as its entry; borrowed (the entry holds
 * it), NULL with an exception. */
static LaunchBatch *
new_batch(LaunchPath *lp, PyObject *slot, const KprofRawOps *ops)
{
    LaunchBatch *b = (LaunchBatch *)PyType_GenericAlloc((PyTypeObject *)BatchType, 0);
    if (b == NULL)
        return NULL;
    b->ops = ops;
    Py_INCREF(slot);
    b->slot = slot;
    b->count = lp->count;
    b->count->refs++;
    /* An activity-shaped entry (layout.py's ACTIVITY_FIELDS): its record is the batch. */
    PyObject *entry = PyTuple_Pack(KPROF_ACTIVITY_LEN, slot, entry_kind, (PyObject *)b,
                                   Py_None, Py_None);
    Py_DECREF(b);
    if (entry == NULL)
        return NULL;
    PyObject_GC_UnTrack(entry); /* ints, None and a batch: in no cycle */
    if (PyList_Append(lp->incoming, entry) < 0) {
        Py_DECREF(entry);
        return NULL;
    }
    b->counted = 1;
    b->count->extra -= 1;
    Py_XSETREF(lp->batch_entry, entry);
    return b;
}

/* The batch raw launches of `slot` through `ops` go to now: the last pending entry's, where it
 * is one of this path's batches still open; else a new one. */
static LaunchBatch *
current_batch(LaunchPath *lp, PyObject *slot, const KprofRawOps *ops)
{
    Py_ssize_t len = PyList_Size(lp->incoming);
    if (lp->batch_entry != NULL && len > 0
        && PyList_GetItem(lp->incoming, len - 1) == lp->batch_entry) {
        LaunchBatch *b = (LaunchBatch *)PyTuple_GetItem(lp->batch_entry, KPROF_A_RECORD);
        if (!b->closed && b->ops == ops && b->slot == slot)
            return b;
    }
    return new_batch(lp, slot, ops);
}

int
kprof_batch_open(LaunchPath *lp)
{
    /* Closed (next_harvest 0): LaunchPath.launch drops a launch as late, by the Python path. */
    return lp->next_harvest > 0 && lp->count != NULL;
}

int
kprof_batch_add(LaunchPath *lp, PyObject *slot, const KprofRawOps *ops, const KprofRawLaunch *l,
                PyObject *qk, PyObject *who, Py_ssize_t site, int64_t flags, int64_t flops,
                int *taken)
{
    *taken = 0;
    LaunchBatch *b = current_batch(lp, slot, ops);
    if (b == NULL)
        return -1;
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 64;
        Raw *recs = (Raw *)PyMem_Realloc(b->recs, sizeof(Raw) * (size_t)cap);
        if (recs == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->recs = recs;
        b->cap = cap;
    }
    Raw *r = &b->recs[b->n++];
    r->start = l->start;
    r->stop = l->stop;
    Py_INCREF(l->name);
    r->name = l->name;
    Py_INCREF(qk);
    r->qk = qk;
    Py_INCREF(who);
    r->who = who;
    r->config = l->config != NULL ? l->config : Py_None;
    Py_INCREF(r->config);
    r->kind = l->kind;
    r->h0 = l->h0;
    r->h1 = l->h1;
    r->nbytes = l->nbytes;
    r->site = site;
    r->flags = flags;
    r->flops = flops;
    b->count->extra += 1;
    *taken = 1;
    return kprof_lp_pressure(lp);
}

/* KprofRawApi.append: see layout.py (RAW_LAUNCH_FIELDS). 1 taken (an exception may be set where
 * the harvest it started failed: the launch is recorded all the same), 0 not the common case,
 * -1 with an exception and nothing taken. */
static int
raw_append(PyObject *rec, PyObject *backend, const KprofRawOps *ops, const KprofRawLaunch *l)
{
    LaunchPath *lp = kprof_lp_of(rec);
    if (lp == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!kprof_batch_open(lp) || l->start == NULL || l->stop == NULL)
        return 0;
    PyObject *slot, *qk, *who;
    Py_ssize_t site;
    int common = kprof_lp_common(lp, backend, l->queue, &slot, &qk, &who, &site);
    if (common <= 0)
        return common;
    int taken;
    kprof_batch_add(lp, slot, ops, l, qk, who, site, 0, -1, &taken);
    Py_DECREF(slot);
    Py_DECREF(who);
    Py_DECREF(qk);
    return taken ? 1 : -1;
}

/* columns(fast_queues, thread_ids, name_ids, config_ids, known, backend, limit)
 * -> (k, why, names, kinds, queues, threads, h0s, h1s, nbytes, flags, sites, configs, flops,
 *     refb, host, begins, ends)
 *
 * The columns of the longest run of the first `limit` records (at most) whose queue, thread,
 * name and configuration are known (the arguments are harvest_columns.run_columns's) and whose
 * work is done, read through the plugin's ops: the columns run_columns makes, as native int64
 * bytes, and the device's begins and ends. `why` says what ended the run before `limit`: 0
 * nothing (the batch's end), KPROF_RAW_NOT_DONE, KPROF_RAW_FAILED, or 3 (not known yet). The
 * records stay until consume(k). */
static PyObject *
batch_columns(LaunchBatch *b, PyObject *args)
{
    PyObject *fast_queues, *thread_ids, *name_ids, *config_ids, *known, *backend;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!On:columns", &PyDict_Type, &fast_queues,
                          &PyDict_Type, &thread_ids, &PyDict_Type, &name_ids, &PyDict_Type,
                          &config_ids, &PyDict_Type, &known, &backend, &limit))
        return NULL;
    Py_ssize_t n = b->n - b->head;
    if (limit < n)
        n = limit < 0 ? 0 : limit;
    enum { NAME, KIND, QUEUE, THREAD, H0, H1, NBYTES, FLAGS, SITE, CONFIG, FLOPS, REFB, HOST,
           BEGIN, END, NCOLS };
    int64_t *cols = (int64_t *)PyMem_Malloc(sizeof(int64_t) * NCOLS * (size_t)(n ? n : 1));
    if (cols == NULL)
        return PyErr_NoMemory();
    /* Most runs repeat one queue, thread, name and configuration: the previous record's are
     * not looked up again (the same objects; the dicts do not change during the call). */
    PyObject *last_qk = NULL, *last_who = NULL, *last_name = NULL, *last_config = NULL;
    int64_t qid = 0, refb = 0, tid = 0, nid = 0, cid = 0;
    int why = 0;
    Py_ssize_t k = 0;
    for (; k < n; k++) {
        Raw *r = &b->recs[b->head + k];
        if (r->qk != last_qk) {
            PyObject *q = PyDict_GetItemWithError(fast_queues, r->qk);
            if (!kprof_fast_queue(q, backend, known, &qid, &refb))
                goto unknown;
            last_qk = r->qk;
        }
        if (r->who != last_who) {
            PyObject *v = PyDict_GetItemWithError(thread_ids, r->who);
            if (v == NULL || !kprof_as_i64(v, &tid))
                goto unknown;
            last_who = r->who;
        }
        if (r->name != last_name) {
            PyObject *v = PyDict_GetItemWithError(name_ids, r->name);
            if (v == NULL || !kprof_as_i64(v, &nid))
                goto unknown;
            last_name = r->name;
        }
        if (r->config != last_config) {
            PyObject *v = PyDict_GetItemWithError(config_ids, r->config);
            if (v == NULL || !kprof_as_i64(v, &cid))
                goto unknown;
            last_config = r->config;
        }
        int64_t *row = cols;
        row[THREAD * n + k] = tid;
        row[NAME * n + k] = nid;
        row[CONFIG * n + k] = cid;
        int st = b->ops->read(r->start, r->stop, &row[BEGIN * n + k], &row[END * n + k]);
        if (st != KPROF_RAW_DONE) {
            why = st == KPROF_RAW_NOT_DONE ? KPROF_RAW_NOT_DONE : KPROF_RAW_FAILED;
            break;
        }
        row[KIND * n + k] = r->kind;
        row[QUEUE * n + k] = qid;
        row[H0 * n + k] = r->h0;
        row[H1 * n + k] = r->h1;
        row[NBYTES * n + k] = r->nbytes;
        /* A range's host side travels as in run_columns: its flags 0, HOST 1. */
        row[FLAGS * n + k] = 0;
        row[SITE * n + k] = r->site;
        row[FLOPS * n + k] = r->flops;
        row[REFB * n + k] = refb;
        row[HOST * n + k] = r->flags == KPROF_WITH_HOST;
        continue;
    unknown:
        PyErr_Clear(); /* an unhashable configuration too: the one-by-one route keeps it */
        why = BATCH_UNKNOWN;
        break;
    }
    PyObject *result = PyTuple_New(2 + NCOLS);
    if (result == NULL)
        goto done;
    PyTuple_SetItem(result, 0, PyLong_FromSsize_t(k));
    PyTuple_SetItem(result, 1, PyLong_FromLong(why));
    for (int c = 0; c < NCOLS; c++) {
        PyObject *col = PyBytes_FromStringAndSize((const char *)(cols + (size_t)c * n), k * 8);
        if (col == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SetItem(result, 2 + c, col);
    }
done:
    PyMem_Free(cols);
    return result;
}

/* consume(k): the first k records made rows: their tokens given back. */
static PyObject *
batch_consume(LaunchBatch *b, PyObject *arg)
{
    Py_ssize_t k = PyLong_AsSsize_t(arg);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    if (k < 0 || k > b->n - b->head) {
        PyErr_SetString(PyExc_ValueError, "consume: more records than the batch holds");
        return NULL;
    }
    leave(b, k, 1);
    Py_RETURN_NONE;
}

/* close() -> how many records it holds: it takes no more (the harvest, before it lets an empty
 * batch's entry go, so that no record comes in after it looked). */
static PyObject *
batch_close(LaunchBatch *b, PyObject *unused)
{
    b->closed = 1;
    return PyLong_FromSsize_t(b->n - b->head);
}

/* retire(): closed, and its entry left the pending list. */
static PyObject *
batch_retire(LaunchBatch *b, PyObject *unused)
{
    uncount(b);
    Py_RETURN_NONE;
}

/* The first record as the entry LaunchPath.launch makes (layout.py's ENTRY_FIELDS), its
 * tokens Python ones the plugin made (ops->token); it leaves the batch. NULL with an
 * exception: the record is given back then. */
static PyObject *
first_entry(LaunchBatch *b)
{
    Raw *r = &b->recs[b->head];
    void *s0 = r->start, *s1 = r->stop;
    PyObject *start = b->ops->token(s0), *stop = NULL, *kind = NULL, *h0 = NULL, *h1 = NULL,
             *nbytes = NULL, *site = NULL, *flags = NULL, *flops = NULL, *entry = NULL;
    if (start == NULL) {
        leave(b, 1, 1);
        return NULL;
    }
    if (s1 == s0) {
        stop = start;
        Py_INCREF(stop);
    } else if ((stop = b->ops->token(s1)) == NULL) {
        Py_DECREF(start); /* gives s0 back */
        b->ops->release(NULL, s1);
        leave(b, 1, 0);
        return NULL;
    }
    kind = PyLong_FromLongLong(r->kind);
    h0 = PyLong_FromLongLong(r->h0);
    h1 = PyLong_FromLongLong(r->h1);
    nbytes = PyLong_FromLongLong(r->nbytes);
    site = PyLong_FromLongLong(r->site);
    flags = PyLong_FromLongLong(r->flags);
    flops = PyLong_FromLongLong(r->flops);
    if (kind && h0 && h1 && nbytes && site && flags && flops)
        entry = PyTuple_Pack(KPROF_ENTRY_LEN, b->slot, kind, r->name, r->qk, r->who, h0, h1,
                             start, stop, nbytes, flags, site, r->config, flops);
    Py_XDECREF(flags);
    Py_XDECREF(flops);
    Py_XDECREF(kind);
    Py_XDECREF(h0);
    Py_XDECREF(h1);
    Py_XDECREF(nbytes);
    Py_XDECREF(site);
    Py_DECREF(start);
    Py_DECREF(stop);
    leave(b, 1, 0); /* its references are the tokens' and the entry's now */
    if (entry != NULL)
        PyObject_GC_UnTrack(entry); /* as LaunchPath.launch's: in no cycle */
    return entry;
}

/* pop_entry() -> entry: the first record as an ordinary entry, the rest staying (the harvest
 * waits for its work entry by entry, then takes the rest column-wise again). */
static PyObject *
batch_pop_entry(LaunchBatch *b, PyObject *unused)
{
    if (b->n == b->head) {
        PyErr_SetString(PyExc_IndexError, "pop_entry: the batch is empty");
        return NULL;
    }
    return first_entry(b);
}

/* explode() -> [entry, ...]: closed and retired, its records as ordinary entries. */
static PyObject *
batch_explode(LaunchBatch *b, PyObject *unused)
{
    uncount(b);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    while (b->n > b->head) {
        PyObject *entry = first_entry(b);
        if (entry == NULL)
            goto fail;
        int err = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (err < 0)
            goto fail;
    }
    return out;
fail:
    /* What was not made an entry yet is given back: the harvest drops the batch as unreadable. */
    leave(b, b->n - b->head, 1);
    Py_DECREF(out);
    return NULL;
}

/* drop() -> how many records: closed and retired, every token given back (the profile ended
 * before they were harvested, or they could not be read). */
static PyObject *
batch_drop(LaunchBatch *b, PyObject *unused)
{
    uncount(b);
    Py_ssize_t n = b->n - b->head;
    leave(b, n, 1);
    return PyLong_FromSsize_t(n);
}

static PyMethodDef batch_methods[] = {
    {"columns", (PyCFunction)batch_columns, METH_VARARGS,
     "columns(fast_queues, thread_ids, name_ids, config_ids, known, backend, limit) -> (k, why, "
     "13 columns, begins, ends): see _batch.c"},
    {"consume", (PyCFunction)batch_consume, METH_O, "Give back the first k records' tokens."},
    {"close", (PyCFunction)batch_close, METH_NOARGS, "Take no more records; how many it holds."},
    {"retire", (PyCFunction)batch_retire, METH_NOARGS, "Its entry left the pending list."},
    {"pop_entry", (PyCFunction)batch_pop_entry, METH_NOARGS,
     "The first record as an ordinary pending entry with Python tokens."},
    {"explode", (PyCFunction)batch_explode, METH_NOARGS,
     "Its records as ordinary pending entries with Python tokens (closed and retired)."},
    {"drop", (PyCFunction)batch_drop, METH_NOARGS,
     "Give every token back (closed and retired); how many records there were."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot batch_slots[] = {
    {Py_tp_dealloc, batch_dealloc},
    {Py_tp_methods, batch_methods},
    {Py_sq_length, batch_len},
    {Py_tp_doc, "Raw launches of one backend, kept in C until the harvest (_batch.c)."},
    {0, NULL},
};

static PyType_Spec batch_spec = {
    "kprof_core.low_level._crecorder.LaunchBatch", sizeof(LaunchBatch), 0, Py_TPFLAGS_DEFAULT,
    batch_slots,
};

static const KprofRawApi raw_api = {KPROF_LAYOUT_SIGNATURE, raw_append};

int
kprof_batch_init(PyObject *m)
{
    entry_kind = PyLong_FromLong(KPROF_ENTRY_LAUNCH_BATCH);
    if (entry_kind == NULL)
        return -1;
    BatchType = PyType_FromSpec(&batch_spec);
    if (BatchType == NULL)
        return -1;
    Py_INCREF(BatchType);
    if (PyModule_AddObject(m, "LaunchBatch", BatchType) < 0) {
        Py_DECREF(BatchType);
        return -1;
    }
    PyObject *cap = PyCapsule_New((void *)&raw_api, KPROF_RAW_CAPSULE, NULL);
    if (cap == NULL || PyModule_AddObject(m, "_raw_launch", cap) < 0) {
        Py_XDECREF(cap);
        return -1;
    }
    return 0;
}
