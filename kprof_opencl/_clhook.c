/* The OpenCL dispatch-table hook: every enqueue of the process, whoever calls it.
 *
 * Every OpenCL object an ICD hands out begins with a pointer to the ICD's dispatch table (the
 * cl_khr_icd extension), and every loader calls `obj->dispatch->clFoo(obj, ...)`. C libraries
 * (VkFFT, CLBlast, clFFT) call OpenCL through whichever loader they were linked to, PyOpenCL
 * through its own: all of them end in that table. While a profile runs, kprof swaps a few of
 * its entries (the enqueues it times, queue creation, clReleaseKernel) for the functions below
 * and restores them at the end. Measured on PoCL: this saw every launch once, from
 * PyOpenCL and from C libraries linked to another loader, and nothing after it was removed; a
 * loader layer missed the C libraries and LD_PRELOAD works only from exec.
 *
 * A hooked enqueue calls the ICD's own function with the caller's arguments (its own event
 * when the caller passed none, so that the work has device times), then, holding the GIL,
 * hands the launch to the calling thread's active recorder (`rec.launch`, the compiled path)
 * with an `Event` token that owns one reference to the cl_event (released when kprof drops
 * it). The caller's return value and event are untouched. Launches PyOpenCL's Python capture
 * records (kprof_opencl.capture) and kprof's own markers are made inside `quiet(fn)`: a
 * thread-local mark the hook honours, so nothing is counted twice.
 *
 * Queues created while the hook is installed get CL_QUEUE_PROFILING_ENABLE (as the
 * intercept layer does). Kernel names are cached per cl_kernel and dropped at clReleaseKernel
 * (a freed handle may be reused by a new kernel).
 *
 * Limited API (abi3); no OpenCL headers needed: the types, constants and table slots below are
 * the Khronos ones (slot = index of the entry in struct _cl_icd_dispatch, CL/cl_icd.h;
 * tests/test_opencl_hook.py checks them against the header where it is installed).
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#define CL_API_CALL __stdcall
#define HOOK_SUPPORTED 0
#else
#define CL_API_CALL
#define HOOK_SUPPORTED 1
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#endif

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef intptr_t cl_queue_properties;
typedef void *cl_event;
typedef void *cl_command_queue;
typedef void *cl_kernel;
typedef void *cl_mem;
typedef void *cl_context;
typedef void *cl_device_id;

#define CL_SUCCESS 0
#define CL_EVENT_COMMAND_EXECUTION_STATUS 0x11D3
#define CL_KERNEL_FUNCTION_NAME 0x1190
#define CL_IMAGE_ELEMENT_SIZE 0x1111
#define CL_QUEUE_PROPERTIES 0x1093
#define CL_QUEUE_PROFILING_ENABLE (1 << 1)
#define CL_QUEUE_ON_DEVICE (1 << 2)
#define CL_COMPLETE_STATUS 0x0
#define CL_RUNNING_STATUS 0x1

/* Slots of struct _cl_icd_dispatch (CL/cl_icd.h). */
enum {
    S_CREATE_QUEUE = 9,
    S_GET_IMAGE_INFO = 21,
    S_RELEASE_KERNEL = 37,
    S_GET_KERNEL_INFO = 39,
    S_GET_EVENT_INFO = 42,
    S_RETAIN_EVENT = 43,
    S_RELEASE_EVENT = 44,
    S_GET_EVENT_PROFILING_INFO = 45,
    S_SET_EVENT_CALLBACK = 81,
    S_READ_BUFFER = 48,
    S_WRITE_BUFFER = 49,
    S_COPY_BUFFER = 50,
    S_READ_IMAGE = 51,
    S_WRITE_IMAGE = 52,
    S_COPY_IMAGE = 53,
    S_COPY_IMAGE_TO_BUFFER = 54,
    S_COPY_BUFFER_TO_IMAGE = 55,
    S_NDRANGE = 59,
    S_READ_BUFFER_RECT = 86,
    S_WRITE_BUFFER_RECT = 87,
    S_COPY_BUFFER_RECT = 88,
    S_FILL_BUFFER = 102,
    S_FILL_IMAGE = 103,
    S_MARKER = 105,
    S_CREATE_QUEUE_WITH_PROPERTIES = 123,
    S_SVM_MEMCPY = 129,
    S_SVM_MEMFILL = 130,
    S_CREATE_BUFFER = 14,
    S_RELEASE_MEM_OBJECT = 18,
    S_SET_MEM_DESTRUCTOR_CALLBACK = 83,
    S_SVM_ALLOC = 126,
    S_SVM_FREE = 127,
    S_ENQUEUE_SVM_FREE = 128,
    N_SLOTS = 131,
};

typedef cl_int(CL_API_CALL *info_fn)(void *, cl_uint, size_t, void *, size_t *);
typedef cl_int(CL_API_CALL *event_fn)(cl_event);
typedef cl_int(CL_API_CALL *image_info_fn)(cl_mem, cl_uint, size_t, void *, size_t *);

static void **
table_of(void *obj)
{
    return *(void ***)obj;
}

/* -- the tables hooked ------------------------------------------------------------------------
 * Append-only: a thread may still be inside a hooked function after the table is restored, and
 * it reads its original from here. */
#define MAX_TABLES 16
typedef struct {
    void **table;
    void *orig[N_SLOTS];
    int hooked;
    int mem_hooked;
    int max_slot; /* slots past the ICD's OpenCL version are left alone */
} Table;

static Table tables[MAX_TABLES];
static int n_tables;

static Table *
find_table(void **t)
{
    for (int i = 0; i < n_tables; i++)
        if (tables[i].table == t)
            return &tables[i];
    return NULL;
}

/* The ICD's own function for `slot` of obj's table (hooked or not). */
static void *
original(void *obj, int slot)
{
    void **t = table_of(obj);
    Table *h = find_table(t);
    return h != NULL && h->orig[slot] != NULL ? h->orig[slot] : t[slot];
}

/* -- state shared with Python --------------------------------------------------------------- */

static volatile int hook_on;    /* installed on some table */
#if HOOK_SUPPORTED
static __thread int quiet_depth; /* inside quiet(fn): PyOpenCL's capture records this call */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
#else
static int quiet_depth;
#endif

static PyObject *py_active;   /* kprof.capture.active */
static PyObject *py_backend;  /* the opencl Backend */
static PyObject *py_adopt;    /* adopt(handle) -> (queue, profiles): a queue object once per handle */
static PyObject *py_other;    /* other(rec, kind, name, queue, t0, t1, token, nbytes): not the common case */
static PyObject *py_info;     /* info(handle, param): an Event's other get_info values */
static PyObject *py_kinds[2]; /* KERNEL, COPY */
static PyObject *py_names[5]; /* H2D, D2H, D2D, FILL, SVM copy: capture.py's row names */
static PyObject *py_current; /* the thread-local whose `queue` is the thread's current queue */
static PyObject *queues; /* {handle: (queue, profiles)} while installed */
static PyObject *str_launch, *str_queue;
static long long n_seen, n_recorded, n_events; /* counts for tests: enqueues, live tokens */

enum { N_H2D, N_D2H, N_D2D, N_FILL, N_SVM };
enum { K_KERNEL, K_COPY };

static int64_t
now_ns(void)
{
#if HOOK_SUPPORTED
    /* time.perf_counter_ns's clock on Linux and the BSDs (CPython's _PyTime_GetPerfCounter). */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#else
    return 0;
#endif
}

/* -- kernel names, cached per cl_kernel ----------------------------------------------------
 * Open addressing; the GIL guards reads and inserts, names_lock also guards against
 * clReleaseKernel, which may run on a thread without the GIL: it moves the name to `dead`,
 * decref'd later under the GIL. */
typedef struct {
    cl_kernel key;
    PyObject *name;
} NameSlot;
static NameSlot *names;
static size_t names_cap, names_len;
static PyObject **dead;
static size_t dead_len, dead_cap;
#define TOMB ((cl_kernel)1)
#ifndef Py_XSETREF
#define Py_XSETREF(dst, src)                                                                 \
    do {                                                                                      \
        PyObject *_old = (PyObject *)(dst);                                                   \
        (dst) = (src);                                                                        \
        Py_XDECREF(_old);                                                                     \
    } while (0)
#endif

