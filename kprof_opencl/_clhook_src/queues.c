/* Queues: the Python queue object each recorded command names, and profiling for queues made
 * while the hook is installed (as the intercept layer does), so that C libraries' own queues
 * have device times. */
#include "queues.h"
#include "install.h"
#include "table.h"

static PyObject *py_adopt; /* adopt(handle) -> (queue, profiles) */
PyObject *kprof_queues;
/* The last handle asked and its entry (borrowed: the cache holds it, and entries are never
 * replaced or removed while it is open): most launches repeat the queue. */
static cl_command_queue last_q;
static PyObject *last_entry;

void
kprof_queues_bind(PyObject *adopt)
{
    Py_INCREF(adopt);
    Py_XSETREF(py_adopt, adopt);
}

int
kprof_queues_open(void)
{
    if (kprof_queues == NULL && (kprof_queues = PyDict_New()) == NULL)
        return -1;
    return 0;
}

/* The queue objects kprof made are let go; recorders hold their own references. */
void
kprof_queues_close(void)
{
    last_q = NULL;
    last_entry = NULL;
    Py_CLEAR(kprof_queues);
}

PyObject *
kprof_queue_entry(cl_command_queue q)
{
    if (q == last_q && last_entry != NULL)
        return last_entry;
    PyObject *h = PyLong_FromVoidPtr(q);
    if (h == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(kprof_queues, h);
    if (entry == NULL && !PyErr_Occurred()) {
        entry = PyObject_CallFunctionObjArgs(py_adopt, h, NULL);
        if (entry != NULL) {
            if (!PyTuple_Check(entry) || PyTuple_Size(entry) != 2) {
                PyErr_SetString(PyExc_TypeError, "adopt() must return (queue, profiles)");
                Py_CLEAR(entry);
            }
            else if (PyDict_SetItem(kprof_queues, h, entry) < 0) {
                Py_CLEAR(entry);
            }
            else {
                Py_DECREF(entry); /* the dict holds it */
            }
        }
    }
    Py_DECREF(h);
    if (entry != NULL) {
        last_q = q;
        last_entry = entry;
    }
    return entry;
}

/* -- the program's own queue objects ------------------------------------------------------
 * A launch the hook records names the queue object the program made, where kprof saw it made
 * (remember(queue), from pyopencl.CommandQueue while kprof's factory is bound): its label, the
 * thread's current queue and kprof.range's markers are then the program's object's, as they
 * are where PyOpenCL's capture records the launch. Held borrowed: a Seen sentinel set on the
 * object forgets it as the object is freed (PyOpenCL's queues take no weak references). */

static PyObject *known; /* {handle: the object's address}, under the GIL */
static PyObject *str_seen;

typedef struct {
    PyObject_HEAD
    PyObject *handle; /* the key in `known` */
    void *queue;      /* the object it stands for */
} Seen;

static PyObject *SeenType;

static void
seen_dealloc(Seen *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    if (known != NULL && self->handle != NULL) {
        PyObject *v = PyDict_GetItemWithError(known, self->handle);
        if (v != NULL && PyLong_AsVoidPtr(v) == self->queue)
            PyDict_DelItem(known, self->handle);
        PyErr_Clear();
    }
    PyErr_Restore(et, ev, etb);
    Py_XDECREF(self->handle);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot seen_slots[] = {
    {Py_tp_dealloc, seen_dealloc},
    {Py_tp_doc, "Forgets a queue object kprof_opencl._clhook remembered, as it is freed."},
    {0, NULL},
};

static PyType_Spec seen_spec = {
    "kprof_opencl._clhook.Seen", sizeof(Seen), 0, Py_TPFLAGS_DEFAULT, seen_slots,
};

/* The program's object for that queue handle (an int), from now on; -1 with an exception. */
static int
remember(PyObject *queue, PyObject *handle)
{
    if (known == NULL && (known = PyDict_New()) == NULL)
        return -1;
    PyObject *v = PyDict_GetItemWithError(known, handle);
    if (v != NULL && PyLong_AsVoidPtr(v) == (void *)queue)
        return 0;
    if (PyErr_Occurred())
        return -1;
    Seen *seen = PyObject_New(Seen, (PyTypeObject *)SeenType);
    if (seen == NULL)
        return -1;
    Py_INCREF(handle);
    seen->handle = handle;
    seen->queue = queue;
    PyObject *addr = PyLong_FromVoidPtr(queue);
    int err = addr == NULL || PyObject_SetAttr(queue, str_seen, (PyObject *)seen) < 0
              || PyDict_SetItem(known, handle, addr) < 0;
    Py_XDECREF(addr);
    Py_DECREF(seen);
    return err ? -1 : 0;
}

/* remember(queue, handle): see remember() above. */
PyObject *
kprof_py_remember(PyObject *module, PyObject *args)
{
    PyObject *queue, *handle;
    if (!PyArg_ParseTuple(args, "OO!:remember", &queue, &PyLong_Type, &handle))
        return NULL;
    if (remember(queue, handle) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* remembered(handle) -> the program's object for that handle, or None. */
PyObject *
kprof_py_remembered(PyObject *module, PyObject *handle)
{
    PyObject *v = known == NULL ? NULL : PyDict_GetItemWithError(known, handle);
    if (v == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *queue = (PyObject *)PyLong_AsVoidPtr(v);
    Py_INCREF(queue); /* alive: its Seen forgets it first */
    return queue;
}

/* canonical(queue) -> the object launches on its handle are recorded with while capturing:
 * the one the hook named them with already, else `queue` itself, remembered for the hook. Two
 * objects over one cl_command_queue would otherwise be two queues to the watcher of queues
 * without profiling (its state is kept on the object). */
PyObject *
kprof_py_canonical(PyObject *module, PyObject *queue)
{
    PyObject *h = PyObject_GetAttrString(queue, "int_ptr");
    if (h == NULL) {
        PyErr_Clear(); /* not a PyOpenCL queue: itself */
        Py_INCREF(queue);
        return queue;
    }
    PyObject *entry = kprof_queues == NULL ? NULL : PyDict_GetItemWithError(kprof_queues, h);
    if (entry != NULL && PyTuple_Check(entry) && PyTuple_Size(entry) == 2) {
        Py_DECREF(h);
        PyObject *q = PyTuple_GetItem(entry, 0);
        Py_INCREF(q);
        return q;
    }
    if (PyErr_Occurred() || !PyLong_Check(h) || remember(queue, h) < 0)
        PyErr_Clear(); /* no __dict__ to carry its Seen: itself, unremembered */
    Py_DECREF(h);
    Py_INCREF(queue);
    return queue;
}

int
kprof_queues_init(void)
{
    str_seen = PyUnicode_InternFromString("_kprof_seen");
    SeenType = PyType_FromSpec(&seen_spec);
    return str_seen == NULL || SeenType == NULL ? -1 : 0;
}

/* -- queue creation: profiling added, as asked otherwise ------------------------------------- */

cl_command_queue CL_API_CALL
kprof_hook_create_queue(cl_context ctx, cl_device_id dev, cl_command_queue_properties props,
                        cl_int *errcode)
{
    cl_api_clCreateCommandQueue f =
        (cl_api_clCreateCommandQueue)kprof_original(ctx, SLOT_CREATE_COMMAND_QUEUE);
    if (kprof_hook_on && !(props & CL_QUEUE_ON_DEVICE) && !(props & CL_QUEUE_PROFILING_ENABLE)) {
        cl_int err = CL_SUCCESS;
        cl_command_queue q = f(ctx, dev, props | CL_QUEUE_PROFILING_ENABLE, &err);
        if (q != NULL) {
            if (errcode != NULL)
                *errcode = err;
            return q;
        }
    }
    /* Unchanged, or refused with profiling: made exactly as asked, with the caller's error. */
    return f(ctx, dev, props, errcode);
}

cl_command_queue CL_API_CALL
kprof_hook_create_queue_props(cl_context ctx, cl_device_id dev, const cl_queue_properties *props,
                              cl_int *errcode)
{
    cl_api_clCreateCommandQueueWithProperties f = (cl_api_clCreateCommandQueueWithProperties)
        kprof_original(ctx, SLOT_CREATE_COMMAND_QUEUE_WITH_PROPERTIES);
    if (kprof_hook_on) {
        /* A copy of the 0-terminated (key, value) list with the profiling bit set. */
        cl_queue_properties copy[64];
        size_t n = 0;
        int found = 0, skip = 0;
        if (props != NULL)
            for (; props[n] != 0 && n + 4 < 64; n += 2) {
                copy[n] = props[n];
                copy[n + 1] = props[n + 1];
                if (props[n] == CL_QUEUE_PROPERTIES) {
                    found = 1;
                    skip = (props[n + 1] & (CL_QUEUE_ON_DEVICE | CL_QUEUE_PROFILING_ENABLE)) != 0;
                    copy[n + 1] |= CL_QUEUE_PROFILING_ENABLE;
                }
            }
        if (!(props != NULL && props[n] != 0) && !skip) { /* the list fit */
            if (!found) {
                copy[n++] = CL_QUEUE_PROPERTIES;
                copy[n++] = CL_QUEUE_PROFILING_ENABLE;
            }
            copy[n] = 0;
            cl_int err = CL_SUCCESS;
            cl_command_queue q = f(ctx, dev, copy, &err);
            if (q != NULL) {
                if (errcode != NULL)
                    *errcode = err;
                return q;
            }
        }
    }
    return f(ctx, dev, props, errcode);
}
