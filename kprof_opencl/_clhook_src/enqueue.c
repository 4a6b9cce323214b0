/* Capturing enqueues, whoever makes them.
 *
 * A hooked enqueue calls the ICD's own function with the caller's arguments (its own event
 * when the caller passed none, so that the work has device times), then, holding the GIL,
 * hands the launch to the calling thread's active recorder: as a raw launch into the compiled
 * recorder's C batch, which keeps one reference to the cl_event and no Python object (the
 * common case), else through `rec.launch` with an `Event` token that owns the reference
 * (released when kprof drops it). The caller's return value and event are untouched. A kernel
 * launch carries its configuration, (global size, local size), as PyOpenCL's capture makes it.
 *
 * Where every platform is hooked, the compiled path records PyOpenCL's kernel launches here
 * too (its kernel entry is left as it is). Launches PyOpenCL's Python capture records
 * (kprof_opencl.capture) and kprof's own markers are made inside `quiet(fn)`: a thread-local
 * mark the hook honours, so nothing is counted twice.
 */
#include "enqueue.h"
#include "events.h"
#include "install.h"
#include "kernel_names.h"
#include "queues.h"
#include "../_current_queue.h"

#if HOOK_SUPPORTED
static __thread int quiet_depth; /* inside quiet(fn): PyOpenCL's capture records this call */
#else
static int quiet_depth;
#endif

static PyObject *py_active;   /* kprof.capture.active */
static PyObject *py_backend;  /* the opencl Backend */
/* other(rec, kind, name, queue, t0, t1, token, nbytes): not the common case */
static PyObject *py_other;
static PyObject *py_kinds[2]; /* KERNEL, COPY */
static PyObject *py_names[5]; /* H2D, D2H, D2D, FILL, SVM copy: capture.py's row names */
static PyObject *py_current; /* the thread-local whose `queue` is the thread's current queue */
static PyObject *str_launch;
/* The compiled recorder's raw launch (kprof.plugin.raw_launch_capsule()), or NULL: every
 * launch goes through rec.launch. Its record kinds, as KERNEL and COPY are. */
static const KprofRawApi *raw_api;
static int64_t kind_values[2];
static long long n_seen, n_recorded; /* counts for tests */

enum { N_H2D, N_D2H, N_D2D, N_FILL, N_SVM };
enum { K_KERNEL, K_COPY };

int
kprof_enqueue_bound(void)
{
    return py_active != NULL;
}

int
kprof_enqueue_raw(void)
{
    return raw_api != NULL;
}

/* bind(active, backend, adopt, other, info, current, kinds, row_names, raw) */
PyObject *
kprof_py_bind(PyObject *module, PyObject *args)
{
    PyObject *active, *backend, *adopt, *other, *info, *current, *kinds, *row_names, *raw;
    if (!PyArg_ParseTuple(args, "OOOOOOO!O!O:bind", &active, &backend, &adopt, &other, &info,
                          &current, &PyTuple_Type, &kinds, &PyTuple_Type, &row_names, &raw))
        return NULL;
    if (PyTuple_Size(kinds) != 2 || PyTuple_Size(row_names) != 5) {
        PyErr_SetString(PyExc_ValueError, "bind() takes 2 kinds and 5 row names");
        return NULL;
    }
    const KprofRawApi *api = NULL;
    if (raw != Py_None) {
        api = (const KprofRawApi *)PyCapsule_GetPointer(raw, KPROF_RAW_CAPSULE);
        if (api == NULL)
            return NULL;
        if (strcmp(api->signature, KPROF_LAYOUT_SIGNATURE) != 0)
            api = NULL; /* built for another layout: every launch through rec.launch */
    }
    for (int i = 0; i < 2; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GetItem(kinds, i));
        if (v == -1 && PyErr_Occurred())
            return NULL;
        kind_values[i] = (int64_t)v;
    }
    raw_api = api;
    PyObject **slots[] = {&py_active, &py_backend, &py_other, &py_current};
    PyObject *values[] = {active, backend, other, current};
    for (int i = 0; i < 4; i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(*slots[i], values[i]);
    }
    kprof_queues_bind(adopt);
    kprof_events_bind(info);
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