static size_t
hash_ptr(void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static NameSlot *
name_slot(cl_kernel k, int insert)
{
    if (names_cap == 0)
        return NULL;
    size_t mask = names_cap - 1, i = hash_ptr(k) & mask;
    NameSlot *tomb = NULL;
    for (size_t n = 0; n < names_cap; n++, i = (i + 1) & mask) {
        NameSlot *s = &names[i];
        if (s->key == k)
            return s;
        if (s->key == TOMB) {
            if (tomb == NULL)
                tomb = s;
            continue;
        }
        if (s->key == NULL)
            return insert ? (tomb ? tomb : s) : NULL;
    }
    return insert ? tomb : NULL;
}

static int
names_grow(void)
{
    size_t cap = names_cap ? names_cap * 2 : 64;
    NameSlot *fresh = (NameSlot *)calloc(cap, sizeof(NameSlot));
    if (fresh == NULL)
        return -1;
    NameSlot *old = names;
    size_t old_cap = names_cap;
    names = fresh;
    names_cap = cap;
    names_len = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key != NULL && old[i].key != TOMB) {
            NameSlot *s = name_slot(old[i].key, 1);
            *s = old[i];
            names_len++;
        }
    free(old);
    return 0;
}

static void
names_bury(PyObject *name)
{
    if (dead_len == dead_cap) {
        size_t cap = dead_cap ? dead_cap * 2 : 16;
        PyObject **d = (PyObject **)realloc(dead, cap * sizeof(PyObject *));
        if (d == NULL)
            return; /* leaks one str rather than touching Python without the GIL */
        dead = d;
        dead_cap = cap;
    }
    dead[dead_len++] = name;
}

/* Under the GIL. */
static void
names_flush_dead(void)
{
#if HOOK_SUPPORTED
    pthread_mutex_lock(&names_lock);
#endif
    size_t n = dead_len;
    PyObject **d = dead;
    dead = NULL;
    dead_len = dead_cap = 0;
#if HOOK_SUPPORTED
    pthread_mutex_unlock(&names_lock);
#endif
    for (size_t i = 0; i < n; i++)
        Py_DECREF(d[i]);
    free(d);
}

/* The kernel's name (a new reference), under the GIL; NULL with an exception on failure. */
static PyObject *
kernel_name(cl_kernel k)
{
    PyObject *name = NULL;
#if HOOK_SUPPORTED
    pthread_mutex_lock(&names_lock);
#endif
    NameSlot *s = name_slot(k, 0);
    if (s != NULL) {
        name = s->name;
        Py_INCREF(name);
    }
#if HOOK_SUPPORTED
    pthread_mutex_unlock(&names_lock);
#endif
    if (name != NULL)
        return name;
    info_fn get = (info_fn)original(k, S_GET_KERNEL_INFO);
    char buf[256];
    char *text = buf;
    size_t size = 0;
    if (get(k, CL_KERNEL_FUNCTION_NAME, 0, NULL, &size) != CL_SUCCESS || size == 0) {
        name = PyUnicode_FromString("[kernel]");
    }
    else {
        if (size > sizeof buf)
            text = (char *)malloc(size);
        if (text == NULL)
            return PyErr_NoMemory();
        if (get(k, CL_KERNEL_FUNCTION_NAME, size, text, NULL) != CL_SUCCESS)
            name = PyUnicode_FromString("[kernel]");
        else
            name = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strnlen(text, size), "replace");
        if (text != buf)
            free(text);
    }
    if (name == NULL)
        return NULL;
#if HOOK_SUPPORTED
    pthread_mutex_lock(&names_lock);
#endif
    if ((names_len + 1) * 2 > names_cap && names_grow() < 0) {
#if HOOK_SUPPORTED
        pthread_mutex_unlock(&names_lock);
#endif
        return name; /* uncached: asked again next time */
    }
    s = name_slot(k, 1);
    if (s != NULL && s->key != k) {
        if (s->key == NULL)
            names_len++;
        s->key = k;
        s->name = name;
        Py_INCREF(name);
    }
#if HOOK_SUPPORTED
    pthread_mutex_unlock(&names_lock);
#endif
    return name;
}

