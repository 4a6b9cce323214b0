/* The OpenCL plugin's compiled parts: the kernel-launch wrapper's common case, and the batch
 * reader of status, START and END of many cl_events.
 *
 * kprof_opencl/reader.py binds it to clGetEventInfo and clGetEventProfilingInfo of the OpenCL
 * library PyOpenCL has loaded (their addresses, found through ctypes), and hands it PyOpenCL
 * Event objects: each one's cl_event is its `int_ptr`. Through PyOpenCL, each of the three
 * values costs a Python call; here they cost a C call each. Where this module is missing
 * (no compiler, KPROF_PURE_PYTHON=1, free-threaded CPython), reader.py reads them through
 * PyOpenCL's own methods instead, with the same result.
 *
 * Limited API (abi3, CPython >= 3.10); no OpenCL headers needed (_cltypes.h declares the few
 * types and constants used).
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "_cltypes.h"

#ifndef Py_XSETREF  /* not in every version's limited-API headers */
#define Py_XSETREF(op, op2)                     \
    do {                                        \
        PyObject *_py_tmp = (PyObject *)(op);   \
        (op) = (op2);                           \
        Py_XDECREF(_py_tmp);                    \
    } while (0)
#endif

/* The compiled recorder's launch, from its capsule (kprof.plugin.launch_capsules(), which the
 * launcher is given): the C function behind LaunchPath.launch, called without a Python call. */
typedef PyObject *(*lp_launch_t)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);
static lp_launch_t lp_launch_c = NULL;
static void *lp_launch_meth = NULL;  /* the PyCFunction a LaunchPath.launch method wraps */
/* How many LaunchPaths _crecorder has made (`_launch_generation`): a recorder's `launch` is
 * rebound only to a new one (Recorder._bind_launch_path), so while the count stands, the
 * recorder a launcher last saw still launches through the LaunchPath it found then. */
static const unsigned long *lp_generation = NULL;

static cl_api_clGetEventInfo get_event_info = NULL;
static cl_api_clGetEventProfilingInfo get_profiling_info = NULL;
static PyObject *str_int_ptr;

static PyObject *
bind(PyObject *module, PyObject *args)
{
    PyObject *info_addr, *prof_addr;
    if (!PyArg_ParseTuple(args, "OO:bind", &info_addr, &prof_addr))
        return NULL;
    void *info = PyLong_AsVoidPtr(info_addr);
    if (info == NULL && PyErr_Occurred())
        return NULL;
    void *prof = PyLong_AsVoidPtr(prof_addr);
    if (prof == NULL && PyErr_Occurred())
        return NULL;
    if (info == NULL || prof == NULL) {
        PyErr_SetString(PyExc_ValueError, "bind() needs two function addresses");
        return NULL;
    }
    get_event_info = (cl_api_clGetEventInfo)info;
    get_profiling_info = (cl_api_clGetEventProfilingInfo)prof;
    Py_RETURN_NONE;
}

/* The cl_event of a PyOpenCL Event; NULL with an exception set on failure. */
static cl_event
event_of(PyObject *event)
{
    PyObject *ptr = PyObject_GetAttr(event, str_int_ptr);
    if (ptr == NULL)
        return NULL;
    void *ev = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (ev == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "an event without a cl_event");
    return (cl_event)ev;
}

/* read(starts, stops) -> (begins, ends): native int64 bytes for the longest prefix of
 * complete, readable events (see the device_times_batch hook). A failed command (status < 0)
 * or a failed query ends the prefix: the harvest then asks about it alone and reports it. */
