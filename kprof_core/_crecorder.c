/* kprof's compiled recorder: "append a launch" in C, for every backend plugin.
 *
 * Optional: kprof_core/native.py loads it, and Recorder falls back to the same logic in Python
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
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <structmember.h>
#include <stddef.h>

typedef struct {
    PyObject_HEAD
    PyObject *incoming;     /* list: the recorder's pending entries */
    PyObject *live;         /* dict: id(queue) -> queue, kept alive while pending */
    PyObject *timed;        /* frozenset: slots of the backends this profile times */
    PyObject *slow;         /* Recorder._launch_py, bound: every other case */
    PyObject *pressure;     /* Recorder._pressure, bound */
    PyObject *tls;          /* kprof_core.threads._tls */
    PyObject *running_loop; /* asyncio._get_running_loop */
    PyObject *who;          /* kprof_core.threads.who */
    Py_ssize_t next_harvest;
} LaunchPath;

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

/* The thread key (and task), as kprof_core.threads.who() returns it; the common case (a key
 * already given to this thread, no running event loop) without a Python frame. */
static PyObject *
lp_who(LaunchPath *self)
{
    PyObject *key = PyObject_GetAttr(self->tls, str_key);
    if (key == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return PyObject_CallNoArgs(self->who);  /* the thread's first call: it makes the key */
    }
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
    if (kwnames != NULL || nargs < 7 || nargs > 9 || args[6] == Py_None)
        return lp_call_slow(self, args, nargs, kwnames);
    PyObject *slot = PyObject_GetAttr(args[0], str_slot);
    if (slot == NULL)
        return NULL;
    int timed = PySet_Contains(self->timed, slot);
    if (timed <= 0) {
        Py_DECREF(slot);
        return timed < 0 ? NULL : lp_call_slow(self, args, nargs, kwnames);
    }
    PyObject *stop = nargs > 7 ? args[7] : Py_None;
    PyObject *nbytes = nargs > 8 ? args[8] : minus_one;
    PyObject *qk = PyLong_FromVoidPtr(args[3]);  /* id(queue) */
    PyObject *who = NULL, *entry = NULL;
    if (qk == NULL)
        goto fail;
    if (PyDict_GetItemWithError(self->live, qk) == NULL) {
        if (PyErr_Occurred() || PyDict_SetItem(self->live, qk, args[3]) < 0)
            goto fail;
    }
    who = lp_who(self);
    if (who == NULL)
        goto fail;
    entry = PyTuple_Pack(11, slot, args[1], args[2], qk, who, args[4], args[5], args[6], stop,
                         nbytes, zero);
    if (entry == NULL || PyList_Append(self->incoming, entry) < 0)
        goto fail;
    Py_DECREF(entry);
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
    Py_XDECREF(who);
    Py_XDECREF(qk);
    Py_DECREF(slot);
    return NULL;
}

static PyMethodDef lp_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))lp_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch(backend, kind, name, queue, start_ns, end_ns, start=None, stop=None, nbytes=-1)\n"
     "Record one launch: see kprof_core.recorder.Recorder.launch."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef lp_members[] = {
    {"next_harvest", T_PYSSIZET, offsetof(LaunchPath, next_harvest), 0,
     "Call pressure() once this many entries are pending."},
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
    "kprof_core._crecorder.LaunchPath", sizeof(LaunchPath), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, lp_slots,
};

static PyObject *LaunchPathType;

static PyObject *
new_launch_path(PyObject *module, PyObject *args)
{
    PyObject *incoming, *live, *timed, *slow, *pressure, *tls, *running_loop, *who;
    Py_ssize_t next_harvest;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOn:launch_path", &PyList_Type, &incoming,
                          &PyDict_Type, &live, &PyFrozenSet_Type, &timed, &slow, &pressure,
                          &tls, &running_loop, &who, &next_harvest))
        return NULL;
    LaunchPath *self = (LaunchPath *)PyType_GenericAlloc((PyTypeObject *)LaunchPathType, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(incoming); self->incoming = incoming;
    Py_INCREF(live); self->live = live;
    Py_INCREF(timed); self->timed = timed;
    Py_INCREF(slow); self->slow = slow;
    Py_INCREF(pressure); self->pressure = pressure;
    Py_INCREF(tls); self->tls = tls;
    Py_INCREF(running_loop); self->running_loop = running_loop;
    Py_INCREF(who); self->who = who;
    self->next_harvest = next_harvest;
    return (PyObject *)self;
}

static PyMethodDef module_methods[] = {
    {"launch_path", new_launch_path, METH_VARARGS,
     "launch_path(incoming, live_queues, timed_slots, slow, pressure, tls, running_loop, who, "
     "next_harvest) -> LaunchPath"},
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
    LaunchPathType = PyType_FromSpec(&lp_spec);
    if (LaunchPathType == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(LaunchPathType);
    if (PyModule_AddObject(m, "LaunchPath", LaunchPathType) < 0) {
        Py_DECREF(LaunchPathType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
