/* kprof's compiled recorder: "append a launch" in C, for every backend plugin.
 *
 * Optional: kprof_core/low_level/native.py loads it, and Recorder falls back to the same logic in Python
 * (Recorder._launch_py) when it is missing, fails to load, or KPROF_PURE_PYTHON=1 is set.
 *
 * A LaunchPath's `launch` method is what a plugin's capture wrapper calls as `rec.launch(...)`
 * (Recorder binds it per profile). The common case (a timed launch of a backend the profile
 * times, positional arguments) is handled here: the entry tuple is the one Recorder._launch_py
 * builds, appended to the same list. Every other case (no token: a host-timed launch; a
 * backend the profile does not time; device=False or synchronize=True; keyword arguments)
 * calls Recorder._launch_py itself, so both paths behave identically by construction.
 *
 * Built against the limited API (abi3, CPython >= 3.10). Not built for free-threaded CPython
 * (setup.py, native.py): there the pure-Python path is used, whose list/dict operations are
 * atomic per object.
 */
#include "_crecorder_unit.h"
#include <structmember.h>
#include <stddef.h>
#include <limits.h>

/* The entry, activity entry and fast-queue formats, generated from layout.py (one home). */
#include "_layout.h"
#include "_crecorder.h"
/* The extension's other units, each adding its part to the module at import. */
#include "_sites.h"
#include "_range.h"
#include "_idle.h"

/* LaunchPath.launch packs an entry's fields by position (PyTuple_Pack, the cheapest way):
 * this fails to compile if layout.py changes their order without this file following. */
typedef char kprof_entry_order_matches_layout_py[
    (KPROF_ENTRY_LEN == 14 && KPROF_E_SITE == 11 && KPROF_E_CONFIG == 12 && KPROF_E_FLOPS == 13 && KPROF_E_SLOT == 0 && KPROF_E_KIND == 1 && KPROF_E_NAME == 2
     && KPROF_E_QUEUE == 3 && KPROF_E_WHO == 4 && KPROF_E_H0 == 5 && KPROF_E_H1 == 6
     && KPROF_E_START == 7 && KPROF_E_STOP == 8 && KPROF_E_NBYTES == 9 && KPROF_E_FLAGS == 10)
        ? 1 : -1];

/* Each thread's key (kprof_core.recording.threads: `_tls.key`), once read: the key never changes for a
 * Python thread state. An OS thread may host several thread states one after another (a
 * native thread calling into Python twice), each with its own key: the cache holds the id of
 * the thread state it was read in. Opaque in the limited API: allocated at import. */
static Py_tss_t *thread_key, *thread_state_id;

/* How many LaunchPaths were made (`_launch_generation`, for kprof_opencl._clnative's launcher,
 * which skips looking up `rec.launch` while it stands). */
static unsigned long launch_paths_made;

static PyObject *str_slot, *str_key, *minus_one, *zero;

static int
lp_traverse(LaunchPath *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->incoming);
    Py_VISIT(self->live);
    Py_VISIT(self->timed);
    Py_VISIT(self->slow);
    Py_VISIT(self->pressure);
    Py_VISIT(self->tls);
    Py_VISIT(self->running_loop);
    Py_VISIT(self->who);
    Py_VISIT(self->sites);
    Py_VISIT(self->last_backend);
    Py_VISIT(self->last_slot);
    Py_VISIT(self->last_queue);
    Py_VISIT(self->last_qk);
    Py_VISIT(self->range_plan);
    Py_VISIT(self->open_ranges);
    Py_VISIT(self->forked_ranges);
    return 0;
}

static int
lp_clear(LaunchPath *self)
{
    Py_CLEAR(self->incoming);
    Py_CLEAR(self->live);
    Py_CLEAR(self->timed);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->pressure);
    Py_CLEAR(self->tls);
    Py_CLEAR(self->running_loop);
    Py_CLEAR(self->who);
    Py_CLEAR(self->sites);
    Py_CLEAR(self->last_backend);
    Py_CLEAR(self->last_slot);
    Py_CLEAR(self->last_queue);
    Py_CLEAR(self->last_qk);
    Py_CLEAR(self->range_plan);
    Py_CLEAR(self->open_ranges);
    Py_CLEAR(self->forked_ranges);
    return 0;
}