/* -- the token: one reference to a cl_event ------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cl_event event;
} Event;

static PyObject *EventType;

static void
ev_dealloc(Event *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (self->event != NULL)
        ((event_fn)original(self->event, S_RELEASE_EVENT))(self->event);
    n_events--;
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
ev_int_ptr(Event *self, void *closure)
{
    return PyLong_FromVoidPtr(self->event);
}

static PyObject *
ev_profiling_info(Event *self, PyObject *param)
{
    long p = PyLong_AsLong(param);
    if (p == -1 && PyErr_Occurred())
        return NULL;
    cl_ulong v = 0;
    cl_int err = ((info_fn)original(self->event, S_GET_EVENT_PROFILING_INFO))(
        self->event, (cl_uint)p, sizeof v, &v, NULL);
    if (err != CL_SUCCESS)
        return PyErr_Format(PyExc_RuntimeError,
                            "clGetEventProfilingInfo failed: %d (the command is not complete, "
                            "or its queue does not profile)",
                            (int)err);
    return PyLong_FromUnsignedLongLong(v);
}

/* get_info: the execution status here; anything else through PyOpenCL (`info`). */
static PyObject *
ev_info(Event *self, PyObject *param)
{
    long p = PyLong_AsLong(param);
    if (p == -1 && PyErr_Occurred())
        return NULL;
    if (p == CL_EVENT_COMMAND_EXECUTION_STATUS) {
        cl_int status = 0;
        cl_int err = ((info_fn)original(self->event, S_GET_EVENT_INFO))(
            self->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
        if (err != CL_SUCCESS)
            return PyErr_Format(PyExc_RuntimeError, "clGetEventInfo failed: %d", (int)err);
        return PyLong_FromLong(status);
    }
    PyObject *h = PyLong_FromVoidPtr(self->event);
    if (h == NULL)
        return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(py_info, h, param, NULL);
    Py_DECREF(h);
    return r;
}

static PyGetSetDef ev_getset[] = {
    {"int_ptr", (getter)ev_int_ptr, NULL, "the cl_event, as an int (as PyOpenCL's)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef ev_methods[] = {
    {"get_profiling_info", (PyCFunction)ev_profiling_info, METH_O,
     "a CL_PROFILING_COMMAND_* value, in ns"},
    {"get_info", (PyCFunction)ev_info, METH_O, "a CL_EVENT_* value"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot ev_slots[] = {
    {Py_tp_dealloc, ev_dealloc},
    {Py_tp_getset, ev_getset},
    {Py_tp_methods, ev_methods},
    {Py_tp_doc, "A cl_event the OpenCL hook saw (kprof holds one reference until it is dropped)."},
    {0, NULL},
};

static PyType_Spec ev_spec = {
    "kprof_opencl._clhook.Event", sizeof(Event), 0, Py_TPFLAGS_DEFAULT, ev_slots,
};

/* -- recording ------------------------------------------------------------------------------- */

/* The (queue, profiles) pair for a cl_command_queue: a borrowed reference, or NULL with an
 * exception set. Under the GIL. */
static PyObject *
queue_entry(cl_command_queue q)
{
    PyObject *h = PyLong_FromVoidPtr(q);
    if (h == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(queues, h);
    if (entry == NULL && !PyErr_Occurred()) {
        entry = PyObject_CallFunctionObjArgs(py_adopt, h, NULL);
        if (entry != NULL) {
            if (!PyTuple_Check(entry) || PyTuple_Size(entry) != 2) {
                PyErr_SetString(PyExc_TypeError, "adopt() must return (queue, profiles)");
                Py_CLEAR(entry);
            }
            else if (PyDict_SetItem(queues, h, entry) < 0) {
                Py_CLEAR(entry);
            }
            else {
                Py_DECREF(entry); /* the dict holds it */
            }
        }
    }
    Py_DECREF(h);
    return entry;
}

/* After a successful enqueue: hand it to the calling thread's recorder. `ev` is the command's
 * event; `own` says kprof created it (the caller passed none), else it is retained here. */
static void
record(cl_command_queue q, int kind, int name_ix, cl_kernel k, int64_t nbytes, int64_t t0,
       cl_event ev, int own)
{
    int64_t t1 = now_ns();
    if (!Py_IsInitialized()) {
        if (own)
            ((event_fn)original(ev, S_RELEASE_EVENT))(ev);
        return;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *et, *evalue, *etb;
    PyErr_Fetch(&et, &evalue, &etb); /* a caller's pending exception is left as it was */
    PyObject *rec = NULL, *name = NULL, *tok = NULL, *a = NULL, *b = NULL, *n = NULL,
             *r = NULL, *launch = NULL, *entry = NULL;
    n_seen++;
    if (dead_len)
        names_flush_dead();
    if (!hook_on || queues == NULL) {
        if (own)
            ((event_fn)original(ev, S_RELEASE_EVENT))(ev);
        goto done;
    }
    rec = PyObject_CallNoArgs(py_active);
    if (rec == NULL || rec == Py_None) {
        if (own)
            ((event_fn)original(ev, S_RELEASE_EVENT))(ev);
        goto done;
    }
    Event *e = PyObject_New(Event, (PyTypeObject *)EventType);
    if (e == NULL) {
        if (own)
            ((event_fn)original(ev, S_RELEASE_EVENT))(ev);
        goto done;
    }
    if (!own)
        ((event_fn)original(ev, S_RETAIN_EVENT))(ev);
    e->event = ev;
    n_events++;
    tok = (PyObject *)e;
    if (kind == K_KERNEL) {
        name = kernel_name(k);
    }
    else {
        name = py_names[name_ix];
        Py_INCREF(name);
    }
    if (name == NULL)
        goto done;
    /* Held: the profile's end on another thread may clear the cache while the GIL is let go. */
    entry = queue_entry(q);
    if (entry == NULL)
        goto done;
    Py_INCREF(entry);
    PyObject *queue = PyTuple_GetItem(entry, 0);
    int profiles = PyObject_IsTrue(PyTuple_GetItem(entry, 1));
    a = PyLong_FromLongLong(t0);
    b = PyLong_FromLongLong(t1);
    n = PyLong_FromLongLong(nbytes);
    if (a == NULL || b == NULL || n == NULL || PyObject_SetAttr(py_current, str_queue, queue) < 0)
        goto done;
    if (profiles == 1) {
        launch = PyObject_GetAttr(rec, str_launch);
        if (launch == NULL)
            goto done;
        r = PyObject_CallFunctionObjArgs(launch, py_backend, py_kinds[kind], name, queue, a, b,
                                         tok, tok, n, NULL);
    }
    else {
        r = PyObject_CallFunctionObjArgs(py_other, rec, py_kinds[kind], name, queue, a, b, tok,
                                         n, NULL);
    }
    if (r != NULL)
        n_recorded++;
done:
    if (PyErr_Occurred()) /* never into the caller: it is C, or Python mid-call */
        PyErr_WriteUnraisable(py_backend);
    Py_XDECREF(r);
    Py_XDECREF(entry);
    Py_XDECREF(launch);
    Py_XDECREF(n);
    Py_XDECREF(b);
    Py_XDECREF(a);
    Py_XDECREF(tok);
    Py_XDECREF(name);
    Py_XDECREF(rec);
    PyErr_Restore(et, evalue, etb);
    PyGILState_Release(gil);
}

/* The common shape of every hooked enqueue: pass through when quiet; else give the command an
 * event if the caller did not ask for one, and record it once enqueued. */
#define ENQUEUE_BODY(SLOT, FNTYPE, CALL_ARGS, KIND, NAME_IX, KERNEL, NBYTES)                 \
    FNTYPE f = (FNTYPE)original(q, SLOT);                                                     \
    if (quiet_depth || !hook_on)                                                              \
        return f CALL_ARGS;                                                                   \
    cl_event own = NULL;                                                                      \
    cl_event *user_event = event;                                                             \
    if (event == NULL)                                                                        \
        event = &own;                                                                         \
    int64_t t0 = now_ns();                                                                    \
    cl_int err = f CALL_ARGS;                                                                 \
    if (err == CL_SUCCESS && *event != NULL)                                                  \
        record(q, KIND, NAME_IX, KERNEL, NBYTES, t0, *event, user_event == NULL);             \
    return err;

static int64_t
region_bytes(const size_t *region)
{
    return region == NULL ? -1 : (int64_t)(region[0] * region[1] * region[2]);
}

static int64_t
image_bytes(cl_mem image, const size_t *region)
{
    size_t element = 0;
    if (region == NULL || image == NULL
        || ((image_info_fn)original(image, S_GET_IMAGE_INFO))(image, CL_IMAGE_ELEMENT_SIZE,
                                                              sizeof element, &element, NULL)
               != CL_SUCCESS)
        return -1;
    return region_bytes(region) * (int64_t)element;
}

typedef cl_int(CL_API_CALL *ndrange_t)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                       const size_t *, const size_t *, cl_uint, const cl_event *,
                                       cl_event *);
static cl_int CL_API_CALL
h_ndrange(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off, const size_t *gws,
          const size_t *lws, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_NDRANGE, ndrange_t, (q, k, dim, off, gws, lws, nw, wl, event), K_KERNEL, 0,
                 k, -1)
}

typedef cl_int(CL_API_CALL *rw_buffer_t)(cl_command_queue, cl_mem, cl_uint, size_t, size_t,
                                         void *, cl_uint, const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_read_buffer(cl_command_queue q, cl_mem buf, cl_uint blocking, size_t off, size_t cb, void *ptr,
              cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_READ_BUFFER, rw_buffer_t, (q, buf, blocking, off, cb, ptr, nw, wl, event),
                 K_COPY, N_D2H, NULL, (int64_t)cb)
}
static cl_int CL_API_CALL
h_write_buffer(cl_command_queue q, cl_mem buf, cl_uint blocking, size_t off, size_t cb,
               void *ptr, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_WRITE_BUFFER, rw_buffer_t, (q, buf, blocking, off, cb, ptr, nw, wl, event),
                 K_COPY, N_H2D, NULL, (int64_t)cb)
}

typedef cl_int(CL_API_CALL *copy_buffer_t)(cl_command_queue, cl_mem, cl_mem, size_t, size_t,
                                           size_t, cl_uint, const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_copy_buffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, size_t dof, size_t cb,
              cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_COPY_BUFFER, copy_buffer_t, (q, src, dst, so, dof, cb, nw, wl, event), K_COPY,
                 N_D2D, NULL, (int64_t)cb)
}

typedef cl_int(CL_API_CALL *rw_rect_t)(cl_command_queue, cl_mem, cl_uint, const size_t *,
                                       const size_t *, const size_t *, size_t, size_t, size_t,
                                       size_t, void *, cl_uint, const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_read_rect(cl_command_queue q, cl_mem buf, cl_uint blocking, const size_t *bo, const size_t *ho,
            const size_t *region, size_t brp, size_t bsp, size_t hrp, size_t hsp, void *ptr,
            cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_READ_BUFFER_RECT, rw_rect_t,
                 (q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nw, wl, event),
                 K_COPY, N_D2H, NULL, region_bytes(region))
}
static cl_int CL_API_CALL
h_write_rect(cl_command_queue q, cl_mem buf, cl_uint blocking, const size_t *bo,
             const size_t *ho, const size_t *region, size_t brp, size_t bsp, size_t hrp,
             size_t hsp, void *ptr, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_WRITE_BUFFER_RECT, rw_rect_t,
                 (q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nw, wl, event),
                 K_COPY, N_H2D, NULL, region_bytes(region))
}

typedef cl_int(CL_API_CALL *copy_rect_t)(cl_command_queue, cl_mem, cl_mem, const size_t *,
                                         const size_t *, const size_t *, size_t, size_t, size_t,
                                         size_t, cl_uint, const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_copy_rect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so, const size_t *dof,
            const size_t *region, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint nw,
            const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_COPY_BUFFER_RECT, copy_rect_t,
                 (q, src, dst, so, dof, region, srp, ssp, drp, dsp, nw, wl, event), K_COPY, N_D2D,
                 NULL, region_bytes(region))
}

typedef cl_int(CL_API_CALL *rw_image_t)(cl_command_queue, cl_mem, cl_uint, const size_t *,
                                        const size_t *, size_t, size_t, void *, cl_uint,
                                        const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_read_image(cl_command_queue q, cl_mem img, cl_uint blocking, const size_t *origin,
             const size_t *region, size_t rp, size_t sp, void *ptr, cl_uint nw,
             const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_READ_IMAGE, rw_image_t,
                 (q, img, blocking, origin, region, rp, sp, ptr, nw, wl, event), K_COPY, N_D2H,
                 NULL, image_bytes(img, region))
}
static cl_int CL_API_CALL
h_write_image(cl_command_queue q, cl_mem img, cl_uint blocking, const size_t *origin,
              const size_t *region, size_t rp, size_t sp, void *ptr, cl_uint nw,
              const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_WRITE_IMAGE, rw_image_t,
                 (q, img, blocking, origin, region, rp, sp, ptr, nw, wl, event), K_COPY, N_H2D,
                 NULL, image_bytes(img, region))
}