static void
release_event(cl_event ev)
{
    ((cl_api_clReleaseEvent)kprof_original(ev, SLOT_RELEASE_EVENT))(ev);
}

/* A kernel launch's work sizes, as the call gave them. */
typedef struct {
    cl_uint dim;
    const size_t *global, *local;
} Sizes;

/* The last launch configuration made and the sizes it was made of: a loop launches with the
 * same sizes, and then makes no tuple. Under the GIL. */
static PyObject *last_config;
static Sizes last_sizes;
static size_t last_global[3], last_local[3];

static PyObject *
dims(cl_uint dim, const size_t *v)
{
    PyObject *t = PyTuple_New(dim);
    for (cl_uint i = 0; t != NULL && i < dim; i++) {
        PyObject *n = PyLong_FromSize_t(v[i]);
        if (n == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SetItem(t, i, n);
    }
    return t;
}

/* The launch configuration kprof keeps, (global size, local size or None) as tuples, as
 * kprof_opencl.capture.launch_config makes it from PyOpenCL's arguments (a new reference);
 * NULL without an exception where there is none (sizes of more than 3 dimensions included),
 * NULL with one on failure. */
static PyObject *
kernel_config(const Sizes *s)
{
    if (s == NULL || s->global == NULL || s->dim == 0 || s->dim > 3)
        return NULL;
    size_t bytes = s->dim * sizeof(size_t);
    if (last_config != NULL && s->dim == last_sizes.dim
        && (s->local == NULL) == (last_sizes.local == NULL)
        && memcmp(s->global, last_global, bytes) == 0
        && (s->local == NULL || memcmp(s->local, last_local, bytes) == 0)) {
        Py_INCREF(last_config);
        return last_config;
    }
    PyObject *g = dims(s->dim, s->global), *l = NULL, *config = NULL;
    if (g == NULL)
        return NULL;
    if (s->local == NULL) {
        l = Py_None;
        Py_INCREF(l);
    } else if ((l = dims(s->dim, s->local)) == NULL) {
        Py_DECREF(g);
        return NULL;
    }
    config = PyTuple_Pack(2, g, l);
    Py_DECREF(g);
    Py_DECREF(l);
    if (config == NULL)
        return NULL;
    last_sizes.dim = s->dim;
    last_sizes.local = s->local == NULL ? NULL : last_local;
    memcpy(last_global, s->global, bytes);
    if (s->local != NULL)
        memcpy(last_local, s->local, bytes);
    Py_INCREF(config);
    Py_XSETREF(last_config, config);
    return config;
}

/* After a successful enqueue: hand it to the calling thread's recorder. `ev` is the command's
 * event; `own` says kprof created it (the caller passed none), else it is retained here. The
 * common case goes to the recorder's C batch as a raw launch (no Python object made); every
 * other case, and the pure-Python recorder, through `rec.launch` with an Event token. */
static void
record(cl_command_queue q, int kind, int name_ix, cl_kernel k, const Sizes *sizes,
       int64_t nbytes, int64_t t0, cl_event ev, int own)
{
    int64_t t1 = kprof_now_ns();
    if (!Py_IsInitialized()) {
        if (own)
            release_event(ev);
        return;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    /* A caller's pending exception is left as it was (set aside only when there is one). */
    PyObject *et = NULL, *evalue = NULL, *etb = NULL;
    int pending = PyErr_Occurred() != NULL;
    if (pending)
        PyErr_Fetch(&et, &evalue, &etb);
    PyObject *rec = NULL, *name = NULL, *tok = NULL, *a = NULL, *b = NULL, *n = NULL,
             *r = NULL, *launch = NULL, *entry = NULL, *config = NULL;
    n_seen++;
    kprof_names_collect();
    if (!kprof_hook_on || !kprof_queues_ready()) {
        if (own)
            release_event(ev);
        goto done;
    }
    rec = PyObject_CallNoArgs(py_active);
    if (rec == NULL || rec == Py_None) {
        if (own)
            release_event(ev);
        goto done;
    }
    if (kind == K_KERNEL) {
        name = kprof_kernel_name(k);
        config = name == NULL ? NULL : kernel_config(sizes);
        if (PyErr_Occurred()) {
            if (own)
                release_event(ev);
            goto done;
        }
    }
    else {
        name = py_names[name_ix];
        Py_INCREF(name);
    }
    /* Held: the profile's end on another thread may clear the cache while the GIL is let go. */
    entry = name == NULL ? NULL : kprof_queue_entry(q);
    if (entry == NULL) {
        if (own)
            release_event(ev);
        goto done;
    }
    Py_INCREF(entry);
    PyObject *queue = PyTuple_GetItem(entry, 0);
    int profiles = PyObject_IsTrue(PyTuple_GetItem(entry, 1));
    if (kprof_set_current(py_current, queue) < 0) {
        if (own)
            release_event(ev);
        goto done;
    }
    if (profiles == 1 && raw_api != NULL) {
        if (!own) /* the batch's reference */
            ((cl_api_clRetainEvent)kprof_original(ev, SLOT_RETAIN_EVENT))(ev);
        own = 1;
        KprofRawLaunch l = {ev, ev, name, queue, config, kind_values[kind], t0, t1, nbytes};
        int got = raw_api->append(rec, py_backend, &kprof_event_ops, &l);
        if (got == 1) {
            kprof_event_raw_taken();
            n_recorded++;
            goto done;
        }
        if (got < 0) {
            release_event(ev);
            goto done;
        }
    }
    tok = kprof_event_token(ev, own);
    if (tok == NULL)
        goto done;
    a = PyLong_FromLongLong(t0);
    b = PyLong_FromLongLong(t1);
    n = PyLong_FromLongLong(nbytes);
    if (a == NULL || b == NULL || n == NULL)
        goto done;
    if (profiles == 1) {
        launch = PyObject_GetAttr(rec, str_launch);
        if (launch == NULL)
            goto done;
        r = PyObject_CallFunctionObjArgs(launch, py_backend, py_kinds[kind], name, queue, a, b,
                                         tok, tok, n, config ? config : Py_None, NULL);
    }
    else {
        r = PyObject_CallFunctionObjArgs(py_other, rec, py_kinds[kind], name, queue, a, b, tok,
                                         n, config ? config : Py_None, NULL);
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
    Py_XDECREF(config);
    Py_XDECREF(name);
    Py_XDECREF(rec);
    if (pending)
        PyErr_Restore(et, evalue, etb);
    PyGILState_Release(gil);
}

/* The common shape of every hooked enqueue: pass through when quiet; else give the command an
 * event if the caller did not ask for one, and record it once enqueued. */
#define ENQUEUE_BODY(SLOT, FNTYPE, CALL_ARGS, KIND, NAME_IX, KERNEL, SIZES, NBYTES)          \
    FNTYPE f = (FNTYPE)kprof_original(q, SLOT);                                               \
    if (quiet_depth || !kprof_hook_on)                                                        \
        return f CALL_ARGS;                                                                   \
    cl_event own = NULL;                                                                      \
    cl_event *user_event = event;                                                             \
    if (event == NULL)                                                                        \
        event = &own;                                                                         \
    int64_t t0 = kprof_now_ns();                                                              \
    cl_int err = f CALL_ARGS;                                                                 \
    if (err == CL_SUCCESS && *event != NULL)                                                  \
        record(q, KIND, NAME_IX, KERNEL, SIZES, NBYTES, t0, *event, user_event == NULL);      \
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
        || ((cl_api_clGetImageInfo)kprof_original(image, SLOT_GET_IMAGE_INFO))(
               image, CL_IMAGE_ELEMENT_SIZE, sizeof element, &element, NULL)
               != CL_SUCCESS)
        return -1;
    return region_bytes(region) * (int64_t)element;
}

static cl_int CL_API_CALL
h_ndrange(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off, const size_t *gws,
          const size_t *lws, cl_uint nw, const cl_event *wl, cl_event *event)
{
    Sizes sizes = {dim, gws, lws};
    ENQUEUE_BODY(SLOT_ENQUEUE_NDRANGE_KERNEL, cl_api_clEnqueueNDRangeKernel,
                 (q, k, dim, off, gws, lws, nw, wl, event), K_KERNEL, 0, k, &sizes, -1)
}

static cl_int CL_API_CALL
h_read_buffer(cl_command_queue q, cl_mem buf, cl_bool blocking, size_t off, size_t cb, void *ptr,
              cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_READ_BUFFER, cl_api_clEnqueueReadBuffer,
                 (q, buf, blocking, off, cb, ptr, nw, wl, event),
                 K_COPY, N_D2H, NULL, NULL, (int64_t)cb)
}

