/* kprof.range's timestamps recorded raw: the twin of plugin.record_timestamp for the queues
 * whose launches the hook records raw (a KprofRawStamp, layout.py). A marker enqueued on the
 * queue's own ICD entry (it waits for everything enqueued before it), its cl_event handed to
 * the compiled recorder as a raw token read and given back by kprof_event_ops, as a launch's:
 * a range and the launches inside it then share one batch, read column-wise at the harvest.
 * Every other queue (not profiling, not known to the hook, on a platform not hooked or before
 * OpenCL 1.2) gets NULL without an exception: the Python hook answers for it. */
#include "ranges.h"
#include "enqueue.h"
#include "events.h"
#include "queues.h"
#include "table.h"
#include "../../kprof_core/low_level/_layout.h"

static PyObject *str_int_ptr;
static PyObject *last_queue;       /* the last queue object stamped (held until forget) */
static cl_command_queue last_handle; /* its cl_command_queue */

/* The cl_command_queue of a Python queue object; NULL (no exception) where it has none. */
static cl_command_queue
handle_of(PyObject *queue)
{
    if (queue == last_queue)
        return last_handle;
    PyObject *ptr = PyObject_GetAttr(queue, str_int_ptr);
    void *h = ptr == NULL ? NULL : PyLong_AsVoidPtr(ptr);
    Py_XDECREF(ptr);
    if (h == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(queue);
    Py_XSETREF(last_queue, queue);
    last_handle = (cl_command_queue)h;
    return last_handle;
}

static void *
stamp(PyObject *queue)
{
#if HOOK_SUPPORTED
    if (!kprof_enqueue_raw() || !kprof_queues_ready())
        return NULL;
    cl_command_queue h = handle_of(queue);
    if (h == NULL)
        return NULL;
    /* As the hooked enqueues decide: a queue recorded raw is one that profiles. */
    PyObject *entry = kprof_queue_entry(h);
    if (entry == NULL)
        return NULL; /* (an exception: adopting the queue failed) */
    if (PyObject_IsTrue(PyTuple_GetItem(entry, 1)) != 1) {
        PyErr_Clear();
        return NULL;
    }
    KprofTable *t = kprof_find_table(kprof_table_of(h));
    if (t == NULL || !t->in[KPROF_ENQUEUES] || t->version < 12)
        return NULL;
    cl_api_clEnqueueMarkerWithWaitList marker
        = (cl_api_clEnqueueMarkerWithWaitList)kprof_original(h, SLOT_ENQUEUE_MARKER_WITH_WAIT_LIST);
    if (marker == NULL)
        return NULL;
    cl_event ev = NULL;
    cl_int err = marker(h, 0, NULL, &ev);
    if (err != CL_SUCCESS || ev == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "clEnqueueMarkerWithWaitList failed: %d (kprof.range's timestamp)",
                     (int)err);
        return NULL;
    }
    kprof_event_raw_taken();
    return ev;
#else
    return NULL;
#endif
}

static const KprofRawStamp raw_stamp = {KPROF_LAYOUT_SIGNATURE, &kprof_event_ops, stamp,
                                        kprof_event_raw};

PyObject *
kprof_py_raw_stamp(PyObject *module, PyObject *unused)
{
    return PyCapsule_New((void *)&raw_stamp, KPROF_RAW_STAMP_CAPSULE, NULL);
}

PyObject *
kprof_py_stamp_forget(PyObject *module, PyObject *unused)
{
    Py_CLEAR(last_queue);
    last_handle = NULL;
    Py_RETURN_NONE;
}

int
kprof_ranges_init(void)
{
    str_int_ptr = PyUnicode_InternFromString("int_ptr");
    return str_int_ptr == NULL ? -1 : 0;
}
