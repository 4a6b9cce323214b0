/* The kernel-launch wrapper (`Launcher`), which stands in for PyOpenCL's
 * enqueue_nd_range_kernel while a capture is installed: the hottest C of kprof, every PyOpenCL
 * kernel launch of a profile runs it, so what it does per launch stays in this unit or inline in
 * the headers it includes.
 *
 * What kprof_opencl.capture.kernel_wrapper's Python function does, for its common case: a
 * launch inside a profile, arguments by position, on a queue with profiling whose flag is
 * cached (`queue._kprof_profiles`), of a kernel whose name is cached (`kernel._kprof_name`).
 * Outside a profile it calls the native function straight through; every other case calls the
 * Python wrapper, which does everything (before the native call: nothing is done twice).
 */
#include "launcher.h"
#include "../_current_queue.h"

#include <time.h>

/* The compiled recorder's launch, from its capsule (kprof.plugin.launch_capsules(), which the
 * launcher is given): the C function behind LaunchPath.launch, called without a Python call. */
typedef PyObject *(*lp_launch_t)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);
static lp_launch_t lp_launch_c = NULL;
static void *lp_launch_meth = NULL;  /* the PyCFunction a LaunchPath.launch method wraps */
/* How many LaunchPaths _crecorder has made (`_launch_generation`): a recorder's `launch` is
 * rebound only to a new one (Recorder._bind_launch_path), so while the count stands, the
 * recorder a launcher last saw still launches through the LaunchPath it found then. */
static const unsigned long *lp_generation = NULL;

typedef struct {
    PyObject_HEAD
    PyObject *original;  /* the native enqueue_nd_range_kernel */
    PyObject *python;    /* the Python wrapper: every other case */
    PyObject *active;    /* kprof's ContextVar.get: the active recorder or None */
    PyObject *now;       /* time.perf_counter_ns */
    PyObject *current;   /* the thread-local holding the current queue */
    PyObject *backend;
    PyObject *kind;      /* KERNEL */
    /* Per-launch lookups answered once: the last kernel and its cached name, the
     * last queue, whose `_kprof_profiles` was true (both attributes are set once per object
     * and never change; each lookup cost ~20 ns of str-keyed attribute search per launch). */
    PyObject *last_kernel, *last_name, *last_queue;
    /* The last launch configuration and the (global size, local size) it was made of: a
     * program's loop passes the same size objects each time (tuples: immutable, so the same
     * objects mean the same configuration), and the pair is then one allocation fewer per
     * launch, and one fewer towards the collector's young-generation threshold. */
    PyObject *last_gws, *last_lws, *last_config;
    /* The last recorder (a weak reference: a launcher must not keep a finished profile's
     * recorder alive) whose `launch` was a LaunchPath's, that LaunchPath (borrowed: the
     * recorder's `launch` holds it) and the generation then: `rec.launch` is not looked up
     * again while the recorder and the generation are the same (~40 ns per launch). */
    PyObject *last_rec_ref, *last_lp;
    unsigned long last_gen;
    int clock;           /* `now` is time.perf_counter_ns: read CLOCK_MONOTONIC here */
} Launcher;

static PyObject *str_kprof_name, *str_kprof_profiles, *str_launch, *minus_one;

static int
ln_traverse(Launcher *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->original);
    Py_VISIT(self->python);
    Py_VISIT(self->active);
    Py_VISIT(self->now);
    Py_VISIT(self->current);
    Py_VISIT(self->backend);
    Py_VISIT(self->kind);
    Py_VISIT(self->last_kernel);
    Py_VISIT(self->last_name);
    Py_VISIT(self->last_queue);
    Py_VISIT(self->last_gws);
    Py_VISIT(self->last_lws);
    Py_VISIT(self->last_config);
    Py_VISIT(self->last_rec_ref);
    return 0;
}