static cl_int CL_API_CALL
h_write_buffer(cl_command_queue q, cl_mem buf, cl_bool blocking, size_t off, size_t cb,
               const void *ptr, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_WRITE_BUFFER, cl_api_clEnqueueWriteBuffer,
                 (q, buf, blocking, off, cb, ptr, nw, wl, event),
                 K_COPY, N_H2D, NULL, NULL, (int64_t)cb)
}

static cl_int CL_API_CALL
h_copy_buffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, size_t dof, size_t cb,
              cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_COPY_BUFFER, cl_api_clEnqueueCopyBuffer,
                 (q, src, dst, so, dof, cb, nw, wl, event),
                 K_COPY, N_D2D, NULL, NULL, (int64_t)cb)
}

static cl_int CL_API_CALL
h_read_rect(cl_command_queue q, cl_mem buf, cl_bool blocking, const size_t *bo, const size_t *ho,
            const size_t *region, size_t brp, size_t bsp, size_t hrp, size_t hsp, void *ptr,
            cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_READ_BUFFER_RECT, cl_api_clEnqueueReadBufferRect,
                 (q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nw, wl, event),
                 K_COPY, N_D2H, NULL, NULL, region_bytes(region))
}

static cl_int CL_API_CALL
h_write_rect(cl_command_queue q, cl_mem buf, cl_bool blocking, const size_t *bo,
             const size_t *ho, const size_t *region, size_t brp, size_t bsp, size_t hrp,
             size_t hsp, const void *ptr, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_WRITE_BUFFER_RECT, cl_api_clEnqueueWriteBufferRect,
                 (q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nw, wl, event),
                 K_COPY, N_H2D, NULL, NULL, region_bytes(region))
}

