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

/* The entry, activity entry and fast-queue formats, generated from layout.py (one home). */
#include "_layout.h"
#include "_crecorder.h"
/* The extension's other units, each adding its part to the module at import. */
#include "_sites.h"
#include "_range.h"
#include "_idle.h"
#include "_batch.h"
#include "_columns.h"

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

static PyObject *str_slot, *str_key, *str_launch, *minus_one, *zero;

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
    Py_VISIT(self->batch_entry);
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
    Py_CLEAR(self->batch_entry);
    /* A cached pointer to this path (kprof_lp_of, _clnative's launcher) is stale from now. */
    launch_paths_made++;
    return 0;
}

static void
lp_dealloc(LaunchPath *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    lp_clear(self);
    kprof_count_drop(self->count);
    self->count = NULL;
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

PyObject *
kprof_lp_queue_key(LaunchPath *self, PyObject *queue)
{
    if (queue == self->last_queue) {  /* kept in `live` already (and alive: we hold it) */
        Py_INCREF(self->last_qk);
        return self->last_qk;
    }
    PyObject *qk = PyLong_FromVoidPtr(queue);  /* id(queue) */
    if (qk == NULL)
        return NULL;
    if (PyDict_GetItemWithError(self->live, qk) == NULL
        && (PyErr_Occurred() || PyDict_SetItem(self->live, qk, queue) < 0)) {
        Py_DECREF(qk);
        return NULL;
    }
    Py_INCREF(queue);
    Py_XSETREF(self->last_queue, queue);
    Py_INCREF(qk);
    Py_XSETREF(self->last_qk, qk);
    return qk;
}

/* What every common launch needs, for LaunchPath.launch and a raw launch (_batch.c): the
 * backend's slot (1 where this profile times it, 0 where not: the caller takes the Python
 * path), id(queue) with the queue kept in `live`, the thread's key and the launch site. New
 * references in *slot, *qk and *who on 1; -1 with an exception. */
int
kprof_lp_common(LaunchPath *self, PyObject *backend, PyObject *queue, PyObject **slot_out,
                PyObject **qk_out, PyObject **who_out, Py_ssize_t *site_out)
{
    PyObject *slot, *qk = NULL, *who = NULL;
    if (backend == self->last_backend) {  /* checked already: a backend this profile times */
        slot = self->last_slot;
        Py_INCREF(slot);
    } else {
        slot = PyObject_GetAttr(backend, str_slot);
        if (slot == NULL)
            return -1;
        int timed = PySet_Contains(self->timed, slot);
        if (timed <= 0) {
            Py_DECREF(slot);
            return timed;
        }
        Py_INCREF(backend);
        Py_XSETREF(self->last_backend, backend);
        Py_INCREF(slot);
        Py_XSETREF(self->last_slot, slot);
    }
    if (queue == self->last_queue) {  /* most launches repeat it: no call */
        qk = self->last_qk;
        Py_INCREF(qk);
    } else if ((qk = kprof_lp_queue_key(self, queue)) == NULL) {
        goto fail;
    }
    who = kprof_lp_who(self);
    if (who == NULL)
        goto fail;
    Py_ssize_t sid = -1;
    if (self->sites != NULL) {
        sid = kprof_site_capture((SiteCatcher *)self->sites);
        if (sid == -2)
            goto fail;
    }
    *slot_out = slot;
    *qk_out = qk;
    *who_out = who;
    *site_out = sid;
    return 1;
fail:
    Py_XDECREF(who);
    Py_XDECREF(qk);
    Py_DECREF(slot);
    return -1;
}

/* After an append: harvest once enough is pending (a batch's records count one by one). */
int
kprof_lp_pressure(LaunchPath *self)
{
    Py_ssize_t pending = PyList_Size(self->incoming) + (self->count ? self->count->extra : 0);
    if (pending >= self->next_harvest) {
        PyObject *r = PyObject_CallNoArgs(self->pressure);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *
lp_launch(LaunchPath *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames != NULL || nargs < 7 || nargs > 10 || args[6] == Py_None)
        return lp_call_slow(self, args, nargs, kwnames);
    PyObject *slot, *qk, *who, *site = NULL, *entry = NULL;
    Py_ssize_t sid;
    int common = kprof_lp_common(self, args[0], args[3], &slot, &qk, &who, &sid);
    if (common <= 0)
        return common < 0 ? NULL : lp_call_slow(self, args, nargs, kwnames);
    PyObject *stop = nargs > 7 ? args[7] : Py_None;
    PyObject *nbytes = nargs > 8 ? args[8] : minus_one;
    PyObject *config = nargs > 9 ? args[9] : Py_None;
    site = sid == -1 ? (Py_INCREF(minus_one), minus_one) : PyLong_FromSsize_t(sid);
    if (site == NULL)
        goto fail;
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
    if (kprof_lp_pressure(self) < 0)
        return NULL;
    Py_RETURN_NONE;
fail:
    Py_XDECREF(entry);
    Py_XDECREF(site);
    Py_DECREF(who);
    Py_DECREF(qk);
    Py_DECREF(slot);
    return NULL;
}

/* The LaunchPath behind rec.launch, the last one found cached: valid while no LaunchPath was
 * made or cleared since (the generation), for the same recorder (a weak reference: the cache
 * must not keep a finished profile's recorder alive). */
static PyObject *of_rec_ref;
static LaunchPath *of_lp;
static unsigned long of_gen;

LaunchPath *
kprof_lp_of(PyObject *rec)
{
    if (of_rec_ref != NULL && of_gen == launch_paths_made
        && PyWeakref_GetObject(of_rec_ref) == rec)
        return of_lp;
    PyObject *launch = PyObject_GetAttr(rec, str_launch);
    if (launch == NULL)
        return NULL;
    LaunchPath *lp = NULL;
    if (PyCFunction_Check(launch)
        && PyCFunction_GetFunction(launch) == (PyCFunction)(void (*)(void))lp_launch) {
        lp = (LaunchPath *)PyCFunction_GetSelf(launch);  /* the recorder holds it */
        PyObject *ref = PyWeakref_NewRef(rec, NULL);
        if (ref == NULL) {
            PyErr_Clear();  /* not weakly referenceable: looked up every time */
        } else {
            Py_XSETREF(of_rec_ref, ref);
            of_lp = lp;
            of_gen = launch_paths_made;
        }
    }
    Py_DECREF(launch);
    return lp;
}

static PyObject *
lp_get_batched(LaunchPath *self, void *closure)
{
    return PyLong_FromSsize_t(self->count ? self->count->extra : 0);
}

static PyGetSetDef lp_getset[] = {
    {"batched", (getter)lp_get_batched, NULL,
     "Records this path's batches hold beyond one per pending entry: the pending count is "
     "len(incoming) + batched.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

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
    {Py_tp_getset, lp_getset},
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
    self->count = kprof_count_new();
    if (self->count == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
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

static PyMethodDef module_methods[] = {
    {"launch_path", new_launch_path, METH_VARARGS,
     "launch_path(incoming, live_queues, timed_slots, slow, pressure, tls, running_loop, who, "
     "next_harvest, sites) -> LaunchPath"},
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
    str_launch = PyUnicode_InternFromString("launch");
    minus_one = PyLong_FromLong(-1);
    zero = PyLong_FromLong(0);
    if (!str_slot || !str_key || !str_launch || !minus_one || !zero)
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
    if (kprof_sites_init(m) < 0 || kprof_range_init(m) < 0 || kprof_idle_init(m) < 0
        || kprof_batch_init(m) < 0 || kprof_columns_init(m) < 0) {
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
