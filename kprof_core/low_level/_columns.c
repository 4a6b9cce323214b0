/* The harvest's and placement's column arithmetic, a unit of _crecorder: a run of pending
 * entries made columns (run_columns, the twin of harvest_columns.run_columns), the values
 * kprof keeps (checked_rel_dur), and placement's sums over int64 columns. */
#include "_crecorder_unit.h"

#include "_layout.h"
#include "_columns.h"

/* -- the harvest's bookkeeping, column-wise ------------------------------------------------ */

/* A fast-queue triple (layout.py's FAST_QUEUE_FIELDS) of `backend` on a device in `known`:
 * its queue id and the device's reference begin time (0 where `known` holds no int); 0
 * otherwise (no exception set). */
int
kprof_fast_queue(PyObject *q, PyObject *backend, PyObject *known, int64_t *qid, int64_t *refb)
{
    if (q == NULL || !PyTuple_Check(q) || PyTuple_Size(q) != KPROF_FAST_QUEUE_LEN
        || PyTuple_GetItem(q, KPROF_FQ_BACKEND) != backend)
        return 0;
    PyObject *ref = PyDict_GetItemWithError(known, PyTuple_GetItem(q, KPROF_FQ_DEVICE_KEY));
    if (ref == NULL || !kprof_as_i64(PyTuple_GetItem(q, KPROF_FQ_QID), qid)) {
        PyErr_Clear();
        return 0;
    }
    *refb = 0;
    return !PyLong_Check(ref) || kprof_as_i64(ref, refb);
}

/* run_columns(chunk, slot, backend, fast_queues, thread_ids, name_ids, config_ids, known,
 *             kind_bound)
 * -> (m, starts, stops, names, kinds, queues, threads, h0s, h1s, nbytes, flags, sites, configs,
 *     flops, refb, host)
 *
 * What harvest_columns.run_columns does in Python: the longest prefix of `chunk` (entry tuples) whose
 * entries are timed launches of `backend` (its `slot`) on queues in `fast_queues` (id(queue)
 * -> (backend, queue id, device key)) of a device in `known` (device key -> the reference's
 * begin time, an int, or anything else for backends placed by elapsed time: then 0), by
 * threads in `thread_ids`, names in `name_ids` and launch configurations in `config_ids` (the
 * backend's: config -> id, None -> -1), of a kind below `kind_bound` (device work,
 * not host entries or delivered activity records), with int fields and no flags; their columns as native
 * int64 bytes, their tokens as tuples. An entry flagged WITH_HOST (a range's device entry
 * carrying its host side) is in the run: its flags 0, its `host` 1. */
