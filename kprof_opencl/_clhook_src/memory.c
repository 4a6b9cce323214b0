/* Device memory: buffers and SVM allocations, whoever makes them.
 *
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
 * instead of calling them live at the end.
 */
#include "memory.h"


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

void
kprof_memory_lock(void)
{
#if HOOK_SUPPORTED
    pthread_mutex_lock(&mem_lock);
#endif
}

void
kprof_memory_unlock(void)
{
#if HOOK_SUPPORTED
    pthread_mutex_unlock(&mem_lock);
#endif
}

/* As kprof_names_at_fork (kernel_names.c): the child gets the lock free. The driver's
 * callbacks hold it for an append only, never waiting for the GIL. */
int
kprof_memory_at_fork(void)
{
#if HOOK_SUPPORTED
    static int registered;
    if (!registered) {
        if (pthread_atfork(kprof_memory_lock, kprof_memory_unlock, kprof_memory_unlock) != 0)
            return -1;
        registered = 1;
    }
#endif
    return 0;
}

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

static void CL_CALLBACK
on_mem_destroyed(cl_mem mem, void *user)
{
    mem_push(mem, kprof_now_ns(), (uintptr_t)user);
}

/* The ends queued so far, taken out (the caller frees them); *n of them. */
static MemFree *
take_pending(size_t *n)
{
#if HOOK_SUPPORTED
    pthread_mutex_lock(&mem_lock);
    MemFree *got = pending;
    *n = pending_len;
    pending = NULL;
    pending_len = pending_cap = 0;
    pthread_mutex_unlock(&mem_lock);
    return got;
#else
    *n = 0;
    return NULL;
#endif
}

