/* kprof's OpenCL interposer, preloaded by `kprof run` (LD_PRELOAD) where the dispatch-table hook
 * is refused (kprof_opencl/hook.py says why: a read-only or per-object table, a loader-managed
 * one), or where KPROF_OPENCL_HOOK=preload asks for it.
 *
 * Preloaded, these definitions come before every OpenCL loader's (the system's, PyOpenCL's
 * own): C libraries and PyOpenCL alike call them. Each does what a loader does for an object
 * call: refuse a NULL object with the spec's error, else call the function in slot N of the
 * object's ICD dispatch table (cl_khr_icd). While kprof captures, `_clhook` attaches its hooked
 * functions (the same that it writes into a table it can hook) and each call goes through them
 * instead, so what is recorded, and how, is the same. No Python here, no state but the
 * attached table: preloaded into every child process too, it changes nothing there.
 *
 * Built like the extensions (setup.py) but never imported; no OpenCL headers needed.
 */
#include "_cltypes.h"

#if defined(_WIN32)
#define KPROF_EXPORT __declspec(dllexport)
#else
#define KPROF_EXPORT __attribute__((visibility("default")))
#endif

/* kprof's hooked functions by slot while it captures, else NULL. */
static void *volatile attached[N_SLOTS];

/* kprof_clpreload_attach(fns): fns[slot] is kprof's function for that slot (NULL: none); NULL
 * detaches every slot. Each slot is one aligned pointer store. */
KPROF_EXPORT void
kprof_clpreload_attach(void *const *fns)
{
    for (int i = 0; i < N_SLOTS; i++)
        __atomic_store_n(&attached[i], fns != NULL ? fns[i] : NULL, __ATOMIC_SEQ_CST);
}