static PyObject *
run_columns(PyObject *module, PyObject *args)
{
    PyObject *chunk, *slot, *backend, *fast_queues, *thread_ids, *name_ids, *config_ids, *known;
    long long kind_bound;
    if (!PyArg_ParseTuple(args, "O!OOO!O!O!O!O!L:run_columns", &PyList_Type, &chunk, &slot,
                          &backend, &PyDict_Type, &fast_queues, &PyDict_Type, &thread_ids,
                          &PyDict_Type, &name_ids, &PyDict_Type, &config_ids, &PyDict_Type,
                          &known, &kind_bound))
        return NULL;
    Py_ssize_t n = PyList_Size(chunk);
    enum { NAME, KIND, QUEUE, THREAD, H0, H1, NBYTES, FLAGS, SITE, CONFIG, FLOPS, REFB, HOST,
           NCOLS };
    int64_t *cols = (int64_t *)PyMem_Malloc(sizeof(int64_t) * NCOLS * (size_t)(n ? n : 1));
    if (cols == NULL)
        return PyErr_NoMemory();
    PyObject *starts = NULL, *stops = NULL, *result = NULL;
    PyObject *last_q = NULL;  /* the queue tuple of the previous entry: most runs have one */
    int64_t last_qid = 0, last_refb = 0;
    Py_ssize_t m = 0;
    for (; m < n; m++) {
        PyObject *e = PyList_GetItem(chunk, m);
        if (!PyTuple_Check(e) || PyTuple_Size(e) != KPROF_ENTRY_LEN)
            break;
        PyObject *f[KPROF_ENTRY_LEN];
        for (int i = 0; i < KPROF_ENTRY_LEN; i++)
            f[i] = PyTuple_GetItem(e, i);
        if (f[KPROF_E_START] == Py_None)
            break;
        if (f[KPROF_E_SLOT] != slot) {
            int same = PyObject_RichCompareBool(f[KPROF_E_SLOT], slot, Py_EQ);
            if (same != 1) {
                PyErr_Clear();
                break;
            }
        }
        PyObject *q = PyDict_GetItemWithError(fast_queues, f[KPROF_E_QUEUE]);
        if (q == NULL) {
            PyErr_Clear();
            break;
        }
        if (q != last_q) {
            if (!kprof_fast_queue(q, backend, known, &last_qid, &last_refb))
                break;
            last_q = q;
        }
        PyObject *tid = PyDict_GetItemWithError(thread_ids, f[KPROF_E_WHO]);
        PyObject *nid = tid == NULL ? NULL : PyDict_GetItemWithError(name_ids, f[KPROF_E_NAME]);
        /* A configuration not interned yet (or unhashable) ends the run: _take interns it. */
        PyObject *cid = nid == NULL ? NULL : PyDict_GetItemWithError(config_ids, f[KPROF_E_CONFIG]);
        if (cid == NULL) {
            PyErr_Clear();
            break;
        }
        int64_t *row = cols;
        if (!kprof_as_i64(nid, &row[NAME * n + m])
            || !kprof_as_i64(f[KPROF_E_KIND], &row[KIND * n + m])
            || row[KIND * n + m] < 0 || row[KIND * n + m] >= kind_bound  /* host, activity */
            || !kprof_as_i64(tid, &row[THREAD * n + m])
            || !kprof_as_i64(f[KPROF_E_H0], &row[H0 * n + m])
            || !kprof_as_i64(f[KPROF_E_H1], &row[H1 * n + m])
            || !kprof_as_i64(f[KPROF_E_NBYTES], &row[NBYTES * n + m])
            || !kprof_as_i64(f[KPROF_E_FLAGS], &row[FLAGS * n + m])
            || (row[FLAGS * n + m] != 0 && row[FLAGS * n + m] != KPROF_WITH_HOST)
            || !kprof_as_i64(f[KPROF_E_SITE], &row[SITE * n + m])
            || !kprof_as_i64(cid, &row[CONFIG * n + m])
            || !kprof_as_i64(f[KPROF_E_FLOPS], &row[FLOPS * n + m]))
            break;  /* flagged entries (approximate, observed on the host) are _take's */
        row[QUEUE * n + m] = last_qid;
        row[REFB * n + m] = last_refb;
        row[HOST * n + m] = row[FLAGS * n + m] != 0;  /* a range's host side too */
        row[FLAGS * n + m] = 0;
    }
    starts = PyTuple_New(m);
    stops = PyTuple_New(m);
    if (starts == NULL || stops == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *e = PyList_GetItem(chunk, j);
        PyObject *a = PyTuple_GetItem(e, KPROF_E_START), *b = PyTuple_GetItem(e, KPROF_E_STOP);
        Py_INCREF(a);
        PyTuple_SetItem(starts, j, a);
        Py_INCREF(b);
        PyTuple_SetItem(stops, j, b);
    }
    result = PyTuple_New(3 + NCOLS);
    if (result == NULL)
        goto done;
    PyTuple_SetItem(result, 0, PyLong_FromSsize_t(m));
    Py_INCREF(starts);
    PyTuple_SetItem(result, 1, starts);
    Py_INCREF(stops);
    PyTuple_SetItem(result, 2, stops);
    for (int c = 0; c < NCOLS; c++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)(cols + (size_t)c * n), m * 8);
        if (b == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SetItem(result, 3 + c, b);
    }
