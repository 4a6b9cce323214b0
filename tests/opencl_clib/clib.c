/* A C library that launches OpenCL work as VkFFT and CLBlast do: through the system's OpenCL
 * loader (dlopen'ed by path, so no headers or link-time library are needed), never through
 * PyOpenCL, on a queue it is given or creates. kprof sees it only through its dispatch-table
 * hook (tests/test_opencl_hook.py).
 *
 * The types and constants are the Khronos ones (CL/cl.h).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef void *cl_ptr;

#define CL_QUEUE_CONTEXT 0x1090
#define CL_QUEUE_DEVICE 0x1091
#define CL_QUEUE_PROPERTIES 0x1093
#define CL_MEM_READ_WRITE 1
#define CL_EVENT_REFERENCE_COUNT 0x11D2
#define CL_PROFILING_COMMAND_START 0x1282
#define CL_PROFILING_COMMAND_END 0x1283

static cl_int (*GetCommandQueueInfo)(cl_ptr, cl_uint, size_t, void *, size_t *);
static cl_ptr (*CreateCommandQueue)(cl_ptr, cl_ptr, cl_ulong, cl_int *);
static cl_int (*ReleaseCommandQueue)(cl_ptr);
static cl_ptr (*CreateProgramWithSource)(cl_ptr, cl_uint, const char **, const size_t *, cl_int *);
static cl_int (*BuildProgram)(cl_ptr, cl_uint, const cl_ptr *, const char *, void *, void *);
static cl_ptr (*CreateKernel)(cl_ptr, const char *, cl_int *);
static cl_int (*SetKernelArg)(cl_ptr, cl_uint, size_t, const void *);
static cl_ptr (*CreateBuffer)(cl_ptr, cl_ulong, size_t, void *, cl_int *);
static cl_int (*EnqueueWriteBuffer)(cl_ptr, cl_ptr, cl_uint, size_t, size_t, const void *, cl_uint,
                                    const cl_ptr *, cl_ptr *);
static cl_int (*EnqueueReadBuffer)(cl_ptr, cl_ptr, cl_uint, size_t, size_t, void *, cl_uint,
                                   const cl_ptr *, cl_ptr *);
static cl_int (*EnqueueNDRangeKernel)(cl_ptr, cl_ptr, cl_uint, const size_t *, const size_t *,
                                      const size_t *, cl_uint, const cl_ptr *, cl_ptr *);
static cl_int (*Finish)(cl_ptr);
static cl_int (*GetEventProfilingInfo)(cl_ptr, cl_uint, size_t, void *, size_t *);
static cl_int (*GetEventInfo)(cl_ptr, cl_uint, size_t, void *, size_t *);
static cl_int (*ReleaseEvent)(cl_ptr);
static cl_int (*ReleaseKernel)(cl_ptr);
static cl_int (*ReleaseProgram)(cl_ptr);
static cl_int (*ReleaseMemObject)(cl_ptr);

#ifdef KC_LINKED
/* Linked with -lOpenCL, as VkFFT is: calls bind at load time, so a preloaded definition
 * (kprof's interposer) comes first. */
#define LOAD(name)                                                                           \
    {                                                                                         \
        extern void cl##name(void);                                                           \
        *(void **)&name = (void *)&cl##name;                                                  \
    }
#else
/* The loader opened by path: its own definitions, whatever is preloaded. */
#define LOAD(name)                                                                           \
    if ((*(void **)&name = dlsym(lib, "cl" #name)) == NULL)                                   \
        return -1000;
#endif

/* kc_open(path of libOpenCL) -> 0, or a negative error (the path is unused when linked). */
int
kc_open(const char *path)
{
#ifndef KC_LINKED
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return -1001;
#endif
    LOAD(GetCommandQueueInfo) LOAD(CreateCommandQueue) LOAD(ReleaseCommandQueue)
    LOAD(CreateProgramWithSource) LOAD(BuildProgram) LOAD(CreateKernel) LOAD(SetKernelArg)
    LOAD(CreateBuffer) LOAD(EnqueueWriteBuffer) LOAD(EnqueueReadBuffer)
    LOAD(EnqueueNDRangeKernel) LOAD(Finish) LOAD(GetEventProfilingInfo) LOAD(GetEventInfo)
    LOAD(ReleaseEvent) LOAD(ReleaseKernel) LOAD(ReleaseProgram) LOAD(ReleaseMemObject)
    return 0;
}

static const char *SOURCE =
    "__kernel void kc_axpb(__global float *x, float a, float b)"
    "{ size_t i = get_global_id(0); x[i] = a * x[i] + b; }";

/* The properties of a queue (to check kprof's hook gave it profiling). */
long long
kc_queue_properties(cl_ptr queue)
{
    cl_ulong props = 0;
    if (GetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL) != 0)
        return -1;
    return (long long)props;
}

/* A new queue on the context and device of `queue`, created by this library (0 properties). */
cl_ptr
kc_new_queue(cl_ptr queue)
{
    cl_ptr ctx, dev;
    cl_int err;
    if (GetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL) != 0
        || GetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL) != 0)
        return NULL;
    return CreateCommandQueue(ctx, dev, 0, &err);
}

void
kc_release_queue(cl_ptr queue)
{
    ReleaseCommandQueue(queue);
}

/* kc_run(queue, n, x, size, times, refcounts): writes x (size floats) to a new buffer, runs
 * kc_axpb n times, reads the result back into x. With times == NULL every enqueue passes no
 * event (as VkFFT does); else each launch asks for its event, and times[2k], times[2k+1] get
 * its START and END, refcounts[k] its reference count before this library releases it. */