/* Lets go of the last kernel, queue, sizes and recorder kept (see Launcher). */
static void
forget_last(Launcher *self)
{
    Py_CLEAR(self->last_kernel);
    Py_CLEAR(self->last_name);
    Py_CLEAR(self->last_queue);
    Py_CLEAR(self->last_gws);
    Py_CLEAR(self->last_lws);
    Py_CLEAR(self->last_config);
    Py_CLEAR(self->last_rec_ref);
    self->last_lp = NULL;
}

static int
ln_clear(Launcher *self)
{
    Py_CLEAR(self->original);
    Py_CLEAR(self->python);
    Py_CLEAR(self->active);
    Py_CLEAR(self->now);
    Py_CLEAR(self->current);
    Py_CLEAR(self->backend);
    Py_CLEAR(self->kind);
    forget_last(self);
    return 0;
}

static void
ln_dealloc(Launcher *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    ln_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* The host clock: perf_counter_ns's own value (CPython reads CLOCK_MONOTONIC for it on POSIX),
 * without a Python call; `now` itself elsewhere. */
static PyObject *
ln_now(Launcher *self)
{
#if defined(CLOCK_MONOTONIC) && !defined(__APPLE__)
    if (self->clock) {
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
            return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
#endif
    return PyObject_CallNoArgs(self->now);
}

/* rec.launch(backend, kind, name, queue, t0, t1, ev, ev): straight into the compiled
 * recorder's C function where `launch` is its LaunchPath's method (no argument packing). */
static PyObject *
ln_record(Launcher *self, PyObject *rec, PyObject *name, PyObject *queue, PyObject *t0,
          PyObject *t1, PyObject *ev, PyObject *config)
{
    PyObject *r;
    /* (nbytes -1, and the launch configuration: (global size, local size)) */
    PyObject *argv[10] = {self->backend, self->kind, name, queue, t0, t1, ev, ev, minus_one,
                          config};
    if (self->last_rec_ref != NULL && *lp_generation == self->last_gen
        && PyWeakref_GetObject(self->last_rec_ref) == rec) {
        PyObject *lp = self->last_lp;
        Py_INCREF(lp);  /* for the call: a harvest inside it may rebind the recorder's launch */
        r = lp_launch_c(lp, argv, 10, NULL);
        Py_DECREF(lp);
        return r;
    }
    PyObject *launch = PyObject_GetAttr(rec, str_launch);
    if (launch == NULL)
        return NULL;
    if (lp_launch_c != NULL && PyCFunction_Check(launch)
        && PyCFunction_GetFunction(launch) == lp_launch_meth) {
        PyObject *lp = PyCFunction_GetSelf(launch);  /* borrowed: `launch` holds it */
        if (lp_generation != NULL) {
            PyObject *ref = PyWeakref_NewRef(rec, NULL);
            if (ref == NULL) {
                PyErr_Clear();  /* not weakly referenceable: looked up every time */
            } else {
                Py_XSETREF(self->last_rec_ref, ref);
                self->last_lp = lp;
                self->last_gen = *lp_generation;
            }
        }
        r = lp_launch_c(lp, argv, 10, NULL);
    } else {
        r = PyObject_CallFunctionObjArgs(launch, argv[0], argv[1], argv[2], argv[3], argv[4],
                                         argv[5], argv[6], argv[7], argv[8], argv[9], NULL);
    }
    Py_DECREF(launch);
    return r;
}

static PyObject *
ln_call(Launcher *self, PyObject *args, PyObject *kwargs)
{
    PyObject *rec = PyObject_CallNoArgs(self->active);
    if (rec == NULL)
        return NULL;
    if (rec == Py_None) {
        Py_DECREF(rec);
        return PyObject_Call(self->original, args, kwargs);
    }
    Py_ssize_t nargs = PyTuple_Size(args);
    PyObject *queue = nargs >= 2 ? PyTuple_GetItem(args, 0) : NULL;
    PyObject *kernel = nargs >= 2 ? PyTuple_GetItem(args, 1) : NULL;
    PyObject *name = NULL, *prof = NULL;
    int profiles = 0;
    if (queue != NULL && (kwargs == NULL || PyDict_Size(kwargs) == 0)) {
        if (kernel == self->last_kernel) {
            name = self->last_name;
            Py_INCREF(name);
        } else {
            name = kprof_attr_or_null(kernel, str_kprof_name);
        }
        if (name != NULL && queue == self->last_queue) {
            profiles = 1;
        } else {
            prof = name == NULL ? NULL : kprof_attr_or_null(queue, str_kprof_profiles);
            profiles = prof == NULL ? -1 : PyObject_IsTrue(prof);
            Py_XDECREF(prof);
        }
        if (PyErr_Occurred()) {
            Py_XDECREF(name);
            Py_DECREF(rec);
            return NULL;
        }
        if (profiles == 1) {
            if (kernel != self->last_kernel) {
                Py_INCREF(kernel);
                Py_XSETREF(self->last_kernel, kernel);
                Py_INCREF(name);
                Py_XSETREF(self->last_name, name);
            }
            if (queue != self->last_queue) {
                Py_INCREF(queue);
                Py_XSETREF(self->last_queue, queue);
            }
        }
    }
    /* The launch configuration, (global size, local size), as the call has them: tuples (or
     * no local size) here; lists and the like are the Python wrapper's to make tuples of. */
    PyObject *gws = nargs >= 4 ? PyTuple_GetItem(args, 2) : NULL;
    PyObject *lws = nargs >= 4 ? PyTuple_GetItem(args, 3) : NULL;
    if (profiles == 1 && (gws == NULL || !PyTuple_Check(gws) || (lws != Py_None && !PyTuple_Check(lws))))
        profiles = 0;
    /* g_times_l or allow_empty_ndrange given (by position): what was enqueued differs from the
     * sizes passed, and the Python wrapper works it out. */
    for (Py_ssize_t i = 6; profiles == 1 && i < nargs && i < 8; i++) {
        int set = PyObject_IsTrue(PyTuple_GetItem(args, i));
        if (set != 0) {
            PyErr_Clear();
            profiles = 0;
        }
    }
    if (profiles != 1) {  /* not the common case: the Python wrapper does it all */
        Py_XDECREF(name);
        Py_DECREF(rec);
        return PyObject_Call(self->python, args, kwargs);
    }
    PyObject *t0 = NULL, *ev = NULL, *t1 = NULL, *r = NULL, *config = NULL;
    t0 = ln_now(self);
    if (t0 == NULL)
        goto done;
    ev = PyObject_Call(self->original, args, NULL);
    if (ev == NULL)
        goto done;
    t1 = ln_now(self);
    if (t1 == NULL || kprof_set_current(self->current, queue) < 0)
        goto fail;
    if (gws == self->last_gws && lws == self->last_lws) {
        config = self->last_config;
        Py_INCREF(config);
    } else {
        config = PyTuple_Pack(2, gws, lws);
        if (config == NULL)
            goto fail;
        Py_INCREF(gws);
        Py_XSETREF(self->last_gws, gws);
        Py_INCREF(lws);
        Py_XSETREF(self->last_lws, lws);
        Py_INCREF(config);
        Py_XSETREF(self->last_config, config);
    }
    r = ln_record(self, rec, name, queue, t0, t1, ev, config);
    if (r == NULL)
        goto fail;
    Py_DECREF(r);
    goto done;
fail:
    Py_CLEAR(ev);
done:
    Py_XDECREF(config);
    Py_XDECREF(t1);
    Py_XDECREF(t0);
    Py_DECREF(name);
    Py_DECREF(rec);
    return ev;
}

/* forget(): lets go of the last kernel, queue and sizes it kept (a launcher outlives the
 * profile it was made in: the program's objects must not). */
static PyObject *
ln_forget(Launcher *self, PyObject *unused)
{
    forget_last(self);
    Py_RETURN_NONE;
}

static PyMethodDef ln_methods[] = {
    {"forget", (PyCFunction)ln_forget, METH_NOARGS,
     "Let go of the last kernel, queue and launch sizes kept."},
    {NULL, NULL, 0, NULL},
};

static PyObject *
ln_get_wrapped(Launcher *self, void *closure)
{
    /* The native function, also where `original` is it wrapped in the hook's quiet(). */
    PyObject *w = PyObject_GetAttrString(self->original, "__wrapped__");
    if (w != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return w;
    PyErr_Clear();
    Py_INCREF(self->original);
    return self->original;
}

/* Named and documented as the Python wrapper it stands for. */
static PyObject *
ln_get_name(Launcher *self, void *closure)
{
    return PyObject_GetAttrString(self->python, "__name__");
}

static PyObject *
ln_get_doc(Launcher *self, void *closure)
{
    return PyObject_GetAttrString(self->python, "__doc__");
}

static PyGetSetDef ln_getset[] = {
    {"__wrapped__", (getter)ln_get_wrapped, NULL, "the native function", NULL},
    {"__name__", (getter)ln_get_name, NULL, NULL, NULL},
    {"__qualname__", (getter)ln_get_name, NULL, NULL, NULL},
    {"__doc__", (getter)ln_get_doc, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot ln_slots[] = {
    {Py_tp_dealloc, ln_dealloc},
    {Py_tp_traverse, ln_traverse},
    {Py_tp_clear, ln_clear},
    {Py_tp_call, ln_call},
    {Py_tp_getset, ln_getset},
    {Py_tp_methods, ln_methods},
    {0, NULL},
};

static PyType_Spec ln_spec = {
    "kprof_opencl._clnative.Launcher", sizeof(Launcher), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, ln_slots,
};

static PyObject *LauncherType;

PyObject *
kprof_py_launcher(PyObject *module, PyObject *args)
{
    PyObject *o[7], *capsules;
    if (!PyArg_ParseTuple(args, "OOOOOOOO:launcher", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &capsules))
        return NULL;
    Launcher *self = (Launcher *)PyType_GenericAlloc((PyTypeObject *)LauncherType, 0);
    if (self == NULL)
        return NULL;
    PyObject **fields[7] = {&self->original, &self->python, &self->active, &self->now,
                            &self->current, &self->backend, &self->kind};
    for (int i = 0; i < 7; i++) {
        Py_INCREF(o[i]);
        *fields[i] = o[i];
    }
    /* Where `now` is time.perf_counter_ns itself, ln_now reads the same clock directly. */
    PyObject *time_mod = PyImport_ImportModule("time");
    PyObject *pc = time_mod == NULL ? NULL : PyObject_GetAttrString(time_mod, "perf_counter_ns");
    Py_XDECREF(time_mod);
    if (pc == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->clock = pc == self->now;
    Py_DECREF(pc);
    /* The compiled recorder's launch, where it is loaded (optional: else the Python call). */
    if (lp_launch_c == NULL && PyTuple_Check(capsules) && PyTuple_Size(capsules) == 2) {
        void **fns = (void **)PyCapsule_GetPointer(
            PyTuple_GetItem(capsules, 0), "kprof_core.low_level._crecorder._launch_capi");
        const unsigned long *gen = (const unsigned long *)PyCapsule_GetPointer(
            PyTuple_GetItem(capsules, 1), "kprof_core.low_level._crecorder._launch_generation");
        if (fns != NULL && gen != NULL) {
            lp_launch_meth = fns[1];
            lp_launch_c = (lp_launch_t)fns[0];
            lp_generation = gen;
        }
        PyErr_Clear();
    }
    return (PyObject *)self;
}

/* linked() -> whether launchers call the compiled recorder's launch directly (they were given
 * its capsules). */
PyObject *
kprof_py_linked(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(lp_launch_c != NULL && lp_generation != NULL);
}

int
kprof_launcher_init(void)
{
    str_kprof_name = PyUnicode_InternFromString("_kprof_name");
    str_kprof_profiles = PyUnicode_InternFromString("_kprof_profiles");
    str_launch = PyUnicode_InternFromString("launch");
    minus_one = PyLong_FromLong(-1);
    if (!str_kprof_name || !str_kprof_profiles || !str_launch || !minus_one)
        return -1;
    LauncherType = PyType_FromSpec(&ln_spec);
    return LauncherType == NULL ? -1 : 0;
}