static PyObject *
read_times(PyObject *module, PyObject *args)
{
    PyObject *starts, *stops, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!:read", &PyTuple_Type, &starts, &PyTuple_Type, &stops))
        return NULL;
    if (get_event_info == NULL || get_profiling_info == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(stops);
    if (PyTuple_Size(starts) != n) {
        PyErr_SetString(PyExc_ValueError, "starts and stops differ in length");
        return NULL;
    }
    int64_t *out = (int64_t *)PyMem_Malloc(sizeof(int64_t) * 2 * (size_t)(n ? n : 1));
    if (out == NULL)
        return PyErr_NoMemory();
    int64_t *begins = out, *ends = out + n;
    Py_ssize_t k = 0;
    for (; k < n; k++) {
        PyObject *stop_obj = PyTuple_GetItem(stops, k);
        PyObject *start_obj = PyTuple_GetItem(starts, k);
        cl_event stop = event_of(stop_obj);
        if (stop == NULL)
            goto fail;
        cl_int status = 1;
        if (get_event_info(stop, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                           NULL) != CL_SUCCESS || status != CL_COMPLETE)
            break;
        cl_event start = stop;
        if (start_obj != stop_obj) {
            start = event_of(start_obj);
            if (start == NULL)
                goto fail;
        }
        cl_ulong t0 = 0, t1 = 0;
        if (get_profiling_info(start, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL)
                != CL_SUCCESS
            || get_profiling_info(stop, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL)
                != CL_SUCCESS)
            break;
        begins[k] = (int64_t)t0;
        ends[k] = (int64_t)t1;
    }
    {
        PyObject *b = PyBytes_FromStringAndSize((const char *)begins, k * 8);
        PyObject *e = PyBytes_FromStringAndSize((const char *)ends, k * 8);
        if (b != NULL && e != NULL)
            result = PyTuple_Pack(2, b, e);
        Py_XDECREF(b);
        Py_XDECREF(e);
    }
fail:
    PyMem_Free(out);
    return result;
}

/* -- the kernel-launch wrapper -----------------------------------------------------------------
 *
 * What kprof_opencl.capture.kernel_wrapper's Python function does, for its common case: a
 * launch inside a profile, arguments by position, on a queue with profiling whose flag is
 * cached (`queue._kprof_profiles`), of a kernel whose name is cached (`kernel._kprof_name`).
 * Outside a profile it calls the native function straight through; every other case calls the
 * Python wrapper, which does everything (before the native call: nothing is done twice). */

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

static PyObject *str_kprof_name, *str_kprof_profiles, *str_queue, *str_launch, *minus_one;

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
    Py_CLEAR(self->last_kernel);
    Py_CLEAR(self->last_name);
    Py_CLEAR(self->last_queue);
    Py_CLEAR(self->last_gws);
    Py_CLEAR(self->last_lws);
    Py_CLEAR(self->last_config);
    Py_CLEAR(self->last_rec_ref);
    self->last_lp = NULL;
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

/* An attribute, or NULL without an exception when it is missing. */
static PyObject *
cached(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return v;
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

/* `current.queue = queue`, for kprof_opencl.queues._current (a threading.local) straight into
 * the calling thread's dict of it: a generic setattr on a threading.local finds that dict
 * first (~60 ns per launch, measured). The dict, as `current.__dict__` gives it, is
 * kept per OS thread with the id of the thread state it was read in (a thread state's dict of a
 * local lives as long as the thread state; ids are never reused), and only for the first local
 * seen, held here for good, so that the dict's owner cannot be freed under the cache. Any other
 * object: a plain setattr. */
static Py_tss_t *cur_dict, *cur_dict_state;
static PyObject *fast_local;  /* strong, never released */
static PyObject *str_dict;

/* The calling thread's dict of `current` (borrowed), as described above; NULL where this
 * local is not the one served or its dict is not a plain dict (the caller then takes the
 * attribute's generic way), or NULL with an exception. */
static PyObject *
current_dict(PyObject *current)
{
    if (fast_local == NULL) {
        Py_INCREF(current);
        fast_local = current;
    }
    if (current != fast_local)
        return NULL;
    uintptr_t state_id = (uintptr_t)PyThreadState_GetID(PyThreadState_Get());
    PyObject *d = (PyObject *)PyThread_tss_get(cur_dict);
    if (d == NULL || (uintptr_t)PyThread_tss_get(cur_dict_state) != state_id) {
        d = PyObject_GetAttr(current, str_dict);
        if (d == NULL)
            return NULL;
        int exact = PyDict_CheckExact(d);
        Py_DECREF(d);  /* borrowed from now on: the thread state's entry for the local holds it */
        if (!exact)
            return NULL;
        if (PyThread_tss_set(cur_dict, d) != 0
            || PyThread_tss_set(cur_dict_state, (void *)state_id) != 0) {
            PyThread_tss_set(cur_dict, NULL);
            return NULL;
        }
    }
    return d;
}

static int
set_current(PyObject *current, PyObject *queue)
{
    PyObject *d = current_dict(current);
    if (d == NULL)
        return PyErr_Occurred() ? -1 : PyObject_SetAttr(current, str_queue, queue);
    return PyDict_SetItem(d, str_queue, queue);
}

/* `current.queue` (a new reference), read from the thread's dict of the local where it is
 * set there, else the generic way (the class's default: None). */
static PyObject *
get_current(PyObject *current)
{
    PyObject *d = current_dict(current);
    if (d == NULL && PyErr_Occurred())
        return NULL;
    PyObject *q = d == NULL ? NULL : PyDict_GetItemWithError(d, str_queue);
    if (q == NULL)
        return PyErr_Occurred() ? NULL : PyObject_GetAttr(current, str_queue);
    Py_INCREF(q);
    return q;
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
            name = cached(kernel, str_kprof_name);
        }
        if (name != NULL && queue == self->last_queue) {
            profiles = 1;
        } else {
            prof = name == NULL ? NULL : cached(queue, str_kprof_profiles);
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
    if (t1 == NULL || set_current(self->current, queue) < 0)
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
    {0, NULL},
};

static PyType_Spec ln_spec = {
    "kprof_opencl._clnative.Launcher", sizeof(Launcher), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, ln_slots,
};

static PyObject *LauncherType;

static PyObject *
new_launcher(PyObject *module, PyObject *args)
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

/* -- kprof.range's hooks in C ---------------------------------------------------------------
 *
 * The twins of plugin.py's current_queue and record_timestamp hooks, which kprof's compiled
 * range (kprof_core/low_level/_range.c) calls instead of them (`kprof_compiled` on each hook
 * function): each saves a Python frame per call, three per range. Their common case only:
 * record_timestamp calls the Python hook itself for a queue without a cached profiling flag or
 * without profiling (observed markers). The current queue is read from the thread's dict of
 * the local (get_current, as the launcher sets it), and the last profiling queue is kept, so
 * that a range's three calls make no attribute lookup (measured: BENCHMARKS.md, ranges). */

typedef struct {
    PyObject_HEAD
    PyObject *current;  /* queues._current: the thread-local holding the current queue */
    PyObject *python;   /* the Python hook, for every other case */
    PyObject *marker;   /* pyopencl._cl._enqueue_marker_with_wait_list, once looked up */
    PyObject *last;     /* the last queue seen profiling (its flag is set once per queue) */
    int stamp;          /* 0: current_queue, 1: record_timestamp */
} Hook;

static PyObject *str_pyopencl, *str_marker_fn;

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
        return get_current(self->current);
    }
    PyObject *q = get_current(self->current);
    if (q == NULL || q == Py_None)
        return q;
    if (q != self->last) {
        PyObject *prof = cached(q, str_kprof_profiles);
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

static PyObject *
new_hook(PyObject *module, PyObject *args)
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

/* linked() -> whether launchers call the compiled recorder's launch directly (they were given
 * its capsules). */
static PyObject *
py_linked(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(lp_launch_c != NULL && lp_generation != NULL);
}

static PyMethodDef methods[] = {
    {"linked", py_linked, METH_NOARGS,
     "linked() -> whether launchers call the compiled recorder's launch directly"},
    {"bind", bind, METH_VARARGS,
     "bind(clGetEventInfo_address, clGetEventProfilingInfo_address)"},
    {"launcher", new_launcher, METH_VARARGS,
     "launcher(original, python_wrapper, active, now, current, backend, kind, launch_capsules) "
     "-> Launcher (launch_capsules: kprof.plugin.launch_capsules())"},
    {"range_hook", new_hook, METH_VARARGS,
     "range_hook(current, python_hook, stamp) -> the current_queue (stamp false) or "
     "record_timestamp hook in C, for kprof's compiled range"},
    {"read", read_times, METH_VARARGS,
     "read(starts, stops) -> (begins, ends) as native int64 bytes, for the longest prefix of "
     "complete, readable events"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_clnative", "kprof's optional compiled OpenCL launch path and reader.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__clnative(void)
{
    str_int_ptr = PyUnicode_InternFromString("int_ptr");
    str_kprof_name = PyUnicode_InternFromString("_kprof_name");
    str_kprof_profiles = PyUnicode_InternFromString("_kprof_profiles");
    str_queue = PyUnicode_InternFromString("queue");
    str_launch = PyUnicode_InternFromString("launch");
    minus_one = PyLong_FromLong(-1);
    if (!str_int_ptr || !str_kprof_name || !str_kprof_profiles || !str_queue || !str_launch
        || !minus_one)
        return NULL;
    str_dict = PyUnicode_InternFromString("__dict__");
    cur_dict = PyThread_tss_alloc();
    cur_dict_state = PyThread_tss_alloc();
    if (!str_dict || cur_dict == NULL || cur_dict_state == NULL
        || PyThread_tss_create(cur_dict) != 0 || PyThread_tss_create(cur_dict_state) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "no thread-specific storage");
        return NULL;
    }
    str_pyopencl = PyUnicode_InternFromString("pyopencl");
    str_marker_fn = PyUnicode_InternFromString("_enqueue_marker_with_wait_list");
    if (!str_pyopencl || !str_marker_fn)
        return NULL;
    LauncherType = PyType_FromSpec(&ln_spec);
    HookType = PyType_FromSpec(&hk_spec);
    if (LauncherType == NULL || HookType == NULL)
        return NULL;
    return PyModule_Create(&moduledef);
}
