/* kprof.range's hooks in C (`Hook`): the twins of plugin.py's current_queue and
 * record_timestamp hooks, which kprof's compiled range (kprof_core/low_level/_range.c) calls
 * instead of them (`kprof_compiled` on each hook function): each saves a Python frame per call,
 * three per range. Their common case only: record_timestamp calls the Python hook itself for a
 * queue without a cached profiling flag or without profiling (observed markers). The current
 * queue is read from the thread's dict of the local (_current_queue.h, as the launcher sets it),
 * and the last profiling queue is kept, so that a range's three calls make no attribute lookup
 * (measured: BENCHMARKS.md, ranges).
 */
#include "range_hooks.h"
#include "../_current_queue.h"

typedef struct {
    PyObject_HEAD
    PyObject *current;  /* queues._current: the thread-local holding the current queue */
    PyObject *python;   /* the Python hook, for every other case */
    PyObject *marker;   /* pyopencl._cl._enqueue_marker_with_wait_list, once looked up */
    PyObject *last;     /* the last queue seen profiling (its flag is set once per queue) */
    int stamp;          /* 0: current_queue, 1: record_timestamp */
} Hook;

static PyObject *str_pyopencl, *str_marker_fn, *str_kprof_profiles;

static int
hk_traverse(Hook *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->current);
    Py_VISIT(self->python);
    Py_VISIT(self->marker);
    Py_VISIT(self->last);
    return 0;
}

static int
hk_clear(Hook *self)
{
    Py_CLEAR(self->current);
    Py_CLEAR(self->python);
    Py_CLEAR(self->marker);
    Py_CLEAR(self->last);
    return 0;
}

static void
hk_dealloc(Hook *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    hk_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
hk_call(Hook *self, PyObject *args, PyObject *kwargs)
{
    if (kwargs != NULL || PyTuple_Size(args) != 1)
        return PyObject_Call(self->python, args, kwargs);
    if (!self->stamp) {  /* current_queue: none until PyOpenCL is imported */
        PyObject *mod = PyDict_GetItemWithError(PyImport_GetModuleDict(), str_pyopencl);
        if (mod == NULL) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        return kprof_get_current(self->current);
    }
    PyObject *q = kprof_get_current(self->current);
    if (q == NULL || q == Py_None)
        return q;
    if (q != self->last) {
        PyObject *prof = kprof_attr_or_null(q, str_kprof_profiles);
        int profiles = prof == NULL ? -1 : PyObject_IsTrue(prof);
        Py_XDECREF(prof);
        if (profiles != 1) {
            Py_DECREF(q);
            return PyErr_Occurred() ? NULL : PyObject_Call(self->python, args, NULL);
        }
        Py_INCREF(q);
        Py_XSETREF(self->last, q);
    }
    if (self->marker == NULL) {
        PyObject *cl = PyImport_ImportModule("pyopencl._cl");
        self->marker = cl == NULL ? NULL : PyObject_GetAttr(cl, str_marker_fn);
        Py_XDECREF(cl);
        if (self->marker == NULL) {
            Py_DECREF(q);
            return NULL;
        }
    }
    /* With no wait list a marker waits for everything enqueued before it on the queue. */
    PyObject *ev = PyObject_CallFunctionObjArgs(self->marker, q, Py_None, NULL);
    Py_DECREF(q);
    return ev;
}

/* Drops the last queue, at a capture's end: the program's queue (and its context) must not
 * outlive the profile because kprof kept it. */
static PyObject *
hk_forget(Hook *self, PyObject *unused)
{
    Py_CLEAR(self->last);
    Py_RETURN_NONE;
}

static PyMethodDef hk_methods[] = {
    {"forget", (PyCFunction)hk_forget, METH_NOARGS, "forget(): drop the last queue kept"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot hk_slots[] = {
    {Py_tp_dealloc, hk_dealloc},
    {Py_tp_methods, hk_methods},
    {Py_tp_traverse, hk_traverse},
    {Py_tp_clear, hk_clear},
    {Py_tp_call, hk_call},
    {0, NULL},
};

static PyType_Spec hk_spec = {
    "kprof_opencl._clnative.Hook", sizeof(Hook), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    hk_slots,
};

static PyObject *HookType;

PyObject *
kprof_py_range_hook(PyObject *module, PyObject *args)
{
    PyObject *current, *python;
    int stamp;
    if (!PyArg_ParseTuple(args, "OOp:range_hook", &current, &python, &stamp))
        return NULL;
    Hook *self = (Hook *)PyType_GenericAlloc((PyTypeObject *)HookType, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(current);
    self->current = current;
    Py_INCREF(python);
    self->python = python;
    self->stamp = stamp;
    return (PyObject *)self;
}

int
kprof_hooks_init(void)
{
    str_pyopencl = PyUnicode_InternFromString("pyopencl");
    str_marker_fn = PyUnicode_InternFromString("_enqueue_marker_with_wait_list");
    str_kprof_profiles = PyUnicode_InternFromString("_kprof_profiles");
    if (!str_pyopencl || !str_marker_fn || !str_kprof_profiles)
        return -1;
    HookType = PyType_FromSpec(&hk_spec);
    return HookType == NULL ? -1 : 0;
}