static cl_int CL_API_CALL
h_copy_rect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so, const size_t *dof,
            const size_t *region, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint nw,
            const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_COPY_BUFFER_RECT, cl_api_clEnqueueCopyBufferRect,
                 (q, src, dst, so, dof, region, srp, ssp, drp, dsp, nw, wl, event),
                 K_COPY, N_D2D, NULL, NULL, region_bytes(region))
}

static cl_int CL_API_CALL
h_read_image(cl_command_queue q, cl_mem img, cl_bool blocking, const size_t *origin,
             const size_t *region, size_t rp, size_t sp, void *ptr, cl_uint nw,
             const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_READ_IMAGE, cl_api_clEnqueueReadImage,
                 (q, img, blocking, origin, region, rp, sp, ptr, nw, wl, event),
                 K_COPY, N_D2H, NULL, NULL, image_bytes(img, region))
}

static cl_int CL_API_CALL
h_write_image(cl_command_queue q, cl_mem img, cl_bool blocking, const size_t *origin,
              const size_t *region, size_t rp, size_t sp, const void *ptr, cl_uint nw,
              const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_WRITE_IMAGE, cl_api_clEnqueueWriteImage,
                 (q, img, blocking, origin, region, rp, sp, ptr, nw, wl, event),
                 K_COPY, N_H2D, NULL, NULL, image_bytes(img, region))
}