int
kc_run(cl_ptr queue, int n, float *x, size_t size, cl_ulong *times, cl_uint *refcounts)
{
    cl_ptr ctx;
    cl_int err;
    if ((err = GetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL)) != 0)
        return err;
    cl_ptr prog = CreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
    if (prog == NULL)
        return err;
    if ((err = BuildProgram(prog, 0, NULL, "", NULL, NULL)) != 0)
        return err;
    cl_ptr k = CreateKernel(prog, "kc_axpb", &err);
    if (k == NULL)
        return err;
    cl_ptr buf = CreateBuffer(ctx, CL_MEM_READ_WRITE, size * sizeof(float), NULL, &err);
    if (buf == NULL)
        return err;
    float a = 1.5f, b = 0.25f;
    if ((err = EnqueueWriteBuffer(queue, buf, 1, 0, size * sizeof(float), x, 0, NULL, NULL)) != 0)
        return err;
    SetKernelArg(k, 0, sizeof buf, &buf);
    SetKernelArg(k, 1, sizeof a, &a);
    SetKernelArg(k, 2, sizeof b, &b);
    cl_ptr events[64];
    if (times != NULL && n > 64)
        return -1002;
    for (int i = 0; i < n; i++) {
        err = EnqueueNDRangeKernel(queue, k, 1, NULL, &size, NULL, 0, NULL,
                                   times != NULL ? &events[i] : NULL);
        if (err != 0)
            return err;
    }
    if ((err = EnqueueReadBuffer(queue, buf, 1, 0, size * sizeof(float), x, 0, NULL, NULL)) != 0)
        return err;
    Finish(queue);
    if (times != NULL)
        for (int i = 0; i < n; i++) {
            GetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_START, 8, &times[2 * i], NULL);
            GetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_END, 8, &times[2 * i + 1], NULL);
            GetEventInfo(events[i], CL_EVENT_REFERENCE_COUNT, sizeof(cl_uint), &refcounts[i], NULL);
            ReleaseEvent(events[i]);
        }
    ReleaseMemObject(buf);
    ReleaseKernel(k);
    ReleaseProgram(prog);
    return 0;
}

/* The tiny kernel of kc_loop and kc_loop_events, with its 64-float buffer set as argument 0:
 * made on the first call for `queue`'s context and kept, so the loops time launches alone. */
static cl_int
tiny_kernel(cl_ptr queue, cl_ptr *kernel)
{
    static cl_ptr ctx_made, k;
    static cl_ptr buf;
    cl_ptr ctx;
    cl_int err;
    if ((err = GetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL)) != 0)
        return err;
    if (ctx != ctx_made) {
        static const char *tiny =
            "__kernel void kc_tiny(__global float *x) { x[get_global_id(0)] += 1.0f; }";
        cl_ptr prog = CreateProgramWithSource(ctx, 1, &tiny, NULL, &err);
        if (prog == NULL || (err = BuildProgram(prog, 0, NULL, "", NULL, NULL)) != 0)
            return err;
        k = CreateKernel(prog, "kc_tiny", &err);
        ReleaseProgram(prog);
        if (k == NULL)
            return err;
        buf = CreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
        if (buf == NULL)
            return err;
        SetKernelArg(k, 0, sizeof buf, &buf);
        ctx_made = ctx;
    }
    *kernel = k;
    return 0;
}

/* kc_loop(queue, n): n launches of a tiny kernel (64 work-items) with no event, then
 * clFinish: the C side of the hook's per-launch cost (bench/bench_hook.py), and the unprofiled
 * base of bench/bench_floor.py. */
int
kc_loop(cl_ptr queue, int n)
{
    cl_ptr k;
    cl_int err;
    if ((err = tiny_kernel(queue, &k)) != 0)
        return err;
    size_t global = 64;
    for (int i = 0; i < n; i++)
        if ((err = EnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL, NULL)) != 0)
            return err;
    return Finish(queue);
}

/* kc_loop_events(queue, n): kc_loop as a profiler written by hand into the application would
 * do it, the floor any tool timing every launch is measured against (bench/bench_floor.py):
 * each launch asks for its event, kept in an array; after clFinish each event's START and END
 * are read and the event released. The array, the reads and the releases are all inside the
 * call, as a tool's are inside its run. -1003 where the array cannot be had, -1004 where an
 * END is before its START (a read that did nothing). */
int
kc_loop_events(cl_ptr queue, int n)
{
    cl_ptr k;
    cl_int err;
    if ((err = tiny_kernel(queue, &k)) != 0)
        return err;
    cl_ptr *events = malloc((n > 0 ? (size_t)n : 1) * sizeof *events);
    if (events == NULL)
        return -1003;
    size_t global = 64;
    int made = 0;
    for (; made < n; made++)
        if ((err = EnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL,
                                        &events[made])) != 0)
            break;
    cl_int finished = Finish(queue);
    if (err == 0)
        err = finished;
    for (int i = 0; i < made; i++) {
        cl_ulong start = 0, end = 0;
        cl_int got = GetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_START, sizeof start,
                                           &start, NULL);
        if (got == 0)
            got = GetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_END, sizeof end, &end,
                                        NULL);
        if (err == 0)
            err = got != 0 ? got : end < start ? -1004 : 0;
        ReleaseEvent(events[i]); /* every event, even after an error: nothing leaks */
    }
    free(events);
    return err;
}
