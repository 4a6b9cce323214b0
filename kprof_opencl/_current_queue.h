/* The thread's current queue (_current_queue.c, a unit of both _clnative and _clhook):
 * `queues._current.queue`, which the launcher and the hooked enqueues set at each launch and
 * the range hooks read, straight in the calling thread's dict of that threading.local. Each
 * extension has its own cache of it. */
#ifndef KPROF_OPENCL_CURRENT_QUEUE_H
#define KPROF_OPENCL_CURRENT_QUEUE_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <stdint.h>

#include "_cunit.h"

/* Interns the names and allocates the thread-specific storage; -1 with an exception. */
KPROF_INTERNAL int kprof_current_init(void);

/* The one local served (the first seen, held for good), the calling thread's dict of it with
 * the id of the thread state it was read in, and "queue". */
KPROF_INTERNAL extern PyObject *kprof_current_local;
KPROF_INTERNAL extern Py_tss_t *kprof_current_tss, *kprof_current_tss_state;
KPROF_INTERNAL extern PyObject *kprof_str_queue;

/* kprof_current_dict's answer where the thread's dict is not kept yet: reads and keeps it. */
KPROF_INTERNAL PyObject *kprof_current_dict_fill(PyObject *current);

/* The calling thread's dict of `current` (borrowed); NULL where this local is not the one
 * served or its dict is not a plain dict (the caller then takes the attribute's generic way),
 * or NULL with an exception. Inline, as what follows: every launch and every range asks. */
static inline PyObject *
kprof_current_dict(PyObject *current)
{
    if (current == kprof_current_local) {
        PyObject *d = (PyObject *)PyThread_tss_get(kprof_current_tss);
        if (d != NULL
            && (uintptr_t)PyThread_tss_get(kprof_current_tss_state)
                   == (uintptr_t)PyThreadState_GetID(PyThreadState_Get()))
            return d;
    }
    return kprof_current_dict_fill(current);
}

/* `current.queue = queue`; -1 with an exception. Most launches repeat the queue: a read is
 * cheaper than a store (which hashes and replaces the value). */
static inline int
kprof_set_current(PyObject *current, PyObject *queue)
{
    PyObject *d = kprof_current_dict(current);
    if (d == NULL)
        return PyErr_Occurred() ? -1 : PyObject_SetAttr(current, kprof_str_queue, queue);
    if (PyDict_GetItemWithError(d, kprof_str_queue) == queue)
        return 0;
    return PyErr_Occurred() ? -1 : PyDict_SetItem(d, kprof_str_queue, queue);
}

/* `current.queue` (a new reference), read from the thread's dict of the local where it is
 * set there, else the generic way (the class's default: None). */
static inline PyObject *
kprof_get_current(PyObject *current)
{
    PyObject *d = kprof_current_dict(current);
    if (d == NULL && PyErr_Occurred())
        return NULL;
    PyObject *q = d == NULL ? NULL : PyDict_GetItemWithError(d, kprof_str_queue);
    if (q == NULL)
        return PyErr_Occurred() ? NULL : PyObject_GetAttr(current, kprof_str_queue);
    Py_INCREF(q);
    return q;
}

#endif /* KPROF_OPENCL_CURRENT_QUEUE_H */