static void
lp_dealloc(LaunchPath *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    lp_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* The thread key (and task), as kprof_core.recording.threads.who() returns it; the common case (a key
 * this thread already has, no running event loop) without a Python frame. */
PyObject *
kprof_lp_who(LaunchPath *self)
{
    PyObject *key;
    uintptr_t state_id = (uintptr_t)PyThreadState_GetID(PyThreadState_Get());
    void *cached_key = PyThread_tss_get(thread_key);
    if (cached_key != NULL && (uintptr_t)PyThread_tss_get(thread_state_id) == state_id) {
        key = PyLong_FromSsize_t((Py_ssize_t)(intptr_t)cached_key);
    } else {
        key = PyObject_GetAttr(self->tls, str_key);
        if (key == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return NULL;
            PyErr_Clear();
            return PyObject_CallNoArgs(self->who);  /* the thread's first call: it makes the key */
        }
        Py_ssize_t k = PyLong_AsSsize_t(key);
        if (k > 0) {  /* keys count from 1; anything else is not cached */
            PyThread_tss_set(thread_key, (void *)(intptr_t)k);
            PyThread_tss_set(thread_state_id, (void *)state_id);
        } else {
            PyErr_Clear();
        }
    }
    if (key == NULL)
        return NULL;
    PyObject *loop = PyObject_CallNoArgs(self->running_loop);
    if (loop == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    int in_loop = loop != Py_None;
    Py_DECREF(loop);
    if (in_loop) {  /* an asyncio task may be running: who() adds its name */
        Py_DECREF(key);
        return PyObject_CallNoArgs(self->who);
    }
    return key;
}

static PyObject *
lp_call_slow(LaunchPath *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    /* No PyObject_Vectorcall in the 3.10 limited API: build the tuple (and dict). */
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    PyObject *tuple = PyTuple_New(nargs), *kwargs = NULL, *result = NULL;
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(tuple, i, args[i]);
    }
    if (nkw) {
        kwargs = PyDict_New();
        if (kwargs == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < nkw; i++) {
            if (PyDict_SetItem(kwargs, PyTuple_GetItem(kwnames, i), args[nargs + i]) < 0)
                goto done;
        }
    }
    result = PyObject_Call(self->slow, tuple, kwargs);
done:
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return result;
}

static PyObject *
lp_launch(LaunchPath *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames != NULL || nargs < 7 || nargs > 10 || args[6] == Py_None)
        return lp_call_slow(self, args, nargs, kwnames);
    PyObject *slot;
    if (args[0] == self->last_backend) {  /* checked already: a backend this profile times */
        slot = self->last_slot;
        Py_INCREF(slot);
    } else {
        slot = PyObject_GetAttr(args[0], str_slot);
        if (slot == NULL)
            return NULL;
        int timed = PySet_Contains(self->timed, slot);
        if (timed <= 0) {
            Py_DECREF(slot);
            return timed < 0 ? NULL : lp_call_slow(self, args, nargs, kwnames);
        }
        Py_INCREF(args[0]);
        Py_XSETREF(self->last_backend, args[0]);
        Py_INCREF(slot);
        Py_XSETREF(self->last_slot, slot);
    }
    PyObject *stop = nargs > 7 ? args[7] : Py_None;
    PyObject *nbytes = nargs > 8 ? args[8] : minus_one;
    PyObject *config = nargs > 9 ? args[9] : Py_None;
    PyObject *qk, *who = NULL, *entry = NULL, *site = NULL;
    if (args[3] == self->last_queue) {  /* kept in `live` already (and alive: we hold it) */
        qk = self->last_qk;
        Py_INCREF(qk);
    } else {
        qk = PyLong_FromVoidPtr(args[3]);  /* id(queue) */
        if (qk == NULL)
            goto fail;
        if (PyDict_GetItemWithError(self->live, qk) == NULL) {
            if (PyErr_Occurred() || PyDict_SetItem(self->live, qk, args[3]) < 0)
                goto fail;
        }
        Py_INCREF(args[3]);
        Py_XSETREF(self->last_queue, args[3]);
        Py_INCREF(qk);
        Py_XSETREF(self->last_qk, qk);
    }
    who = kprof_lp_who(self);
    if (who == NULL)
        goto fail;
    if (self->sites == NULL) {
        site = minus_one;
        Py_INCREF(site);
    } else {
        Py_ssize_t sid = kprof_site_capture((SiteCatcher *)self->sites);
        site = sid == -2 ? NULL : PyLong_FromSsize_t(sid);
        if (site == NULL)
            goto fail;
    }
    entry = PyTuple_Pack(KPROF_ENTRY_LEN, slot, args[1], args[2], qk, who, args[4], args[5], args[6], stop,
                         nbytes, zero, site, config, minus_one);
    if (entry == NULL)
        goto fail;
    /* Not for the collector: an entry refers to tokens, ints and a str, and nothing refers to
     * it but the pending list, so it is in no cycle. Tracked, the entries made between two
     * collections are walked by each young collection (measured: ~0.45 µs per launch on
     * PoCL; CPython would untrack them there only when every token is untracked too). */
    PyObject_GC_UnTrack(entry);
    if (PyList_Append(self->incoming, entry) < 0)
        goto fail;
    Py_DECREF(entry);
    Py_DECREF(site);
    Py_DECREF(who);
    Py_DECREF(qk);
    Py_DECREF(slot);
    if (PyList_Size(self->incoming) >= self->next_harvest) {
        PyObject *r = PyObject_CallNoArgs(self->pressure);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
fail:
    Py_XDECREF(entry);
    Py_XDECREF(site);
    Py_XDECREF(who);
    Py_XDECREF(qk);
    Py_DECREF(slot);
    return NULL;
}

static PyMethodDef lp_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))lp_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch(backend, kind, name, queue, start_ns, end_ns, start=None, stop=None, nbytes=-1, "
     "config=None)\n"
     "Record one launch: see kprof_core.recording.recorder.Recorder.launch."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef lp_members[] = {
    {"next_harvest", T_PYSSIZET, offsetof(LaunchPath, next_harvest), 0,
     "Call pressure() once this many entries are pending."},
    {"range_plan", T_OBJECT, offsetof(LaunchPath, range_plan), 0,
     "kprof.range's compiled path: (backend, current_queue, record_timestamp or None, slot) "
     "per backend, or None (every range takes the Python path)."},
    {"open_ranges", T_OBJECT, offsetof(LaunchPath, open_ranges), 0,
     "The recorder's open_ranges (a dict; kprof.range's compiled path needs it)."},
    {"forked_ranges", T_OBJECT, offsetof(LaunchPath, forked_ranges), 0,
     "The recorder's forked_ranges (a dict; kprof.range's compiled path needs it)."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot lp_slots[] = {
    {Py_tp_dealloc, lp_dealloc},
    {Py_tp_traverse, lp_traverse},
    {Py_tp_clear, lp_clear},
    {Py_tp_methods, lp_methods},
    {Py_tp_members, lp_members},
    {Py_tp_doc, "The compiled launch path of one kprof Recorder."},
    {0, NULL},
};

static PyType_Spec lp_spec = {
    "kprof_core.low_level._crecorder.LaunchPath", sizeof(LaunchPath), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, lp_slots,
};

PyObject *kprof_LaunchPathType;

static PyObject *
new_launch_path(PyObject *module, PyObject *args)
{
    PyObject *incoming, *live, *timed, *slow, *pressure, *tls, *running_loop, *who, *sites;
    Py_ssize_t next_harvest;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOnO:launch_path", &PyList_Type, &incoming,
                          &PyDict_Type, &live, &PyFrozenSet_Type, &timed, &slow, &pressure,
                          &tls, &running_loop, &who, &next_harvest, &sites))
        return NULL;
    if (sites != Py_None && !PyObject_TypeCheck(sites, (PyTypeObject *)kprof_SiteCatcherType)) {
        PyErr_SetString(PyExc_TypeError, "launch_path: sites must be a SiteCatcher or None");
        return NULL;
    }
    LaunchPath *self = (LaunchPath *)PyType_GenericAlloc((PyTypeObject *)kprof_LaunchPathType, 0);
    if (self == NULL)
        return NULL;
    launch_paths_made++;
    Py_INCREF(incoming); self->incoming = incoming;
    Py_INCREF(live); self->live = live;
    Py_INCREF(timed); self->timed = timed;
    Py_INCREF(slow); self->slow = slow;
    Py_INCREF(pressure); self->pressure = pressure;
    Py_INCREF(tls); self->tls = tls;
    Py_INCREF(running_loop); self->running_loop = running_loop;
    Py_INCREF(who); self->who = who;
    self->next_harvest = next_harvest;
    if (sites != Py_None) {
        Py_INCREF(sites);
        self->sites = sites;
    }
    return (PyObject *)self;
}

/* -- the harvest's bookkeeping, column-wise ------------------------------------------------ */

static int
as_i64(PyObject *o, int64_t *out)
{
#if LONG_MAX == INT64_MAX
    /* PyLong_AsLong: CPython 3.11's PyLong_AsLongLong goes through _PyLong_AsByteArray for
     * every int of more than one digit (the host times: two per launch). */
    long v = PyLong_AsLong(o);
#else
    long long v = PyLong_AsLongLong(o);
#endif
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)v;
    return 1;
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
            if (!PyTuple_Check(q) || PyTuple_Size(q) != KPROF_FAST_QUEUE_LEN
                || PyTuple_GetItem(q, KPROF_FQ_BACKEND) != backend)
                break;
            PyObject *ref = PyDict_GetItemWithError(known, PyTuple_GetItem(q, KPROF_FQ_DEVICE_KEY));
            if (ref == NULL || !as_i64(PyTuple_GetItem(q, KPROF_FQ_QID), &last_qid)) {
                PyErr_Clear();
                break;
            }
            last_refb = 0;
            if (PyLong_Check(ref) && !as_i64(ref, &last_refb))
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
        if (!as_i64(nid, &row[NAME * n + m]) || !as_i64(f[KPROF_E_KIND], &row[KIND * n + m])
            || row[KIND * n + m] < 0 || row[KIND * n + m] >= kind_bound  /* host, activity */
            || !as_i64(tid, &row[THREAD * n + m]) || !as_i64(f[KPROF_E_H0], &row[H0 * n + m])
            || !as_i64(f[KPROF_E_H1], &row[H1 * n + m])
            || !as_i64(f[KPROF_E_NBYTES], &row[NBYTES * n + m])
            || !as_i64(f[KPROF_E_FLAGS], &row[FLAGS * n + m])
            || (row[FLAGS * n + m] != 0 && row[FLAGS * n + m] != KPROF_WITH_HOST)
            || !as_i64(f[KPROF_E_SITE], &row[SITE * n + m])
            || !as_i64(cid, &row[CONFIG * n + m])
            || !as_i64(f[KPROF_E_FLOPS], &row[FLOPS * n + m]))
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

static PyMethodDef module_methods[] = {
    {"launch_path", new_launch_path, METH_VARARGS,
     "launch_path(incoming, live_queues, timed_slots, slow, pressure, tls, running_loop, who, "
     "next_harvest, sites) -> LaunchPath"},
    {"run_columns", run_columns, METH_VARARGS,
     "The harvest's bookkeeping of a run of entries, column-wise: see harvest_columns.run_columns."},
    {"checked_rel_dur", checked_rel_dur, METH_VARARGS,
     "Harvest: see kprof_core.recording.harvest_columns.checked_rel_dur."},
    {"max_diff", max_diff, METH_VARARGS, "Placement: see kprof_core.recording.placement."},
    {"add_codes", add_codes, METH_VARARGS, "Placement: see kprof_core.recording.placement."},
    {"or_const", or_const, METH_VARARGS, "Placement: see kprof_core.recording.placement."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_crecorder", "kprof's optional compiled launch path.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__crecorder(void)
{
    str_slot = PyUnicode_InternFromString("slot");
    str_key = PyUnicode_InternFromString("key");
    minus_one = PyLong_FromLong(-1);
    zero = PyLong_FromLong(0);
    if (!str_slot || !str_key || !minus_one || !zero)
        return NULL;
    thread_key = PyThread_tss_alloc();
    thread_state_id = PyThread_tss_alloc();
    if (thread_key == NULL || thread_state_id == NULL || PyThread_tss_create(thread_key) != 0
        || PyThread_tss_create(thread_state_id) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "no thread-specific storage");
        return NULL;
    }
    kprof_LaunchPathType = PyType_FromSpec(&lp_spec);
    if (kprof_LaunchPathType == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    /* native.py compares it with layout.SIGNATURE and refuses this module when they differ. */
    if (PyModule_AddStringConstant(m, "LAYOUT", KPROF_LAYOUT_SIGNATURE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (kprof_sites_init(m) < 0 || kprof_range_init(m) < 0 || kprof_idle_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* For kprof_opencl._clnative's launcher: the C function behind LaunchPath.launch, and the
     * function pointer its method objects carry (to recognise them), called without packing
     * arguments (PyObject_Vectorcall is not in the 3.10 limited API). */
    static void *launch_capi[2] = {(void *)lp_launch, (void *)lp_launch};
    PyObject *cap = PyCapsule_New(launch_capi, "kprof_core.low_level._crecorder._launch_capi", NULL);
    if (cap == NULL || PyModule_AddObject(m, "_launch_capi", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    cap = PyCapsule_New(&launch_paths_made, "kprof_core.low_level._crecorder._launch_generation",
                        NULL);
    if (cap == NULL || PyModule_AddObject(m, "_launch_generation", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(kprof_LaunchPathType);
    if (PyModule_AddObject(m, "LaunchPath", kprof_LaunchPathType) < 0) {
        Py_DECREF(kprof_LaunchPathType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
