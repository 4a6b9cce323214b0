/* Turning the enqueue hooks on and off: swapped into a dispatch table (table.c), or attached
 * to the interposer `kprof run` preloaded (_clpreload.c) where a table cannot be hooked. Once
 * neither remains, the caches are let go of. */
#include "install.h"
#include "enqueue.h"
#include "kernel_names.h"
#include "queues.h"
#include "table.h"

volatile int kprof_hook_on;
static int preload_attached;

static int
open_queues(void *unused)
{
    return kprof_queues_open();
}

/* When nothing is hooked or attached any more: off, and the caches let go. */
static void
release_if_idle(void)
{
    if (!preload_attached && !kprof_tables_any(KPROF_ENQUEUES)) {
        kprof_hook_on = 0;
        kprof_queues_close();
        kprof_names_clear();
    }
}

/* hook(table_address, version) -> names hooked. The caller checked the table is the ICD's and
 * writable (kprof_opencl/hook.py); entries past the ICD's OpenCL version are left alone. */
PyObject *
kprof_py_hook(PyObject *module, PyObject *args)
{
    PyObject *addr;
    int version;
    if (!PyArg_ParseTuple(args, "Oi:hook", &addr, &version))
        return NULL;
    if (!HOOK_SUPPORTED) {
        PyErr_SetString(PyExc_NotImplementedError, "the hook is not built for this platform");
        return NULL;
    }
    if (!kprof_enqueue_bound()) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    PyObject *done = kprof_table_hook(addr, version, &kprof_enqueue_set, open_queues, NULL);
    if (done != NULL)
        kprof_hook_on = 1;
    return done;
}

/* unhook(table_address) -> names someone else replaced meanwhile (left as they are). */
PyObject *
kprof_py_unhook(PyObject *module, PyObject *addr)
{
    PyObject *conflicts = kprof_table_unhook(addr, &kprof_enqueue_set);
    if (conflicts != NULL)
        release_if_idle();
    return conflicts;
}

/* -- the LD_PRELOAD interposer (_clpreload.c), where `kprof run` preloaded it ---------------- */

typedef void (*attach_fn)(void *const *);

static attach_fn
preload_entry(void)
{
#if HOOK_SUPPORTED
    return (attach_fn)dlsym(RTLD_DEFAULT, "kprof_clpreload_attach");
#else
    return NULL;
#endif
}

/* preloaded() -> whether the interposer is in this process (preloaded at exec). */
PyObject *
kprof_py_preloaded(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(preload_entry() != NULL);
}

/* attach_preload(version) -> entries attached: the interposer calls the hooked functions. */
PyObject *
kprof_py_attach_preload(PyObject *module, PyObject *args)
{
    int version;
    if (!PyArg_ParseTuple(args, "i:attach_preload", &version))
        return NULL;
    attach_fn attach = preload_entry();
    if (attach == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kprof's OpenCL interposer is not preloaded");
        return NULL;
    }
    if (!kprof_enqueue_bound()) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (kprof_queues_open() < 0)
        return NULL;
    const KprofHookSet *set = &kprof_enqueue_set;
    void *fns[N_SLOTS] = {NULL};
    PyObject *done = PyList_New(0);
    if (done == NULL)
        return NULL;
    for (int i = 0; i < set->n; i++) {
        if (set->hooks[i].since > version)
            continue;
        fns[set->hooks[i].slot] = set->hooks[i].fn;
        PyObject *s = PyUnicode_FromString(set->hooks[i].name);
        if (s == NULL || PyList_Append(done, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(done);
            return NULL;
        }
        Py_DECREF(s);
    }
    kprof_hook_on = 1;
    preload_attached = 1;
    attach(fns);
    return done;
}

PyObject *
kprof_py_detach_preload(PyObject *module, PyObject *unused)
{
    attach_fn attach = preload_entry();
    if (attach != NULL)
        attach(NULL);
    preload_attached = 0;
    release_if_idle();
    Py_RETURN_NONE;
}