done:
    Py_XDECREF(starts);
    Py_XDECREF(stops);
    PyMem_Free(cols);
    return result;
}

/* checked_rel_dur(begins, ends, refb, h0s, h1s, nbytes, limit) -> (k, rel, dur): for the
 * longest prefix of rows whose values kprof keeps (every time within [-limit, limit), the end
 * not before the begin, the duration below limit, h1 not before h0, nbytes -1 or in
 * [0, limit)), k, begins - refb and ends - begins; all native int64 bytes (refb may be
 * longer). The twin of harvest_columns.checked_rel_dur: the same rows, the same k. Checking
 * the plugin's values before subtracting them keeps every difference within int64. */
static PyObject *
checked_rel_dur(PyObject *module, PyObject *args)
{
    PyObject *b, *e, *r, *l0, *l1, *nb;
    long long limit;
    if (!PyArg_ParseTuple(args, "SSSSSSL:checked_rel_dur", &b, &e, &r, &l0, &l1, &nb, &limit))
        return NULL;
    Py_ssize_t k = PyBytes_Size(b) / 8;
    if (PyBytes_Size(e) / 8 != k || PyBytes_Size(r) / 8 < k || PyBytes_Size(l0) / 8 < k
        || PyBytes_Size(l1) / 8 < k || PyBytes_Size(nb) / 8 < k) {
        PyErr_SetString(PyExc_ValueError, "checked_rel_dur: columns of different lengths");
        return NULL;
    }
    const int64_t *bv = (const int64_t *)PyBytes_AsString(b);
    const int64_t *ev = (const int64_t *)PyBytes_AsString(e);
    const int64_t *rv = (const int64_t *)PyBytes_AsString(r);
    const int64_t *h0 = (const int64_t *)PyBytes_AsString(l0);
    const int64_t *h1 = (const int64_t *)PyBytes_AsString(l1);
    const int64_t *nv = (const int64_t *)PyBytes_AsString(nb);
    const int64_t lim = (int64_t)limit;
    Py_ssize_t j;
    for (j = 0; j < k; j++) {
        int64_t bj = bv[j], ej = ev[j], rj = rv[j];
        if (bj < -lim || bj >= lim || ej < -lim || ej >= lim || rj < -lim || rj >= lim
            || ej < bj || ej - bj >= lim || bj - rj < -lim || bj - rj >= lim
            || h0[j] < -lim || h0[j] >= lim || h1[j] < h0[j] || h1[j] >= lim
            || nv[j] < -1 || nv[j] >= lim)
            break;
    }
    k = j;
    PyObject *rel = PyBytes_FromStringAndSize(NULL, k * 8);
    PyObject *dur = PyBytes_FromStringAndSize(NULL, k * 8);
    if (rel == NULL || dur == NULL) {
        Py_XDECREF(rel);
        Py_XDECREF(dur);
        return NULL;
    }
    int64_t *relv = (int64_t *)PyBytes_AsString(rel), *durv = (int64_t *)PyBytes_AsString(dur);
    for (j = 0; j < k; j++) {
        relv[j] = bv[j] - rv[j];
        durv[j] = ev[j] - bv[j];
    }
    PyObject *out = Py_BuildValue("(nOO)", k, rel, dur);
    Py_DECREF(rel);
    Py_DECREF(dur);
    return out;
}

/* -- placement, column-wise ----------------------------------------------------------------- */

/* max_diff(a, b, codes, d) -> max(a[j] - b[j]) over the rows with codes[j] == d (every row
 * when codes is None), or None when there is none. a, b: int64 bytes; codes: bytes or None. */