static void *
forward(void *obj, int slot)
{
    void *f = __atomic_load_n(&attached[slot], __ATOMIC_ACQUIRE);
    return f != NULL ? f : (*(void ***)obj)[slot];
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t * off, const size_t * gws, const size_t * lws, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueNDRangeKernel f = (cl_api_clEnqueueNDRangeKernel)forward(q, SLOT_ENQUEUE_NDRANGE_KERNEL);
    return f(q, k, dim, off, gws, lws, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueReadBuffer(cl_command_queue q, cl_mem buf, cl_uint blocking, size_t off, size_t cb, void * ptr, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueReadBuffer f = (cl_api_clEnqueueReadBuffer)forward(q, SLOT_ENQUEUE_READ_BUFFER);
    return f(q, buf, blocking, off, cb, ptr, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueWriteBuffer(cl_command_queue q, cl_mem buf, cl_uint blocking, size_t off, size_t cb, const void * ptr, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueWriteBuffer f = (cl_api_clEnqueueWriteBuffer)forward(q, SLOT_ENQUEUE_WRITE_BUFFER);
    return f(q, buf, blocking, off, cb, ptr, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, size_t dof, size_t cb, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueCopyBuffer f = (cl_api_clEnqueueCopyBuffer)forward(q, SLOT_ENQUEUE_COPY_BUFFER);
    return f(q, src, dst, so, dof, cb, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueReadImage(cl_command_queue q, cl_mem img, cl_uint blocking, const size_t * origin, const size_t * region, size_t rp, size_t sp, void * ptr, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueReadImage f = (cl_api_clEnqueueReadImage)forward(q, SLOT_ENQUEUE_READ_IMAGE);
    return f(q, img, blocking, origin, region, rp, sp, ptr, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueWriteImage(cl_command_queue q, cl_mem img, cl_uint blocking, const size_t * origin, const size_t * region, size_t rp, size_t sp, const void * ptr, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueWriteImage f = (cl_api_clEnqueueWriteImage)forward(q, SLOT_ENQUEUE_WRITE_IMAGE);
    return f(q, img, blocking, origin, region, rp, sp, ptr, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueCopyImage(cl_command_queue q, cl_mem src, cl_mem dst, const size_t * so, const size_t * dof, const size_t * region, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueCopyImage f = (cl_api_clEnqueueCopyImage)forward(q, SLOT_ENQUEUE_COPY_IMAGE);
    return f(q, src, dst, so, dof, region, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueCopyImageToBuffer(cl_command_queue q, cl_mem src, cl_mem dst, const size_t * so, const size_t * region, size_t dof, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueCopyImageToBuffer f = (cl_api_clEnqueueCopyImageToBuffer)forward(q, SLOT_ENQUEUE_COPY_IMAGE_TO_BUFFER);
    return f(q, src, dst, so, region, dof, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueCopyBufferToImage(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, const size_t * dof, const size_t * region, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueCopyBufferToImage f = (cl_api_clEnqueueCopyBufferToImage)forward(q, SLOT_ENQUEUE_COPY_BUFFER_TO_IMAGE);
    return f(q, src, dst, so, dof, region, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueReadBufferRect(cl_command_queue q, cl_mem buf, cl_uint blocking, const size_t * bo, const size_t * ho, const size_t * region, size_t brp, size_t bsp, size_t hrp, size_t hsp, void * ptr, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueReadBufferRect f = (cl_api_clEnqueueReadBufferRect)forward(q, SLOT_ENQUEUE_READ_BUFFER_RECT);
    return f(q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueWriteBufferRect(cl_command_queue q, cl_mem buf, cl_uint blocking, const size_t * bo, const size_t * ho, const size_t * region, size_t brp, size_t bsp, size_t hrp, size_t hsp, const void * ptr, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueWriteBufferRect f = (cl_api_clEnqueueWriteBufferRect)forward(q, SLOT_ENQUEUE_WRITE_BUFFER_RECT);
    return f(q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueCopyBufferRect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t * so, const size_t * dof, const size_t * region, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueCopyBufferRect f = (cl_api_clEnqueueCopyBufferRect)forward(q, SLOT_ENQUEUE_COPY_BUFFER_RECT);
    return f(q, src, dst, so, dof, region, srp, ssp, drp, dsp, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueFillBuffer(cl_command_queue q, cl_mem buf, const void * pattern, size_t ps, size_t off, size_t size, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueFillBuffer f = (cl_api_clEnqueueFillBuffer)forward(q, SLOT_ENQUEUE_FILL_BUFFER);
    return f(q, buf, pattern, ps, off, size, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueFillImage(cl_command_queue q, cl_mem img, const void * color, const size_t * origin, const size_t * region, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueFillImage f = (cl_api_clEnqueueFillImage)forward(q, SLOT_ENQUEUE_FILL_IMAGE);
    return f(q, img, color, origin, region, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueSVMMemcpy(cl_command_queue q, cl_uint blocking, void * dst, const void * src, size_t size, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueSVMMemcpy f = (cl_api_clEnqueueSVMMemcpy)forward(q, SLOT_ENQUEUE_SVM_MEMCPY);
    return f(q, blocking, dst, src, size, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clEnqueueSVMMemFill(cl_command_queue q, void * ptr, const void * pattern, size_t ps, size_t size, cl_uint nw, const cl_event * wl, cl_event * ev)
{
    if (q == NULL) {
        return CL_INVALID_COMMAND_QUEUE;
    }
    cl_api_clEnqueueSVMMemFill f = (cl_api_clEnqueueSVMMemFill)forward(q, SLOT_ENQUEUE_SVM_MEM_FILL);
    return f(q, ptr, pattern, ps, size, nw, wl, ev);
}

KPROF_EXPORT cl_int CL_API_CALL
clReleaseKernel(cl_kernel k)
{
    if (k == NULL) {
        return CL_INVALID_KERNEL;
    }
    cl_api_clReleaseKernel f = (cl_api_clReleaseKernel)forward(k, SLOT_RELEASE_KERNEL);
    return f(k);
}

KPROF_EXPORT cl_command_queue CL_API_CALL
clCreateCommandQueue(cl_context ctx, cl_device_id dev, cl_bitfield props, cl_int * errcode)
{
    if (ctx == NULL) {
        if (errcode != NULL)
            *errcode = CL_INVALID_CONTEXT;
        return NULL;
    }
    cl_api_clCreateCommandQueue f = (cl_api_clCreateCommandQueue)forward(ctx, SLOT_CREATE_COMMAND_QUEUE);
    return f(ctx, dev, props, errcode);
}

KPROF_EXPORT cl_command_queue CL_API_CALL
clCreateCommandQueueWithProperties(cl_context ctx, cl_device_id dev, const cl_queue_properties * props, cl_int * errcode)
{
    if (ctx == NULL) {
        if (errcode != NULL)
            *errcode = CL_INVALID_CONTEXT;
        return NULL;
    }
    cl_api_clCreateCommandQueueWithProperties f = (cl_api_clCreateCommandQueueWithProperties)forward(ctx, SLOT_CREATE_COMMAND_QUEUE_WITH_PROPERTIES);
    return f(ctx, dev, props, errcode);
}

/* Built as an extension module by setuptools, which exports this name; nothing imports it. */
KPROF_EXPORT void *PyInit__clpreload(void) { return NULL; }
