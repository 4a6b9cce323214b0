/* Queues (queues.c): each cl_command_queue's Python queue object, and profiling for the queues
 * made while the hook is installed. */
#ifndef KPROF_CLHOOK_QUEUES_H
#define KPROF_CLHOOK_QUEUES_H

#include "clhook.h"

/* adopt(handle) -> (queue, profiles): a queue object once per handle (bind()). */
KPROF_INTERNAL void kprof_queues_bind(PyObject *adopt);

/* The cache of queue objects, {handle: (queue, profiles)}: made before anything is hooked,
 * let go of once nothing is. Under the GIL; open returns -1 with an exception. */
KPROF_INTERNAL int kprof_queues_open(void);
KPROF_INTERNAL void kprof_queues_close(void);
KPROF_INTERNAL extern PyObject *kprof_queues;

/* Whether the cache is open. Inline: every hooked enqueue asks, recorded or not. */
static inline int
kprof_queues_ready(void)
{
    return kprof_queues != NULL;
}

/* The (queue, profiles) pair for a cl_command_queue: a borrowed reference, or NULL with an
 * exception set. Under the GIL, while the cache is open. */
KPROF_INTERNAL PyObject *kprof_queue_entry(cl_command_queue q);

/* remember(queue, handle) and remembered(handle): the program's own queue objects (queues.c). */
KPROF_INTERNAL PyObject *kprof_py_remember(PyObject *module, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_remembered(PyObject *module, PyObject *handle);
KPROF_INTERNAL PyObject *kprof_py_canonical(PyObject *module, PyObject *queue);

/* Interns names and makes the Seen type; -1 with an exception. */
KPROF_INTERNAL int kprof_queues_init(void);

/* The hooked queue constructors. */
KPROF_INTERNAL cl_command_queue CL_API_CALL kprof_hook_create_queue(
    cl_context ctx, cl_device_id dev, cl_command_queue_properties props, cl_int *errcode);
KPROF_INTERNAL cl_command_queue CL_API_CALL kprof_hook_create_queue_props(
    cl_context ctx, cl_device_id dev, const cl_queue_properties *props, cl_int *errcode);

#endif /* KPROF_CLHOOK_QUEUES_H */