typedef cl_int(CL_API_CALL *copy_image_t)(cl_command_queue, cl_mem, cl_mem, const size_t *,
                                          const size_t *, const size_t *, cl_uint,
                                          const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_copy_image(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so, const size_t *dof,
             const size_t *region, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_COPY_IMAGE, copy_image_t, (q, src, dst, so, dof, region, nw, wl, event),
                 K_COPY, N_D2D, NULL, image_bytes(src, region))
}

typedef cl_int(CL_API_CALL *image_to_buffer_t)(cl_command_queue, cl_mem, cl_mem, const size_t *,
                                               const size_t *, size_t, cl_uint, const cl_event *,
                                               cl_event *);
static cl_int CL_API_CALL
h_image_to_buffer(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
                  const size_t *region, size_t dof, cl_uint nw, const cl_event *wl,
                  cl_event *event)
{
    ENQUEUE_BODY(S_COPY_IMAGE_TO_BUFFER, image_to_buffer_t,
                 (q, src, dst, so, region, dof, nw, wl, event), K_COPY, N_D2D, NULL,
                 image_bytes(src, region))
}

typedef cl_int(CL_API_CALL *buffer_to_image_t)(cl_command_queue, cl_mem, cl_mem, size_t,
                                               const size_t *, const size_t *, cl_uint,
                                               const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_buffer_to_image(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, const size_t *dof,
                  const size_t *region, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_COPY_BUFFER_TO_IMAGE, buffer_to_image_t,
                 (q, src, dst, so, dof, region, nw, wl, event), K_COPY, N_D2D, NULL,
                 image_bytes(dst, region))
}

typedef cl_int(CL_API_CALL *fill_buffer_t)(cl_command_queue, cl_mem, const void *, size_t,
                                           size_t, size_t, cl_uint, const cl_event *,
                                           cl_event *);
static cl_int CL_API_CALL
h_fill_buffer(cl_command_queue q, cl_mem buf, const void *pattern, size_t ps, size_t off,
              size_t size, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_FILL_BUFFER, fill_buffer_t, (q, buf, pattern, ps, off, size, nw, wl, event),
                 K_COPY, N_FILL, NULL, (int64_t)size)
}

typedef cl_int(CL_API_CALL *fill_image_t)(cl_command_queue, cl_mem, const void *,
                                          const size_t *, const size_t *, cl_uint,
                                          const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_fill_image(cl_command_queue q, cl_mem img, const void *color, const size_t *origin,
             const size_t *region, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_FILL_IMAGE, fill_image_t, (q, img, color, origin, region, nw, wl, event),
                 K_COPY, N_FILL, NULL, image_bytes(img, region))
}

typedef cl_int(CL_API_CALL *svm_memcpy_t)(cl_command_queue, cl_uint, void *, const void *,
                                          size_t, cl_uint, const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_svm_memcpy(cl_command_queue q, cl_uint blocking, void *dst, const void *src, size_t size,
             cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_SVM_MEMCPY, svm_memcpy_t, (q, blocking, dst, src, size, nw, wl, event),
                 K_COPY, N_SVM, NULL, (int64_t)size)
}

typedef cl_int(CL_API_CALL *svm_memfill_t)(cl_command_queue, void *, const void *, size_t,
                                           size_t, cl_uint, const cl_event *, cl_event *);
static cl_int CL_API_CALL
h_svm_memfill(cl_command_queue q, void *ptr, const void *pattern, size_t ps, size_t size,
              cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(S_SVM_MEMFILL, svm_memfill_t, (q, ptr, pattern, ps, size, nw, wl, event), K_COPY,
                 N_FILL, NULL, (int64_t)size)
}

/* -- queue creation: profiling added, as asked otherwise ------------------------------------- */

typedef cl_command_queue(CL_API_CALL *create_queue_t)(cl_context, cl_device_id, cl_bitfield,
                                                      cl_int *);