static cl_int CL_API_CALL
h_copy_image(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so, const size_t *dof,
             const size_t *region, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_COPY_IMAGE, cl_api_clEnqueueCopyImage,
                 (q, src, dst, so, dof, region, nw, wl, event),
                 K_COPY, N_D2D, NULL, NULL, image_bytes(src, region))
}

static cl_int CL_API_CALL
h_image_to_buffer(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
                  const size_t *region, size_t dof, cl_uint nw, const cl_event *wl,
                  cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_COPY_IMAGE_TO_BUFFER, cl_api_clEnqueueCopyImageToBuffer,
                 (q, src, dst, so, region, dof, nw, wl, event),
                 K_COPY, N_D2D, NULL, NULL, image_bytes(src, region))
}

static cl_int CL_API_CALL
h_buffer_to_image(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, const size_t *dof,
                  const size_t *region, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_COPY_BUFFER_TO_IMAGE, cl_api_clEnqueueCopyBufferToImage,
                 (q, src, dst, so, dof, region, nw, wl, event),
                 K_COPY, N_D2D, NULL, NULL, image_bytes(dst, region))
}

static cl_int CL_API_CALL
h_fill_buffer(cl_command_queue q, cl_mem buf, const void *pattern, size_t ps, size_t off,
              size_t size, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_FILL_BUFFER, cl_api_clEnqueueFillBuffer,
                 (q, buf, pattern, ps, off, size, nw, wl, event),
                 K_COPY, N_FILL, NULL, NULL, (int64_t)size)
}

static cl_int CL_API_CALL
h_fill_image(cl_command_queue q, cl_mem img, const void *color, const size_t *origin,
             const size_t *region, cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_FILL_IMAGE, cl_api_clEnqueueFillImage,
                 (q, img, color, origin, region, nw, wl, event),
                 K_COPY, N_FILL, NULL, NULL, image_bytes(img, region))
}

static cl_int CL_API_CALL
h_svm_memcpy(cl_command_queue q, cl_bool blocking, void *dst, const void *src, size_t size,
             cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_SVM_MEMCPY, cl_api_clEnqueueSVMMemcpy,
                 (q, blocking, dst, src, size, nw, wl, event),
                 K_COPY, N_SVM, NULL, NULL, (int64_t)size)
}

static cl_int CL_API_CALL
h_svm_memfill(cl_command_queue q, void *ptr, const void *pattern, size_t ps, size_t size,
              cl_uint nw, const cl_event *wl, cl_event *event)
{
    ENQUEUE_BODY(SLOT_ENQUEUE_SVM_MEM_FILL, cl_api_clEnqueueSVMMemFill,
                 (q, ptr, pattern, ps, size, nw, wl, event),
                 K_COPY, N_FILL, NULL, NULL, (int64_t)size)
}

