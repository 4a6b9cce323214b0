/* kprof_opencl._clhook, the OpenCL dispatch-table hook: every enqueue of the process, whoever
 * calls it.
 *
 * Every OpenCL object an ICD hands out begins with a pointer to the ICD's dispatch table (the
 * cl_khr_icd extension), and every loader calls `obj->dispatch->clFoo(obj, ...)`. C libraries
 * (VkFFT, CLBlast, clFFT) call OpenCL through whichever loader they were linked to, PyOpenCL
 * through its own: all of them end in that table. While a profile runs, kprof swaps a few of
 * its entries (the enqueues it times, queue creation, clReleaseKernel; buffers and SVM where
 * memory is recorded) for its own functions and restores them at the end. Measured on PoCL:
 * this saw every launch once, from PyOpenCL and from C libraries linked to another loader, and
 * nothing after it was removed; a loader layer missed the C libraries and LD_PRELOAD works
 * only from exec.
 *
 * One concern a unit, each with the header that declares what it shares:
 *   table.c         the dispatch tables: an entry's original, a set of entries swapped in/out
 *   install.c       the enqueue hooks on and off: in a table, or through the preloaded
 *                   interposer (_clpreload.c)
 *   enqueue.c       the hooked enqueues and what they record; bind(), quiet()
 *   queues.c        the queue objects commands name; profiling for queues made while hooked
 *   kernel_names.c  kernel names, cached per cl_kernel
 *   events.c        the Event token a recorded command carries, the raw events the
 *                   recorder's C batch keeps; stamp(), the driver's callbacks
 *   ranges.c        kprof.range's timestamps as raw events (the KprofRawStamp capsule)
 *   memory.c        buffers and SVM allocations
 *   module.c        this: the module's functions, and fork
 *   ../_current_queue.c  the thread's current queue (a unit of _clnative too)
 *
 * Limited API (abi3); no OpenCL headers needed (../_cltypes.h declares what is used).
 */
#include "clhook.h"
#include "enqueue.h"
#include "events.h"
#include "install.h"
#include "kernel_names.h"
#include "memory.h"
#include "queues.h"
#include "ranges.h"
#include "table.h"
#include "../_current_queue.h"

static PyObject *
py_slots(PyObject *module, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    const KprofHookSet *sets[] = {&kprof_enqueue_set, &kprof_memory_set};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < sets[s]->n; i++) {
            const KprofHook *k = &sets[s]->hooks[i];
            PyObject *v = PyLong_FromLong(k->slot);
            if (v == NULL || PyDict_SetItemString(d, k->name, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(d);
                return NULL;
            }
            Py_DECREF(v);
        }
    return d;
}

/* -- fork: the child gets both locks free ----------------------------------------------------
 * Each lock's unit registers its own handlers (kprof_names_at_fork, kprof_memory_at_fork). No
 * code holds both at once but _hold_locks, which takes them in the order fork() does: the
 * handlers registered last run first, so memory's are registered before the names'. */

static volatile int locks_held; /* for the tests: _hold_locks holds them now */

/* _hold_locks(seconds): hold both locks that long, without the GIL (for the tests: a fork
 * while another thread holds them; _locks_held() says when they are held). */
static PyObject *
py_hold_locks(PyObject *module, PyObject *arg)
{
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred())
        return NULL;
#if HOOK_SUPPORTED
    Py_BEGIN_ALLOW_THREADS
    kprof_names_lock();
    kprof_memory_lock();
    locks_held = 1;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    locks_held = 0;
    kprof_memory_unlock();
    kprof_names_unlock();
    Py_END_ALLOW_THREADS
#endif
    Py_RETURN_NONE;
}

static PyObject *
py_locks_held(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(locks_held);
}

static PyMethodDef methods[] = {
    {"_locks_held", py_locks_held, METH_NOARGS, "_locks_held(): whether _hold_locks holds them"},
    {"_hold_locks", py_hold_locks, METH_O,
     "_hold_locks(seconds): hold the hook's locks that long (tests: a fork meanwhile)"},
    {"bind", kprof_py_bind, METH_VARARGS,
     "bind(active, backend, adopt, other, info, current, kinds, row_names, raw_launch)"},
    {"hook", kprof_py_hook, METH_VARARGS, "hook(table_address, version) -> entries hooked"},
    {"unhook", kprof_py_unhook, METH_O, "unhook(table_address) -> entries someone else replaced"},
    {"table_address", kprof_py_table_address, METH_O,
     "the dispatch table of a cl object (its handle)"},
    {"preloaded", kprof_py_preloaded, METH_NOARGS, "whether kprof's interposer was preloaded"},
    {"attach_preload", kprof_py_attach_preload, METH_VARARGS,
     "attach_preload(version) -> entries: the preloaded interposer calls the hook"},
    {"detach_preload", kprof_py_detach_preload, METH_NOARGS,
     "the interposer forwards as a loader"},
    {"stamp", kprof_py_stamp, METH_O,
     "stamp(event_handle) -> Stamp: when the command ran, from the driver's callbacks"},
    {"quiet", kprof_py_quiet, METH_O,
     "quiet(fn): fn, whose OpenCL enqueues the hook leaves to the caller to record"},
    {"mem_hook", kprof_py_mem_hook, METH_VARARGS,
     "mem_hook(table_address, version, alloc, free) -> entries: buffers and SVM recorded"},
    {"mem_unhook", kprof_py_mem_unhook, METH_O, "mem_unhook(table_address) -> entries replaced"},
    {"mem_drain", kprof_py_mem_drain, METH_NOARGS,
     "[(address, time_ns)]: ends since the last drain"},
    {"mem_released", kprof_py_mem_released, METH_NOARGS,
     "[address]: handles the program released since the last call (the last 4096)"},
    {"mem_stats", kprof_py_mem_stats, METH_NOARGS, "memory hook counts: dropped, pending, on"},
    {"stats", kprof_py_stats, METH_NOARGS, "counts: enqueues seen and recorded, names cached"},
    {"remember", kprof_py_remember, METH_VARARGS,
     "remember(queue, handle): the program's queue object for that handle, while it lives"},
    {"remembered", kprof_py_remembered, METH_O,
     "remembered(handle) -> the program's queue object for that handle, or None"},
    {"canonical", kprof_py_canonical, METH_O,
     "canonical(queue) -> the object launches on its handle are recorded with"},
    {"slots", py_slots, METH_NOARGS, "{entry name: slot in the ICD dispatch table}"},
    {"raw_stamp", kprof_py_raw_stamp, METH_NOARGS,
     "raw_stamp() -> the record_timestamp hook's C twin for kprof.range (a capsule)"},
    {"stamp_forget", kprof_py_stamp_forget, METH_NOARGS,
     "stamp_forget(): drop the last queue kprof.range's timestamps were put on"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_clhook", "kprof's OpenCL dispatch-table hook.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__clhook(void)
{
    if (kprof_enqueue_init() < 0 || kprof_events_init() < 0 || kprof_current_init() < 0
        || kprof_queues_init() < 0 || kprof_ranges_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    if (kprof_memory_at_fork() < 0 || kprof_names_at_fork() < 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "supported", HOOK_SUPPORTED) < 0)
        return NULL;
    PyObject *event_type = kprof_event_type();
    Py_INCREF(event_type);
    if (PyModule_AddObject(m, "Event", event_type) < 0)
        return NULL;
    return m;
}