static cl_command_queue CL_API_CALL
h_create_queue(cl_context ctx, cl_device_id dev, cl_bitfield props, cl_int *errcode)
{
    create_queue_t f = (create_queue_t)original(ctx, S_CREATE_QUEUE);
    if (hook_on && !(props & CL_QUEUE_ON_DEVICE) && !(props & CL_QUEUE_PROFILING_ENABLE)) {
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

typedef cl_command_queue(CL_API_CALL *create_queue_props_t)(cl_context, cl_device_id,
                                                            const cl_queue_properties *,
                                                            cl_int *);
static cl_command_queue CL_API_CALL
h_create_queue_props(cl_context ctx, cl_device_id dev, const cl_queue_properties *props,
                     cl_int *errcode)
{
    create_queue_props_t f = (create_queue_props_t)original(ctx, S_CREATE_QUEUE_WITH_PROPERTIES);
    if (hook_on) {
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

typedef cl_int(CL_API_CALL *release_kernel_t)(cl_kernel);
static cl_int CL_API_CALL
h_release_kernel(cl_kernel k)
{
    release_kernel_t f = (release_kernel_t)original(k, S_RELEASE_KERNEL);
#if HOOK_SUPPORTED
    pthread_mutex_lock(&names_lock);
    NameSlot *s = name_slot(k, 0);
    if (s != NULL) {
        names_bury(s->name);
        s->key = TOMB; /* still counted in names_len: the load that makes the table grow */
        s->name = NULL;
    }
    pthread_mutex_unlock(&names_lock);
#endif
    return f(k);
}

/* -- installing ------------------------------------------------------------------------------ */

typedef struct {
    int slot;
    void *fn;
    int since; /* the OpenCL version (major*10+minor) that added the entry */
    const char *name;
} Hook;

static const Hook HOOKS[] = {
    {S_NDRANGE, (void *)h_ndrange, 10, "clEnqueueNDRangeKernel"},
    {S_READ_BUFFER, (void *)h_read_buffer, 10, "clEnqueueReadBuffer"},
    {S_WRITE_BUFFER, (void *)h_write_buffer, 10, "clEnqueueWriteBuffer"},
    {S_COPY_BUFFER, (void *)h_copy_buffer, 10, "clEnqueueCopyBuffer"},
    {S_READ_IMAGE, (void *)h_read_image, 10, "clEnqueueReadImage"},
    {S_WRITE_IMAGE, (void *)h_write_image, 10, "clEnqueueWriteImage"},
    {S_COPY_IMAGE, (void *)h_copy_image, 10, "clEnqueueCopyImage"},
    {S_COPY_IMAGE_TO_BUFFER, (void *)h_image_to_buffer, 10, "clEnqueueCopyImageToBuffer"},
    {S_COPY_BUFFER_TO_IMAGE, (void *)h_buffer_to_image, 10, "clEnqueueCopyBufferToImage"},
    {S_CREATE_QUEUE, (void *)h_create_queue, 10, "clCreateCommandQueue"},
    {S_RELEASE_KERNEL, (void *)h_release_kernel, 10, "clReleaseKernel"},
    {S_READ_BUFFER_RECT, (void *)h_read_rect, 11, "clEnqueueReadBufferRect"},
    {S_WRITE_BUFFER_RECT, (void *)h_write_rect, 11, "clEnqueueWriteBufferRect"},
    {S_COPY_BUFFER_RECT, (void *)h_copy_rect, 11, "clEnqueueCopyBufferRect"},
    {S_FILL_BUFFER, (void *)h_fill_buffer, 12, "clEnqueueFillBuffer"},
    {S_FILL_IMAGE, (void *)h_fill_image, 12, "clEnqueueFillImage"},
    {S_CREATE_QUEUE_WITH_PROPERTIES, (void *)h_create_queue_props, 20,
     "clCreateCommandQueueWithProperties"},
    {S_SVM_MEMCPY, (void *)h_svm_memcpy, 20, "clEnqueueSVMMemcpy"},
    {S_SVM_MEMFILL, (void *)h_svm_memfill, 20, "clEnqueueSVMMemFill"},
};
#define N_HOOKS ((int)(sizeof HOOKS / sizeof HOOKS[0]))

static void *
address_of(PyObject *arg)
{
    void *p = PyLong_AsVoidPtr(arg);
    if (p == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a NULL address");
    return p;
}

/* table_address(handle) -> the address of the dispatch table of a cl object. */
static PyObject *
py_table_address(PyObject *module, PyObject *arg)
{
    void *obj = address_of(arg);
    if (obj == NULL)
        return NULL;
    return PyLong_FromVoidPtr(table_of(obj));
}

/* bind(active, backend, adopt, other, info, current, kinds, row_names) */
static PyObject *
py_bind(PyObject *module, PyObject *args)
{
    PyObject *active, *backend, *adopt, *other, *info, *current, *kinds, *row_names;
    if (!PyArg_ParseTuple(args, "OOOOOOO!O!:bind", &active, &backend, &adopt, &other, &info,
                          &current, &PyTuple_Type, &kinds, &PyTuple_Type, &row_names))
        return NULL;
    if (PyTuple_Size(kinds) != 2 || PyTuple_Size(row_names) != 5) {
        PyErr_SetString(PyExc_ValueError, "bind() takes 2 kinds and 5 row names");
        return NULL;
    }
    PyObject **slots[] = {&py_active, &py_backend, &py_adopt, &py_other, &py_info,
                          &py_current};
    PyObject *values[] = {active, backend, adopt, other, info, current};
    for (int i = 0; i < 6; i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(*slots[i], values[i]);
    }
    for (int i = 0; i < 2; i++) {
        PyObject *v = PyTuple_GetItem(kinds, i);
        Py_INCREF(v);
        Py_XSETREF(py_kinds[i], v);
    }
    for (int i = 0; i < 5; i++) {
        PyObject *v = PyTuple_GetItem(row_names, i);
        Py_INCREF(v);
        Py_XSETREF(py_names[i], v);
    }
    Py_RETURN_NONE;
}

/* -- swapping a table's entries: one set of functions for the enqueue and the memory hooks ---- */

/* The table at `t`, added to `tables` on first sight; NULL (an exception set) when full. */
static Table *
table_for(void **t)
{
    Table *h = find_table(t);
    if (h != NULL)
        return h;
    if (n_tables == MAX_TABLES) {
        PyErr_SetString(PyExc_RuntimeError, "too many OpenCL dispatch tables");
        return NULL;
    }
    h = &tables[n_tables];
    memset(h, 0, sizeof *h);
    h->table = t;
    n_tables++;
    return h;
}

/* Saves the ICD's entry of each of `hooks` that `version` has, before any entry changes (a
 * thread entering a hooked function must find its original); returns their names, a new list,
 * or NULL with an exception set. */
static PyObject *
save_originals(void **t, Table *h, const Hook *hooks, int n, int version)
{
    PyObject *done = PyList_New(0);
    if (done == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        const Hook *k = &hooks[i];
        if (k->since > version || t[k->slot] == NULL)
            continue;
        if (t[k->slot] != k->fn) /* never save ourselves as the original */
            h->orig[k->slot] = t[k->slot];
        PyObject *s = PyUnicode_FromString(k->name);
        if (s == NULL || PyList_Append(done, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(done);
            return NULL;
        }
        Py_DECREF(s);
    }
    return done;
}

/* Points each saved entry of `hooks` at its hook. Each store is one aligned pointer: atomic on
 * the platforms kprof supports, so a concurrent caller calls either the ICD or the hook, never
 * a torn value. */
static void
swap_in(void **t, const Table *h, const Hook *hooks, int n, int version)
{
    for (int i = 0; i < n; i++) {
        const Hook *k = &hooks[i];
        if (h->orig[k->slot] != NULL && k->since <= version)
            __atomic_store_n(&t[k->slot], k->fn, __ATOMIC_SEQ_CST);
    }
}

/* Puts each entry of `hooks` that still holds its hook back to the original; returns the names
 * of those someone else replaced meanwhile (left as they are), a new list, or NULL. */
static PyObject *
swap_out(void **t, const Table *h, const Hook *hooks, int n)
{
    PyObject *conflicts = PyList_New(0);
    if (conflicts == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        const Hook *k = &hooks[i];
        if (h->orig[k->slot] == NULL)
            continue;
        void *expected = k->fn;
        if (!__atomic_compare_exchange_n(&t[k->slot], &expected, h->orig[k->slot], 0,
                                         __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            PyObject *s = PyUnicode_FromString(k->name);
            if (s != NULL) {
                PyList_Append(conflicts, s);
                Py_DECREF(s);
            }
        }
    }
    return conflicts;
}

/* hook(table_address, version) -> names hooked. The caller checked the table is the ICD's and
 * writable (kprof_opencl/hook.py); entries past the ICD's OpenCL version are left alone. */
static PyObject *
py_hook(PyObject *module, PyObject *args)
{
    PyObject *addr;
    int version;
    if (!PyArg_ParseTuple(args, "Oi:hook", &addr, &version))
        return NULL;
    if (!HOOK_SUPPORTED) {
        PyErr_SetString(PyExc_NotImplementedError, "the hook is not built for this platform");
        return NULL;
    }
    if (py_active == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    void **t = (void **)address_of(addr);
    if (t == NULL)
        return NULL;
    Table *h = table_for(t);
    if (h == NULL)
        return NULL;
    if (h->hooked) {
        PyErr_SetString(PyExc_RuntimeError, "this dispatch table is hooked already");
        return NULL;
    }
    if (queues == NULL && (queues = PyDict_New()) == NULL)
        return NULL;
    PyObject *done = save_originals(t, h, HOOKS, N_HOOKS, version);
    if (done == NULL)
        return NULL;
    swap_in(t, h, HOOKS, N_HOOKS, version);
    h->hooked = 1;
    hook_on = 1;
    return done;
}

static void release_if_idle(void);

/* unhook(table_address) -> names someone else replaced meanwhile (left as they are). */
static PyObject *
py_unhook(PyObject *module, PyObject *addr)
{
    void **t = (void **)address_of(addr);
    if (t == NULL)
        return NULL;
    Table *h = find_table(t);
    if (h == NULL || !h->hooked) {
        PyErr_SetString(PyExc_RuntimeError, "this dispatch table is not hooked");
        return NULL;
    }
    PyObject *conflicts = swap_out(t, h, HOOKS, N_HOOKS);
    if (conflicts == NULL)
        return NULL;
    h->hooked = 0;
    release_if_idle();
    return conflicts;
}

/* -- the LD_PRELOAD interposer (_clpreload.c), where `kprof run` preloaded it ---------------- */

typedef void (*attach_fn)(void *const *);
static int preload_attached;

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
static PyObject *
py_preloaded(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(preload_entry() != NULL);
}

/* attach_preload(version) -> entries attached: the interposer calls the hooked functions. */
static PyObject *
py_attach_preload(PyObject *module, PyObject *args)
{
    int version;
    if (!PyArg_ParseTuple(args, "i:attach_preload", &version))
        return NULL;
    attach_fn attach = preload_entry();
    if (attach == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kprof's OpenCL interposer is not preloaded");
        return NULL;
    }
    if (py_active == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (queues == NULL && (queues = PyDict_New()) == NULL)
        return NULL;
    void *fns[N_SLOTS] = {NULL};
    PyObject *done = PyList_New(0);
    if (done == NULL)
        return NULL;
    for (int i = 0; i < N_HOOKS; i++) {
        if (HOOKS[i].since > version)
            continue;
        fns[HOOKS[i].slot] = HOOKS[i].fn;
        PyObject *s = PyUnicode_FromString(HOOKS[i].name);
        if (s == NULL || PyList_Append(done, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(done);
            return NULL;
        }
        Py_DECREF(s);
    }
    hook_on = 1;
    preload_attached = 1;
    attach(fns);
    return done;
}

static PyObject *
py_detach_preload(PyObject *module, PyObject *unused)
{
    attach_fn attach = preload_entry();
    if (attach != NULL)
        attach(NULL);
    preload_attached = 0;
    release_if_idle();
    Py_RETURN_NONE;
}

/* When nothing is hooked or attached any more: off, and the caches let go. */
static void
release_if_idle(void)
{
    int any = preload_attached;
    for (int i = 0; i < n_tables; i++)
        any |= tables[i].hooked;
    if (!any) {
        hook_on = 0;
        /* The queue objects kprof made are let go; recorders hold their own references. */
        Py_CLEAR(queues);
        names_flush_dead();
#if HOOK_SUPPORTED
        pthread_mutex_lock(&names_lock);
#endif
        NameSlot *old = names;
        size_t cap = names_cap;
        names = NULL;
        names_cap = names_len = 0;
#if HOOK_SUPPORTED
        pthread_mutex_unlock(&names_lock);
#endif
        for (size_t i = 0; i < cap; i++)
            if (old[i].key != NULL && old[i].key != TOMB)
                Py_DECREF(old[i].name);
        free(old);
    }
}

/* -- stamp(event): when a command without profiling ran, from the driver's callbacks --------
 * A queue created without CL_QUEUE_PROFILING_ENABLE has no device times, but the driver calls
 * back when each command becomes CL_RUNNING and CL_COMPLETE (clSetEventCallback, OpenCL 1.1):
 * kprof_opencl/observed.py stamps both on the host clock. The data outlives the Python object
 * until both callbacks ran (the spec calls each exactly once, with an error status if the
 * command failed). */

typedef struct {
    int refs;       /* the Python object and each callback still to come */
    int64_t begin;  /* when CL_RUNNING was reached, or 0 */
    int64_t armed;  /* when both callbacks were registered: a CL_RUNNING call before this came
                     * at registration (the command was running already): no start time */
    int64_t end;    /* when CL_COMPLETE (or an error) was reached, or 0 */
    int status;     /* CL_COMPLETE (0) or a negative error */
    int done;
} StampData;

static void
stamp_unref(StampData *d)
{
    if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(d);
}

static void CL_API_CALL
on_running(cl_event ev, cl_int status, void *user)
{
    StampData *d = (StampData *)user;
    __atomic_store_n(&d->begin, now_ns(), __ATOMIC_RELEASE);
    stamp_unref(d);
}

static void CL_API_CALL
on_complete(cl_event ev, cl_int status, void *user)
{
    StampData *d = (StampData *)user;
    d->end = now_ns();
    d->status = status;
    __atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
    stamp_unref(d);
}

typedef struct {
    PyObject_HEAD
    StampData *data;
} Stamp;

static PyObject *StampType;

static void
st_dealloc(Stamp *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (self->data != NULL)
        stamp_unref(self->data);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* read() -> None until the command completed, then (status, begin, end): begin is 0 when the
 * driver's CL_RUNNING call does not say when the command began (it was running or done before
 * the callbacks were registered, or the driver calls back late). */
static PyObject *
st_read(Stamp *self, PyObject *unused)
{
    StampData *d = self->data;
    if (!__atomic_load_n(&d->done, __ATOMIC_ACQUIRE))
        Py_RETURN_NONE;
    int64_t begin = __atomic_load_n(&d->begin, __ATOMIC_ACQUIRE);
    int64_t armed = __atomic_load_n(&d->armed, __ATOMIC_ACQUIRE);
    if (begin > d->end || begin <= armed)
        begin = 0;
    return Py_BuildValue("iLL", d->status, (long long)begin, (long long)d->end);
}

static PyMethodDef st_methods[] = {
    {"read", (PyCFunction)st_read, METH_NOARGS,
     "None until complete, then (status, begin_ns, end_ns) on perf_counter_ns"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot st_slots[] = {
    {Py_tp_dealloc, st_dealloc},
    {Py_tp_methods, st_methods},
    {Py_tp_doc, "When one OpenCL command ran, as the driver's callbacks saw it."},
    {0, NULL},
};

static PyType_Spec st_spec = {
    "kprof_opencl._clhook.Stamp", sizeof(Stamp), 0, Py_TPFLAGS_DEFAULT, st_slots,
};

typedef cl_int(CL_API_CALL *set_callback_t)(cl_event, cl_int,
                                            void(CL_API_CALL *)(cl_event, cl_int, void *),
                                            void *);

/* stamp(event_handle) -> Stamp, or None where the driver refuses the callbacks. */
static PyObject *
py_stamp(PyObject *module, PyObject *arg)
{
    cl_event ev = (cl_event)address_of(arg);
    if (ev == NULL)
        return NULL;
    StampData *d = (StampData *)calloc(1, sizeof(StampData));
    if (d == NULL)
        return PyErr_NoMemory();
    set_callback_t set = (set_callback_t)original(ev, S_SET_EVENT_CALLBACK);
    d->refs = 3;
    d->armed = INT64_MAX; /* until both are registered, a CL_RUNNING call tells nothing */
    if (set(ev, CL_RUNNING_STATUS, on_running, d) != CL_SUCCESS)
        d->refs--; /* no start: observed.py falls back to the launch and the queue */
    if (set(ev, CL_COMPLETE_STATUS, on_complete, d) != CL_SUCCESS) {
        /* Without the completion nothing can be stamped; a CL_RUNNING callback may still come
         * and must find the data alive: it is let go of through the count. */
        stamp_unref(d);
        stamp_unref(d);
        Py_RETURN_NONE;
    }
    __atomic_store_n(&d->armed, now_ns(), __ATOMIC_RELEASE);
    Stamp *self = PyObject_New(Stamp, (PyTypeObject *)StampType);
    if (self == NULL) {
        stamp_unref(d);
        return NULL;
    }
    self->data = d;
    return (PyObject *)self;
}

/* -- quiet(fn): calls the hook leaves to PyOpenCL's capture ------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
} Quiet;

static PyObject *QuietType;

static int
qt_traverse(Quiet *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->fn);
    return 0;
}

static int
qt_clear(Quiet *self)
{
    Py_CLEAR(self->fn);
    return 0;
}

static void
qt_dealloc(Quiet *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    qt_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
qt_call(Quiet *self, PyObject *args, PyObject *kwargs)
{
    quiet_depth++;
    PyObject *r = PyObject_Call(self->fn, args, kwargs);
    quiet_depth--;
    return r;
}

static PyObject *
qt_get_wrapped(Quiet *self, void *closure)
{
    Py_INCREF(self->fn);
    return self->fn;
}

static PyObject *
qt_get_doc(Quiet *self, void *closure)
{
    return PyObject_GetAttrString(self->fn, "__doc__");
}

static PyObject *
qt_get_name(Quiet *self, void *closure)
{
    return PyObject_GetAttrString(self->fn, "__name__");
}

static PyGetSetDef qt_getset[] = {
    {"__wrapped__", (getter)qt_get_wrapped, NULL, "the function called", NULL},
    {"__doc__", (getter)qt_get_doc, NULL, NULL, NULL},
    {"__name__", (getter)qt_get_name, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot qt_slots[] = {
    {Py_tp_dealloc, qt_dealloc},
    {Py_tp_traverse, qt_traverse},
    {Py_tp_clear, qt_clear},
    {Py_tp_call, qt_call},
    {Py_tp_getset, qt_getset},
    {0, NULL},
};

static PyType_Spec qt_spec = {
    "kprof_opencl._clhook.Quiet", sizeof(Quiet), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    qt_slots,
};

static PyObject *
py_quiet(PyObject *module, PyObject *fn)
{
    Quiet *self = (Quiet *)PyType_GenericAlloc((PyTypeObject *)QuietType, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(fn);
    self->fn = fn;
    return (PyObject *)self;
}


/* -- device memory: buffers and SVM allocations, whoever makes them ----------------------------
 * clCreateBuffer and clSVMAlloc are hooked while a profile records memory (mem_hook): the
 * allocation is handed to Python (`py_mem_alloc`, under the GIL, on the creating thread, so
 * the recorder can take the Python caller's site) with the host time of the call. The end of a
 * buffer is its destruction, which the driver reports through clSetMemObjectDestructorCallback
 * (OpenCL 1.1) on a thread and under locks of its own: the callback only appends (address,
 * time) to `pending` under `mem_lock`, never touching Python; clSVMFree and clEnqueueSVMFree
 * append the same way. Python drains `pending` (mem_drain) before each allocation it is handed
 * (a freed handle may come back from the driver for the next buffer) and at the profile's end.
 * Sub-buffers (clCreateSubBuffer) are views of their parent's memory: not counted. A callback
 * registered in an earlier profile carries that profile's generation and is dropped.
 *
 * A buffer the program releases while commands that use it are in flight is destroyed when
 * they finish, on the driver's thread, a moment after the device's work is seen complete: so
 * clReleaseMemObject is hooked too, and the handles released lately are kept in a ring
 * (`released`, mem_released), whose live allocations the profile's end waits for (bounded)
 * instead of calling them live at the end. */

typedef struct {
    void *addr;
    int64_t t;
} MemFree;

static MemFree *pending;
static size_t pending_len, pending_cap;
static long long n_mem_dropped;
static uintptr_t mem_gen; /* the generation recording now; 0: none */
#define RELEASED_RING 4096
static void *released[RELEASED_RING]; /* the handles the program released lately */
static size_t released_n;             /* released this generation (the ring keeps the last) */
static PyObject *py_mem_alloc; /* alloc(context, address, nbytes, time_ns) */
static PyObject *py_mem_free;  /* free(address, time_ns) */
#if HOOK_SUPPORTED
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

static void
mem_push(void *addr, int64_t t, uintptr_t gen)
{
#if HOOK_SUPPORTED
    pthread_mutex_lock(&mem_lock);
    if (gen == mem_gen && gen != 0) {
        if (pending_len == pending_cap) {
            size_t cap = pending_cap ? pending_cap * 2 : 256;
            MemFree *p = (MemFree *)realloc(pending, cap * sizeof *p);
            if (p != NULL) {
                pending = p;
                pending_cap = cap;
            }
        }
        if (pending_len < pending_cap) {
            pending[pending_len].addr = addr;
            pending[pending_len].t = t;
            pending_len++;
        }
        else {
            n_mem_dropped++;
        }
    }
    pthread_mutex_unlock(&mem_lock);
#endif
}

static void CL_API_CALL
on_mem_destroyed(cl_mem mem, void *user)
{
    mem_push(mem, now_ns(), (uintptr_t)user);
}

/* mem_drain() -> [(address, time_ns), ...]: the ends seen since the last drain, in order. */
static PyObject *
py_mem_drain(PyObject *module, PyObject *unused)
{
#if HOOK_SUPPORTED
    pthread_mutex_lock(&mem_lock);
    MemFree *got = pending;
    size_t n = pending_len;
    pending = NULL;
    pending_len = pending_cap = 0;
    pthread_mutex_unlock(&mem_lock);
#else
    MemFree *got = NULL;
    size_t n = 0;
#endif
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out != NULL && i < n; i++) {
        PyObject *item = Py_BuildValue("(NL)", PyLong_FromVoidPtr(got[i].addr),
                                       (long long)got[i].t);
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SetItem(out, (Py_ssize_t)i, item);
    }
    free(got);
    return out;
}

/* Under no lock of the driver's: on the thread that made the allocation. The ends queued
 * so far go first (a freed handle may come back from the driver for this allocation). */
static void
mem_deliver(void *ctx, void *addr, size_t size, int64_t t)
{
    if (!Py_IsInitialized() || mem_gen == 0)
        return;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *et, *evalue, *etb;
    PyErr_Fetch(&et, &evalue, &etb);
    if (pending_len != 0 && py_mem_free != NULL) { /* a racy peek: a miss waits for the next */
#if HOOK_SUPPORTED
        pthread_mutex_lock(&mem_lock);
        MemFree *got = pending;
        size_t n = pending_len;
        pending = NULL;
        pending_len = pending_cap = 0;
        pthread_mutex_unlock(&mem_lock);
#else
        MemFree *got = NULL;
        size_t n = 0;
#endif
        for (size_t i = 0; i < n; i++) {
            PyObject *r = PyObject_CallFunction(py_mem_free, "NL", PyLong_FromVoidPtr(got[i].addr),
                                                (long long)got[i].t);
            if (r == NULL)
                PyErr_WriteUnraisable(py_mem_free);
            Py_XDECREF(r);
        }
        free(got);
    }
    if (py_mem_alloc != NULL) {
        PyObject *r = PyObject_CallFunction(py_mem_alloc, "NNnL", PyLong_FromVoidPtr(ctx),
                                            PyLong_FromVoidPtr(addr), (Py_ssize_t)size,
                                            (long long)t);
        if (r == NULL)
            PyErr_WriteUnraisable(py_mem_alloc);
        Py_XDECREF(r);
    }
    PyErr_Restore(et, evalue, etb);
    PyGILState_Release(gil);
}

typedef cl_mem(CL_API_CALL *create_buffer_t)(cl_context, cl_bitfield, size_t, void *, cl_int *);
typedef cl_int(CL_API_CALL *set_destructor_t)(cl_mem, void(CL_API_CALL *)(cl_mem, void *),
                                              void *);

static cl_mem CL_API_CALL
h_create_buffer(cl_context ctx, cl_bitfield flags, size_t size, void *host, cl_int *errcode)
{
    create_buffer_t f = (create_buffer_t)original(ctx, S_CREATE_BUFFER);
    uintptr_t gen = mem_gen;
    int64_t t = now_ns();
    cl_mem m = f(ctx, flags, size, host, errcode);
    if (m == NULL || gen == 0)
        return m;
    set_destructor_t set = (set_destructor_t)original(m, S_SET_MEM_DESTRUCTOR_CALLBACK);
    /* Without the callback its end would never be seen: then it is not counted at all. */
    if (set != NULL && set(m, on_mem_destroyed, (void *)gen) == CL_SUCCESS)
        mem_deliver(ctx, m, size, t);
    return m;
}

typedef cl_int(CL_API_CALL *release_mem_t)(cl_mem);

static cl_int CL_API_CALL
h_release_mem(cl_mem m)
{
    release_mem_t f = (release_mem_t)original(m, S_RELEASE_MEM_OBJECT);
#if HOOK_SUPPORTED
    if (m != NULL && mem_gen != 0) {
        pthread_mutex_lock(&mem_lock);
        if (mem_gen != 0)
            released[released_n++ % RELEASED_RING] = m;
        pthread_mutex_unlock(&mem_lock);
    }
#endif
    return f(m);
}

/* mem_released() -> [address, ...]: the handles released since the last call (at most the
 * ring's last RELEASED_RING), for the profile's end to wait for their destruction. */
static PyObject *
py_mem_released(PyObject *module, PyObject *unused)
{
    void *got[RELEASED_RING];
    size_t n = 0;
#if HOOK_SUPPORTED
    pthread_mutex_lock(&mem_lock);
    size_t total = released_n;
    n = total < RELEASED_RING ? total : RELEASED_RING;
    for (size_t i = 0; i < n; i++)
        got[i] = released[(total - n + i) % RELEASED_RING];
    released_n = 0;
    pthread_mutex_unlock(&mem_lock);
#endif
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out != NULL && i < n; i++) {
        PyObject *v = PyLong_FromVoidPtr(got[i]);
        if (v == NULL)
            Py_CLEAR(out);
        else
            PyList_SetItem(out, (Py_ssize_t)i, v);
    }
    return out;
}

typedef void *(CL_API_CALL *svm_alloc_t)(cl_context, cl_bitfield, size_t, cl_uint);
typedef void(CL_API_CALL *svm_free_t)(cl_context, void *);
typedef cl_int(CL_API_CALL *enqueue_svm_free_t)(cl_command_queue, cl_uint, void *[],
                                                void(CL_API_CALL *)(cl_command_queue, cl_uint,
                                                                    void *[], void *),
                                                void *, cl_uint, const cl_event *, cl_event *);

static void *CL_API_CALL
h_svm_alloc(cl_context ctx, cl_bitfield flags, size_t size, cl_uint alignment)
{
    svm_alloc_t f = (svm_alloc_t)original(ctx, S_SVM_ALLOC);
    int64_t t = now_ns();
    void *p = f(ctx, flags, size, alignment);
    if (p != NULL && mem_gen != 0)
        mem_deliver(ctx, p, size, t);
    return p;
}

static void CL_API_CALL
h_svm_free(cl_context ctx, void *ptr)
{
    svm_free_t f = (svm_free_t)original(ctx, S_SVM_FREE);
    if (ptr != NULL)
        mem_push(ptr, now_ns(), mem_gen);
    f(ctx, ptr);
}

/* Counted as freed when enqueued, as PyOpenCL's enqueue_release is: the driver frees the
 * memory when the queue gets there. */
static cl_int CL_API_CALL
h_enqueue_svm_free(cl_command_queue q, cl_uint n, void *ptrs[],
                   void(CL_API_CALL *fn)(cl_command_queue, cl_uint, void *[], void *), void *user,
                   cl_uint n_wait, const cl_event *wait, cl_event *event)
{
    enqueue_svm_free_t f = (enqueue_svm_free_t)original(q, S_ENQUEUE_SVM_FREE);
    int64_t t = now_ns();
    uintptr_t gen = mem_gen;
    cl_int err = f(q, n, ptrs, fn, user, n_wait, wait, event);
    if (err == CL_SUCCESS && ptrs != NULL)
        for (cl_uint i = 0; i < n; i++)
            if (ptrs[i] != NULL)
                mem_push(ptrs[i], t, gen);
    return err;
}

static const Hook MEM_HOOKS[] = {
    {S_CREATE_BUFFER, (void *)h_create_buffer, 11, "clCreateBuffer"},
    {S_RELEASE_MEM_OBJECT, (void *)h_release_mem, 11, "clReleaseMemObject"},
    {S_SVM_ALLOC, (void *)h_svm_alloc, 20, "clSVMAlloc"},
    {S_SVM_FREE, (void *)h_svm_free, 20, "clSVMFree"},
    {S_ENQUEUE_SVM_FREE, (void *)h_enqueue_svm_free, 20, "clEnqueueSVMFree"},
};
#define N_MEM_HOOKS ((int)(sizeof MEM_HOOKS / sizeof MEM_HOOKS[0]))

/* mem_hook(table_address, version, alloc, free) -> entries hooked: a new generation records.
 * alloc(context, address, nbytes, time_ns) and free(address, time_ns) are called under the GIL
 * on the allocating thread; ends still queued at the profile's end come from mem_drain(). */
static PyObject *
py_mem_hook(PyObject *module, PyObject *args)
{
    PyObject *addr, *alloc, *freefn;
    int version;
    if (!PyArg_ParseTuple(args, "OiOO:mem_hook", &addr, &version, &alloc, &freefn))
        return NULL;
    if (!HOOK_SUPPORTED) {
        PyErr_SetString(PyExc_NotImplementedError, "the hook is not built for this platform");
        return NULL;
    }
    void **t = (void **)address_of(addr);
    if (t == NULL)
        return NULL;
    Table *h = table_for(t);
    if (h == NULL)
        return NULL;
    if (h->mem_hooked) {
        PyErr_SetString(PyExc_RuntimeError, "this dispatch table's memory entries are hooked");
        return NULL;
    }
    if (version < 11 || t[S_SET_MEM_DESTRUCTOR_CALLBACK] == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no clSetMemObjectDestructorCallback (OpenCL 1.1)");
        return NULL;
    }
    PyObject *done = save_originals(t, h, MEM_HOOKS, N_MEM_HOOKS, version);
    if (done == NULL)
        return NULL;
    Py_INCREF(alloc);
    Py_XSETREF(py_mem_alloc, alloc);
    Py_INCREF(freefn);
    Py_XSETREF(py_mem_free, freefn);
#if HOOK_SUPPORTED
    static uintptr_t last_gen;
    pthread_mutex_lock(&mem_lock);
    mem_gen = ++last_gen;
    released_n = 0;
    pthread_mutex_unlock(&mem_lock);
#endif
    swap_in(t, h, MEM_HOOKS, N_MEM_HOOKS, version);
    h->mem_hooked = 1;
    return done;
}

/* mem_unhook(table_address) -> entries someone else replaced meanwhile (left as they are).
 * Ends the generation once no table is hooked: later ends are not this profile's. */
static PyObject *
py_mem_unhook(PyObject *module, PyObject *addr)
{
    void **t = (void **)address_of(addr);
    if (t == NULL)
        return NULL;
    Table *h = find_table(t);
    if (h == NULL || !h->mem_hooked) {
        PyErr_SetString(PyExc_RuntimeError, "this dispatch table's memory entries are not hooked");
        return NULL;
    }
    PyObject *conflicts = swap_out(t, h, MEM_HOOKS, N_MEM_HOOKS);
    if (conflicts == NULL)
        return NULL;
    h->mem_hooked = 0;
    int any = 0;
    for (int i = 0; i < n_tables; i++)
        any |= tables[i].mem_hooked;
    if (!any) {
#if HOOK_SUPPORTED
        pthread_mutex_lock(&mem_lock);
        mem_gen = 0;
        free(pending);
        pending = NULL;
        pending_len = pending_cap = 0;
        pthread_mutex_unlock(&mem_lock);
#endif
        Py_CLEAR(py_mem_alloc);
        Py_CLEAR(py_mem_free);
    }
    return conflicts;
}

static PyObject *
py_mem_stats(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{s:L,s:n,s:i}", "dropped", n_mem_dropped, "pending",
                         (Py_ssize_t)pending_len, "on", (int)(mem_gen != 0));
}

static PyObject *
py_stats(PyObject *module, PyObject *unused)
{
    Py_ssize_t live = 0;
    for (size_t i = 0; i < names_cap; i++)
        live += names[i].key != NULL && names[i].key != TOMB;
    return Py_BuildValue("{s:L,s:L,s:L,s:i,s:n}", "seen", n_seen, "recorded", n_recorded,
                         "events", n_events, "on", (int)hook_on, "kernel_names", live);
}

static PyObject *
py_slots(PyObject *module, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (int i = 0; i < N_HOOKS; i++) {
        PyObject *v = PyLong_FromLong(HOOKS[i].slot);
        if (v == NULL || PyDict_SetItemString(d, HOOKS[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    for (int i = 0; i < N_MEM_HOOKS; i++) {
        PyObject *v = PyLong_FromLong(MEM_HOOKS[i].slot);
        if (v == NULL || PyDict_SetItemString(d, MEM_HOOKS[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* -- fork: the child gets both locks free ----------------------------------------------------
 * A fork while another thread holds a lock would leave the child's copy locked for good (its
 * holder does not exist there), and the child's profile end would wait for it for ever. The
 * forking thread takes both before fork() (in one order: no code holds both at once) and
 * gives them back on both sides. Holders never wait for the GIL while holding one, so the
 * forking thread, which holds the GIL, waits at most for a holder's few instructions. */

#if HOOK_SUPPORTED
static void
before_fork(void)
{
    pthread_mutex_lock(&names_lock);
    pthread_mutex_lock(&mem_lock);
}

static void
after_fork(void)
{
    pthread_mutex_unlock(&mem_lock);
    pthread_mutex_unlock(&names_lock);
}
#endif

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
    pthread_mutex_lock(&names_lock);
    pthread_mutex_lock(&mem_lock);
    locks_held = 1;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    locks_held = 0;
    pthread_mutex_unlock(&mem_lock);
    pthread_mutex_unlock(&names_lock);
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
    {"bind", py_bind, METH_VARARGS,
     "bind(active, backend, adopt, other, info, current, kinds, row_names)"},
    {"hook", py_hook, METH_VARARGS, "hook(table_address, version) -> entries hooked"},
    {"unhook", py_unhook, METH_O, "unhook(table_address) -> entries someone else replaced"},
    {"table_address", py_table_address, METH_O, "the dispatch table of a cl object (its handle)"},
    {"preloaded", py_preloaded, METH_NOARGS, "whether kprof's interposer was preloaded"},
    {"attach_preload", py_attach_preload, METH_VARARGS,
     "attach_preload(version) -> entries: the preloaded interposer calls the hook"},
    {"detach_preload", py_detach_preload, METH_NOARGS, "the interposer forwards as a loader"},
    {"stamp", py_stamp, METH_O,
     "stamp(event_handle) -> Stamp: when the command ran, from the driver's callbacks"},
    {"quiet", py_quiet, METH_O,
     "quiet(fn): fn, whose OpenCL enqueues the hook leaves to the caller to record"},
    {"mem_hook", py_mem_hook, METH_VARARGS,
     "mem_hook(table_address, version, alloc, free) -> entries: buffers and SVM recorded"},
    {"mem_unhook", py_mem_unhook, METH_O, "mem_unhook(table_address) -> entries replaced"},
    {"mem_drain", py_mem_drain, METH_NOARGS, "[(address, time_ns)]: ends since the last drain"},
    {"mem_released", py_mem_released, METH_NOARGS,
     "[address]: handles the program released since the last call (the last 4096)"},
    {"mem_stats", py_mem_stats, METH_NOARGS, "memory hook counts: dropped, pending, on"},
    {"stats", py_stats, METH_NOARGS, "counts: enqueues seen and recorded, names cached"},
    {"slots", py_slots, METH_NOARGS, "{entry name: slot in the ICD dispatch table}"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_clhook", "kprof's OpenCL dispatch-table hook.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__clhook(void)
{
    str_launch = PyUnicode_InternFromString("launch");
    str_queue = PyUnicode_InternFromString("queue");
    if (str_launch == NULL || str_queue == NULL)
        return NULL;
    EventType = PyType_FromSpec(&ev_spec);
    if (EventType == NULL)
        return NULL;
    QuietType = PyType_FromSpec(&qt_spec);
    if (QuietType == NULL)
        return NULL;
    StampType = PyType_FromSpec(&st_spec);
    if (StampType == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
#if HOOK_SUPPORTED
    static int fork_handlers; /* once: handlers registered twice would take a lock twice */
    if (!fork_handlers) {
        if (pthread_atfork(before_fork, after_fork, after_fork) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
            return NULL;
        }
        fork_handlers = 1;
    }
#endif
    if (PyModule_AddIntConstant(m, "supported", HOOK_SUPPORTED) < 0)
        return NULL;
    Py_INCREF(EventType);
    if (PyModule_AddObject(m, "Event", EventType) < 0)
        return NULL;
    return m;
}