static const KprofHook HOOKS[] = {
    KPROF_HOOK(SLOT_ENQUEUE_NDRANGE_KERNEL, cl_api_clEnqueueNDRangeKernel,
               h_ndrange, 10, "clEnqueueNDRangeKernel"),
    KPROF_HOOK(SLOT_ENQUEUE_READ_BUFFER, cl_api_clEnqueueReadBuffer,
               h_read_buffer, 10, "clEnqueueReadBuffer"),
    KPROF_HOOK(SLOT_ENQUEUE_WRITE_BUFFER, cl_api_clEnqueueWriteBuffer,
               h_write_buffer, 10, "clEnqueueWriteBuffer"),
    KPROF_HOOK(SLOT_ENQUEUE_COPY_BUFFER, cl_api_clEnqueueCopyBuffer,
               h_copy_buffer, 10, "clEnqueueCopyBuffer"),
    KPROF_HOOK(SLOT_ENQUEUE_READ_IMAGE, cl_api_clEnqueueReadImage,
               h_read_image, 10, "clEnqueueReadImage"),
    KPROF_HOOK(SLOT_ENQUEUE_WRITE_IMAGE, cl_api_clEnqueueWriteImage,
               h_write_image, 10, "clEnqueueWriteImage"),
    KPROF_HOOK(SLOT_ENQUEUE_COPY_IMAGE, cl_api_clEnqueueCopyImage,
               h_copy_image, 10, "clEnqueueCopyImage"),
    KPROF_HOOK(SLOT_ENQUEUE_COPY_IMAGE_TO_BUFFER, cl_api_clEnqueueCopyImageToBuffer,
               h_image_to_buffer, 10, "clEnqueueCopyImageToBuffer"),
    KPROF_HOOK(SLOT_ENQUEUE_COPY_BUFFER_TO_IMAGE, cl_api_clEnqueueCopyBufferToImage,
               h_buffer_to_image, 10, "clEnqueueCopyBufferToImage"),
    KPROF_HOOK(SLOT_CREATE_COMMAND_QUEUE, cl_api_clCreateCommandQueue,
               kprof_hook_create_queue, 10, "clCreateCommandQueue"),
    KPROF_HOOK(SLOT_RELEASE_KERNEL, cl_api_clReleaseKernel,
               kprof_hook_release_kernel, 10, "clReleaseKernel"),
    KPROF_HOOK(SLOT_ENQUEUE_READ_BUFFER_RECT, cl_api_clEnqueueReadBufferRect,
               h_read_rect, 11, "clEnqueueReadBufferRect"),
    KPROF_HOOK(SLOT_ENQUEUE_WRITE_BUFFER_RECT, cl_api_clEnqueueWriteBufferRect,
               h_write_rect, 11, "clEnqueueWriteBufferRect"),
    KPROF_HOOK(SLOT_ENQUEUE_COPY_BUFFER_RECT, cl_api_clEnqueueCopyBufferRect,
               h_copy_rect, 11, "clEnqueueCopyBufferRect"),
    KPROF_HOOK(SLOT_ENQUEUE_FILL_BUFFER, cl_api_clEnqueueFillBuffer,
               h_fill_buffer, 12, "clEnqueueFillBuffer"),
    KPROF_HOOK(SLOT_ENQUEUE_FILL_IMAGE, cl_api_clEnqueueFillImage,
               h_fill_image, 12, "clEnqueueFillImage"),
    KPROF_HOOK(SLOT_CREATE_COMMAND_QUEUE_WITH_PROPERTIES,
               cl_api_clCreateCommandQueueWithProperties, kprof_hook_create_queue_props, 20,
               "clCreateCommandQueueWithProperties"),
    KPROF_HOOK(SLOT_ENQUEUE_SVM_MEMCPY, cl_api_clEnqueueSVMMemcpy,
               h_svm_memcpy, 20, "clEnqueueSVMMemcpy"),
    KPROF_HOOK(SLOT_ENQUEUE_SVM_MEM_FILL, cl_api_clEnqueueSVMMemFill,
               h_svm_memfill, 20, "clEnqueueSVMMemFill"),
};

const KprofHookSet kprof_enqueue_set = {
    HOOKS,
    (int)(sizeof HOOKS / sizeof HOOKS[0]),
    KPROF_ENQUEUES,
    "this dispatch table is hooked already",
    "this dispatch table is not hooked",
    -1,
    0,
    NULL,
};

PyObject *
kprof_py_stats(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{s:L,s:L,s:L,s:i,s:n}", "seen", n_seen, "recorded", n_recorded,
                         "events", kprof_events_live(), "on", (int)kprof_hook_on,
                         "kernel_names", kprof_names_cached());
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

PyObject *
kprof_py_quiet(PyObject *module, PyObject *fn)
{
    Quiet *self = (Quiet *)PyType_GenericAlloc((PyTypeObject *)QuietType, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(fn);
    self->fn = fn;
    return (PyObject *)self;
}

int
kprof_enqueue_init(void)
{
    str_launch = PyUnicode_InternFromString("launch");
    if (str_launch == NULL)
        return -1;
    QuietType = PyType_FromSpec(&qt_spec);
    return QuietType == NULL ? -1 : 0;
}
