/* The thread's current queue: `current.queue = queue` for kprof_opencl.queues._current (a
 * threading.local) goes straight into the calling thread's dict of it, since a generic setattr
 * on a threading.local finds that dict first (~60 ns per launch, measured). The dict, as
 * `current.__dict__` gives it, is kept per OS thread with the id of the thread state it was read
 * in (a thread state's dict of a local lives as long as the thread state; ids are never reused),
 * and only for the first local seen, held here for good, so that the dict's owner cannot be
 * freed under the cache. Any other object: the generic attribute. The lookups every launch and
 * range make are inline in _current_queue.h; this unit fills the cache.
 */
#include "_current_queue.h"

PyObject *kprof_current_local; /* strong, never released */
Py_tss_t *kprof_current_tss, *kprof_current_tss_state;
PyObject *kprof_str_queue;
static PyObject *str_dict;

PyObject *
kprof_current_dict_fill(PyObject *current)
{
    if (kprof_current_local == NULL) {
        Py_INCREF(current);
        kprof_current_local = current;
    }
    if (current != kprof_current_local)
        return NULL;
    uintptr_t state_id = (uintptr_t)PyThreadState_GetID(PyThreadState_Get());
    PyObject *d = PyObject_GetAttr(current, str_dict);
    if (d == NULL)
        return NULL;
    int exact = PyDict_CheckExact(d);
    Py_DECREF(d); /* borrowed from now on: the thread state's entry for the local holds it */
    if (!exact)
        return NULL;
    if (PyThread_tss_set(kprof_current_tss, d) != 0
        || PyThread_tss_set(kprof_current_tss_state, (void *)state_id) != 0) {
        PyThread_tss_set(kprof_current_tss, NULL);
        return NULL;
    }
    return d;
}

int
kprof_current_init(void)
{
    kprof_str_queue = PyUnicode_InternFromString("queue");
    if (kprof_str_queue == NULL)
        return -1;
    str_dict = PyUnicode_InternFromString("__dict__");
    kprof_current_tss = PyThread_tss_alloc();
    kprof_current_tss_state = PyThread_tss_alloc();
    if (!str_dict || kprof_current_tss == NULL || kprof_current_tss_state == NULL
        || PyThread_tss_create(kprof_current_tss) != 0
        || PyThread_tss_create(kprof_current_tss_state) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "no thread-specific storage");
        return -1;
    }
    return 0;
}
