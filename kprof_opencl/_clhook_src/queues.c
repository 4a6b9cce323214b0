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