/* mem_drain() -> [(address, time_ns), ...]: the ends seen since the last drain, in order. */
PyObject *
kprof_py_mem_drain(PyObject *module, PyObject *unused)
{
    size_t n;
    MemFree *got = take_pending(&n);
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
        size_t n;
        MemFree *got = take_pending(&n);
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

/* A buffer made at `t` in generation `gen`: counted once its end can be seen. */
static cl_mem
counted_buffer(cl_context ctx, cl_mem m, size_t size, int64_t t, uintptr_t gen)
{
    if (m == NULL || gen == 0)
        return m;
    cl_api_clSetMemObjectDestructorCallback set = (cl_api_clSetMemObjectDestructorCallback)
        kprof_original(m, SLOT_SET_MEM_OBJECT_DESTRUCTOR_CALLBACK);
    /* Without the callback its end would never be seen: then it is not counted at all. */
    if (set != NULL && set(m, on_mem_destroyed, (void *)gen) == CL_SUCCESS)
        mem_deliver(ctx, m, size, t);
    return m;
}

static cl_mem CL_API_CALL
h_create_buffer(cl_context ctx, cl_bitfield flags, size_t size, void *host, cl_int *errcode)
{
    cl_api_clCreateBuffer f = (cl_api_clCreateBuffer)kprof_original(ctx, SLOT_CREATE_BUFFER);
    uintptr_t gen = mem_gen;
    int64_t t = kprof_now_ns();
    return counted_buffer(ctx, f(ctx, flags, size, host, errcode), size, t, gen);
}

/* A memory object's size as the driver has it (an image's, whatever its format); 0 when it
 * cannot say. */
static size_t
mem_size(cl_mem m)
{
    cl_api_clGetMemObjectInfo info =
        (cl_api_clGetMemObjectInfo)kprof_original(m, SLOT_GET_MEM_OBJECT_INFO);
    size_t size = 0;
    if (info == NULL || info(m, CL_MEM_SIZE, sizeof size, &size, NULL) != CL_SUCCESS)
        return 0;
    return size;
}

static cl_mem CL_API_CALL
h_create_image(cl_context ctx, cl_bitfield flags, const cl_image_format *format,
               const cl_image_desc *desc, void *host, cl_int *errcode)
{
    cl_api_clCreateImage f = (cl_api_clCreateImage)kprof_original(ctx, SLOT_CREATE_IMAGE);
    uintptr_t gen = mem_gen;
    int64_t t = kprof_now_ns();
    cl_mem m = f(ctx, flags, format, desc, host, errcode);
    return counted_buffer(ctx, m, m != NULL ? mem_size(m) : 0, t, gen);
}

static cl_mem CL_API_CALL
h_create_image_props(cl_context ctx, const cl_mem_properties *props, cl_bitfield flags,
                     const cl_image_format *format, const cl_image_desc *desc, void *host,
                     cl_int *errcode)
{
    cl_api_clCreateImageWithProperties f = (cl_api_clCreateImageWithProperties)kprof_original(
        ctx, SLOT_CREATE_IMAGE_WITH_PROPERTIES);
    uintptr_t gen = mem_gen;
    int64_t t = kprof_now_ns();
    cl_mem m = f(ctx, props, flags, format, desc, host, errcode);
    return counted_buffer(ctx, m, m != NULL ? mem_size(m) : 0, t, gen);
}

static cl_mem CL_API_CALL
h_create_buffer_props(cl_context ctx, const cl_mem_properties *props, cl_bitfield flags,
                      size_t size, void *host, cl_int *errcode)
{
    cl_api_clCreateBufferWithProperties f = (cl_api_clCreateBufferWithProperties)kprof_original(
        ctx, SLOT_CREATE_BUFFER_WITH_PROPERTIES);
    uintptr_t gen = mem_gen;
    int64_t t = kprof_now_ns();
    return counted_buffer(ctx, f(ctx, props, flags, size, host, errcode), size, t, gen);
}

static cl_int CL_API_CALL
h_release_mem(cl_mem m)
{
    cl_api_clReleaseMemObject f =
        (cl_api_clReleaseMemObject)kprof_original(m, SLOT_RELEASE_MEM_OBJECT);
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
PyObject *
kprof_py_mem_released(PyObject *module, PyObject *unused)
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

static void *CL_API_CALL
h_svm_alloc(cl_context ctx, cl_bitfield flags, size_t size, cl_uint alignment)
{
    cl_api_clSVMAlloc f = (cl_api_clSVMAlloc)kprof_original(ctx, SLOT_SVM_ALLOC);
    int64_t t = kprof_now_ns();
    void *p = f(ctx, flags, size, alignment);
    if (p != NULL && mem_gen != 0)
        mem_deliver(ctx, p, size, t);
    return p;
}

static void CL_API_CALL
h_svm_free(cl_context ctx, void *ptr)
{
    cl_api_clSVMFree f = (cl_api_clSVMFree)kprof_original(ctx, SLOT_SVM_FREE);
    if (ptr != NULL)
        mem_push(ptr, kprof_now_ns(), mem_gen);
    f(ctx, ptr);
}

/* Counted as freed when enqueued, as PyOpenCL's enqueue_release is: the driver frees the
 * memory when the queue gets there. */
static cl_int CL_API_CALL
h_enqueue_svm_free(cl_command_queue q, cl_uint n, void *ptrs[],
                   void(CL_API_CALL *fn)(cl_command_queue, cl_uint, void *[], void *), void *user,
                   cl_uint n_wait, const cl_event *wait, cl_event *event)
{
    cl_api_clEnqueueSVMFree f =
        (cl_api_clEnqueueSVMFree)kprof_original(q, SLOT_ENQUEUE_SVM_FREE);
    int64_t t = kprof_now_ns();
    uintptr_t gen = mem_gen;
    cl_int err = f(q, n, ptrs, fn, user, n_wait, wait, event);
    if (err == CL_SUCCESS && ptrs != NULL)
        for (cl_uint i = 0; i < n; i++)
            if (ptrs[i] != NULL)
                mem_push(ptrs[i], t, gen);
    return err;
}

static const KprofHook MEM_HOOKS[] = {
    KPROF_HOOK(SLOT_CREATE_BUFFER, cl_api_clCreateBuffer, h_create_buffer, 11, "clCreateBuffer"),
    KPROF_HOOK(SLOT_RELEASE_MEM_OBJECT, cl_api_clReleaseMemObject,
               h_release_mem, 11, "clReleaseMemObject"),
    KPROF_HOOK(SLOT_SVM_ALLOC, cl_api_clSVMAlloc, h_svm_alloc, 20, "clSVMAlloc"),
    KPROF_HOOK(SLOT_SVM_FREE, cl_api_clSVMFree, h_svm_free, 20, "clSVMFree"),
    KPROF_HOOK(SLOT_ENQUEUE_SVM_FREE, cl_api_clEnqueueSVMFree,
               h_enqueue_svm_free, 20, "clEnqueueSVMFree"),
    KPROF_HOOK(SLOT_CREATE_BUFFER_WITH_PROPERTIES, cl_api_clCreateBufferWithProperties,
               h_create_buffer_props, 30, "clCreateBufferWithProperties"),
    KPROF_HOOK(SLOT_CREATE_IMAGE, cl_api_clCreateImage, h_create_image, 12, "clCreateImage"),
    KPROF_HOOK(SLOT_CREATE_IMAGE_WITH_PROPERTIES, cl_api_clCreateImageWithProperties,
               h_create_image_props, 30, "clCreateImageWithProperties"),
};

const KprofHookSet kprof_memory_set = {
    MEM_HOOKS,
    (int)(sizeof MEM_HOOKS / sizeof MEM_HOOKS[0]),
    KPROF_MEMORY,
    "this dispatch table's memory entries are hooked",
    "this dispatch table's memory entries are not hooked",
    SLOT_SET_MEM_OBJECT_DESTRUCTOR_CALLBACK,
    11,
    "no clSetMemObjectDestructorCallback (OpenCL 1.1)",
};

/* Between saving the originals and swapping the hooks in: the callables, and a new
 * generation. */
static int
start_generation(void *callables)
{
    PyObject *alloc = ((PyObject **)callables)[0], *freefn = ((PyObject **)callables)[1];
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
    return 0;
}

/* mem_hook(table_address, version, alloc, free) -> entries hooked: a new generation records.
 * alloc(context, address, nbytes, time_ns) and free(address, time_ns) are called under the GIL
 * on the allocating thread; ends still queued at the profile's end come from mem_drain(). */
PyObject *
kprof_py_mem_hook(PyObject *module, PyObject *args)
{
    PyObject *addr, *callables[2];
    int version;
    if (!PyArg_ParseTuple(args, "OiOO:mem_hook", &addr, &version, &callables[0], &callables[1]))
        return NULL;
    if (!HOOK_SUPPORTED) {
        PyErr_SetString(PyExc_NotImplementedError, "the hook is not built for this platform");
        return NULL;
    }
    return kprof_table_hook(addr, version, &kprof_memory_set, start_generation, callables);
}

/* mem_unhook(table_address) -> entries someone else replaced meanwhile (left as they are).
 * Ends the generation once no table is hooked: later ends are not this profile's. */
PyObject *
kprof_py_mem_unhook(PyObject *module, PyObject *addr)
{
    PyObject *conflicts = kprof_table_unhook(addr, &kprof_memory_set);
    if (conflicts != NULL && !kprof_tables_any(KPROF_MEMORY)) {
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

PyObject *
kprof_py_mem_stats(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{s:L,s:n,s:i}", "dropped", n_mem_dropped, "pending",
                         (Py_ssize_t)pending_len, "on", (int)(mem_gen != 0));
}