static PyObject *
max_diff(PyObject *module, PyObject *args)
{
    PyObject *a, *b, *codes;
    int d;
    if (!PyArg_ParseTuple(args, "SSOi:max_diff", &a, &b, &codes, &d))
        return NULL;
    Py_ssize_t n = PyBytes_Size(a) / 8;
    if (PyBytes_Size(b) / 8 != n || (codes != Py_None && (!PyBytes_Check(codes)
                                                            || PyBytes_Size(codes) != n))) {
        PyErr_SetString(PyExc_ValueError, "max_diff: columns of different lengths");
        return NULL;
    }
    const int64_t *av = (const int64_t *)PyBytes_AsString(a);
    const int64_t *bv = (const int64_t *)PyBytes_AsString(b);
    const unsigned char *cv = codes == Py_None ? NULL
                                               : (const unsigned char *)PyBytes_AsString(codes);
    int any = 0;
    int64_t best = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (cv != NULL && cv[j] != d)
            continue;
        int64_t v = av[j] - bv[j];
        if (!any || v > best)
            best = v;
        any = 1;
    }
    if (!any)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(best);
}

/* add_codes(start, codes, offsets) -> start[j] + offsets[codes[j]] (offsets[1] for every row
 * when codes is None), as int64 bytes. offsets: a tuple of ints. */
static PyObject *
add_codes(PyObject *module, PyObject *args)
{
    PyObject *start, *codes, *offsets;
    if (!PyArg_ParseTuple(args, "SOO!:add_codes", &start, &codes, &PyTuple_Type, &offsets))
        return NULL;
    Py_ssize_t n = PyBytes_Size(start) / 8, no = PyTuple_Size(offsets);
    if (no < 2 || no > 256 || (codes != Py_None && (!PyBytes_Check(codes)
                                                     || PyBytes_Size(codes) != n))) {
        PyErr_SetString(PyExc_ValueError, "add_codes: bad codes or offsets");
        return NULL;
    }
    int64_t off[256];
    for (Py_ssize_t i = 0; i < no; i++) {
        off[i] = PyLong_AsLongLong(PyTuple_GetItem(offsets, i));
        if (off[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL)
        return NULL;
    const int64_t *sv = (const int64_t *)PyBytes_AsString(start);
    int64_t *ov = (int64_t *)PyBytes_AsString(out);
    const unsigned char *cv = codes == Py_None ? NULL
                                               : (const unsigned char *)PyBytes_AsString(codes);
    for (Py_ssize_t j = 0; j < n; j++) {
        unsigned c = cv == NULL ? 1 : cv[j];
        ov[j] = sv[j] + (c < (unsigned)no ? off[c] : 0);
    }
    return out;
}

/* or_const(flags, bits) -> flags[j] | bits, as int64 bytes. */
static PyObject *
or_const(PyObject *module, PyObject *args)
{
    PyObject *flags;
    long long bits;
    if (!PyArg_ParseTuple(args, "SL:or_const", &flags, &bits))
        return NULL;
    Py_ssize_t n = PyBytes_Size(flags) / 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL)
        return NULL;
    const int64_t *fv = (const int64_t *)PyBytes_AsString(flags);
    int64_t *ov = (int64_t *)PyBytes_AsString(out);
    for (Py_ssize_t j = 0; j < n; j++)
        ov[j] = fv[j] | (int64_t)bits;
    return out;
}

static PyMethodDef column_functions[] = {
    {"run_columns", run_columns, METH_VARARGS,
     "The harvest's bookkeeping of a run of entries, column-wise: see harvest_columns.run_columns."},
    {"checked_rel_dur", checked_rel_dur, METH_VARARGS,
     "Harvest: see kprof_core.recording.harvest_columns.checked_rel_dur."},
    {"max_diff", max_diff, METH_VARARGS, "Placement: see kprof_core.recording.placement."},
    {"add_codes", add_codes, METH_VARARGS, "Placement: see kprof_core.recording.placement."},
    {"or_const", or_const, METH_VARARGS, "Placement: see kprof_core.recording.placement."},
    {NULL, NULL, 0, NULL},
};

int
kprof_columns_init(PyObject *m)
{
    return PyModule_AddFunctions(m, column_functions);
}
