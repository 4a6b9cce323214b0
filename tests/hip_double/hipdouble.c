/*
 * hipdouble.c - a host-only test double of AMD's HIP runtime (libamdhip64.so).
 *
 * TEST CODE ONLY. Never shipped. It lets kprof's HIP backend be exercised
 * through the real hip-python bindings on machines without an AMD GPU: built
 * as <dir>/lib/libamdhip64.so and selected with ROCM_PATH=<dir> (see
 * README.md). Verified only against hip-python 10.0 on Python 3.11.
 *
 * Model
 *   - HIPDOUBLE_DEVICES devices (default 1; 0 makes hipGetDeviceCount fail
 *     with hipErrorNoDevice). All devices are the same host.
 *   - Every stream, including the NULL stream, is a FIFO of operations run by
 *     one worker thread, asynchronously to the caller. Streams are
 *     independent: the legacy implicit synchronisation between the NULL stream
 *     and blocking streams is NOT modelled for launches and copies (only
 *     hipStreamSynchronize(NULL) waits for the blocking streams too).
 *   - A kernel launched with grid (gx, gy, gz) runs for gx*gy*gz microseconds
 *     of wall time (block dims, shared memory and arguments are ignored).
 *     A kernel whose function name is "hang" never finishes until
 *     hipdouble_release_hangs() (or hipdouble_reset()) is called.
 *   - "Device memory" is host memory. A copy or memset performs the real
 *     memcpy/memset when the stream reaches it, then waits
 *     bytes / HIPDOUBLE_BYTES_PER_US microseconds (default 1000 bytes/us,
 *     i.e. 1 GB/s; "inf" means no simulated time).
 *   - Each stream keeps a device clock (CLOCK_MONOTONIC ns): an operation
 *     starts at the later of its enqueue time and the end of the previous
 *     operation on that stream, and ends its duration later. An event record
 *     is stamped with its start time, so elapsed times are what an ideal
 *     device would measure and worker-thread scheduling jitter never shows
 *     (a kernel bracketed by records enqueued together measures exactly its
 *     duration). Completion itself is real: the worker does not finish an
 *     operation (nor let hipEventQuery succeed) before its end time has
 *     passed on the host clock.
 *   - Environment variables are read at each call that uses them.
 *
 * Control API (plain C, call through ctypes on the SAME file hip-python
 * loaded, so that both see one copy of the state):
 *   int  hipdouble_fail(const char *fn_name, int code, int count);
 *        The next `count` calls of HIP function `fn_name` return `code`
 *        without doing anything (count < 0: every call until reset; count 0
 *        cancels). Returns 0, or -1 if fn_name is not a function of this
 *        library. Injected errors also become the thread's last error.
 *   int  hipdouble_calls(const char *fn_name);
 *        Number of calls of `fn_name` since load or the last reset, failed
 *        ones included; -1 for an unknown name.
 *   void hipdouble_release_hangs(void);
 *        Lets every "hang" kernel launched so far complete (also those still
 *        queued behind other work). Later "hang" launches hang again.
 *   int  hipdouble_hung(void);
 *        Number of "hang" kernels a worker is currently stalled on, so a test
 *        can wait until the hang is really reached.
 *   void hipdouble_reset(void);
 *        Clears all injections, zeroes all call counts and releases hangs.
 *
 * Errors follow HIP where it is cheap to do so: unknown handles give
 * hipErrorInvalidHandle, bad pointers/sizes hipErrorInvalidValue, and every
 * failure except hipErrorNotReady becomes the calling thread's last error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* ---- HIP ABI subset ------------------------------------------------------
 * Enums are ints and handles are opaque pointers in the real headers, so
 * declaring them this way keeps the exported symbols ABI-compatible with what
 * hip-python's cyhip.pxd calls. */

typedef int hipError_t;
typedef struct hd_stream *hipStream_t;
typedef struct hd_event *hipEvent_t;
typedef struct hd_module *hipModule_t;
typedef struct hd_function *hipFunction_t;
typedef int hipMemcpyKind;
typedef struct dim3 {
    uint32_t x, y, z;
} dim3;

#define hipStreamNonBlocking 0x1u
#define hipEventDisableTiming 0x2u

#define HIPDOUBLE_VERSION 71500000 /* HIP 7.15.0, what hip-python 10.0 targets */
#define HIPDOUBLE_DEVICE_NAME "HIP double (host clock)"

/* (name, value, description). The description is what hipGetErrorString
 * returns; NULL falls back to the name. */
#define HIPDOUBLE_ERRORS(X)                                                   \
    X(hipSuccess, 0, "no error")                                              \
    X(hipErrorInvalidValue, 1, "invalid argument")                            \
    X(hipErrorOutOfMemory, 2, "out of memory")                                \
    X(hipErrorNotInitialized, 3, "initialization error")                      \
    X(hipErrorDeinitialized, 4, "driver shutting down")                       \
    X(hipErrorProfilerDisabled, 5, NULL)                                      \
    X(hipErrorProfilerNotInitialized, 6, NULL)                                \
    X(hipErrorProfilerAlreadyStarted, 7, NULL)                                \
    X(hipErrorProfilerAlreadyStopped, 8, NULL)                                \
    X(hipErrorInvalidConfiguration, 9, "invalid configuration argument")      \
    X(hipErrorInvalidPitchValue, 12, NULL)                                    \
    X(hipErrorInvalidSymbol, 13, NULL)                                        \
    X(hipErrorInvalidDevicePointer, 17, "invalid device pointer")             \
    X(hipErrorInvalidMemcpyDirection, 21, "invalid copy direction")           \
    X(hipErrorInsufficientDriver, 35, NULL)                                   \
    X(hipErrorMissingConfiguration, 52, NULL)                                 \
    X(hipErrorPriorLaunchFailure, 53, NULL)                                   \
    X(hipErrorInvalidDeviceFunction, 98, "invalid device function")           \
    X(hipErrorNoDevice, 100, "no ROCm-capable device is detected")            \
    X(hipErrorInvalidDevice, 101, "invalid device ordinal")                   \
    X(hipErrorInvalidImage, 200, "device kernel image is invalid")            \
    X(hipErrorInvalidContext, 201, "invalid device context")                  \
    X(hipErrorContextAlreadyCurrent, 202, NULL)                               \
    X(hipErrorMapFailed, 205, NULL)                                           \
    X(hipErrorUnmapFailed, 206, NULL)                                         \
    X(hipErrorArrayIsMapped, 207, NULL)                                       \
    X(hipErrorAlreadyMapped, 208, NULL)                                       \
    X(hipErrorNoBinaryForGpu, 209, NULL)                                      \
    X(hipErrorAlreadyAcquired, 210, NULL)                                     \
    X(hipErrorNotMapped, 211, NULL)                                           \
    X(hipErrorNotMappedAsArray, 212, NULL)                                    \
    X(hipErrorNotMappedAsPointer, 213, NULL)                                  \
    X(hipErrorECCNotCorrectable, 214, NULL)                                   \
    X(hipErrorUnsupportedLimit, 215, NULL)                                    \
    X(hipErrorContextAlreadyInUse, 216, NULL)                                 \
    X(hipErrorPeerAccessUnsupported, 217, NULL)                               \
    X(hipErrorInvalidKernelFile, 218, NULL)                                   \
    X(hipErrorInvalidGraphicsContext, 219, NULL)                              \
    X(hipErrorInvalidSource, 300, NULL)                                       \
    X(hipErrorFileNotFound, 301, "file not found")                            \
    X(hipErrorSharedObjectSymbolNotFound, 302, NULL)                          \
    X(hipErrorSharedObjectInitFailed, 303, NULL)                              \
    X(hipErrorOperatingSystem, 304, NULL)                                     \
    X(hipErrorInvalidHandle, 400, "invalid resource handle")                  \
    X(hipErrorIllegalState, 401, NULL)                                        \
    X(hipErrorNotFound, 500, "named symbol not found")                        \
    X(hipErrorNotReady, 600, "device not ready")                              \
    X(hipErrorIllegalAddress, 700, "an illegal memory access was encountered") \
    X(hipErrorLaunchOutOfResources, 701, "too many resources requested for launch") \
    X(hipErrorLaunchTimeOut, 702, "the launch timed out and was terminated")  \
    X(hipErrorPeerAccessAlreadyEnabled, 704, NULL)                            \
    X(hipErrorPeerAccessNotEnabled, 705, NULL)                                \
    X(hipErrorSetOnActiveProcess, 708, NULL)                                  \
    X(hipErrorContextIsDestroyed, 709, NULL)                                  \
    X(hipErrorAssert, 710, "device-side assert triggered")                    \
    X(hipErrorHostMemoryAlreadyRegistered, 712, NULL)                         \
    X(hipErrorHostMemoryNotRegistered, 713, NULL)                             \
    X(hipErrorLaunchFailure, 719, "unspecified launch failure")               \
    X(hipErrorCooperativeLaunchTooLarge, 720, NULL)                           \
    X(hipErrorNotSupported, 801, "operation not supported")                   \
    X(hipErrorStreamCaptureUnsupported, 900, NULL)                            \
    X(hipErrorStreamCaptureInvalidated, 901, NULL)                            \
    X(hipErrorStreamCaptureMerge, 902, NULL)                                  \
    X(hipErrorStreamCaptureUnmatched, 903, NULL)                              \
    X(hipErrorStreamCaptureUnjoined, 904, NULL)                               \
    X(hipErrorStreamCaptureIsolation, 905, NULL)                              \
    X(hipErrorStreamCaptureImplicit, 906, NULL)                               \
    X(hipErrorCapturedEvent, 907, NULL)                                       \
    X(hipErrorStreamCaptureWrongThread, 908, NULL)                            \
    X(hipErrorGraphExecUpdateFailure, 910, NULL)                              \
    X(hipErrorInvalidChannelDescriptor, 911, NULL)                            \
    X(hipErrorInvalidTexture, 912, NULL)                                      \
    X(hipErrorInvalidResourceType, 914, NULL)                                 \
    X(hipErrorInvalidResourceConfiguration, 915, NULL)                        \
    X(hipErrorStreamDetached, 916, NULL)                                      \
    X(hipErrorUnknown, 999, "unknown error")                                  \
    X(hipErrorRuntimeMemory, 1052, NULL)                                      \
    X(hipErrorRuntimeOther, 1053, NULL)                                       \
    X(hipErrorInvalidClusterSize, 1054, NULL)                                 \
    X(hipErrorTbd, 1055, NULL)

enum {
#define X(name, value, desc) name = value,
    HIPDOUBLE_ERRORS(X)
#undef X
};

/* Every exported HIP function, for call counting and error injection. */
#define HIPDOUBLE_FUNCS(X)                                                    \
    X(hipGetDeviceCount) X(hipGetDevice) X(hipSetDevice) X(hipDeviceGetName)  \
    X(hipRuntimeGetVersion) X(hipDriverGetVersion) X(hipDeviceSynchronize)    \
    X(hipGetLastError) X(hipPeekAtLastError) X(hipGetErrorName)               \
    X(hipGetErrorString) X(hipStreamCreate) X(hipStreamCreateWithFlags)       \
    X(hipStreamDestroy) X(hipStreamSynchronize) X(hipStreamQuery)             \
    X(hipStreamWaitEvent) X(hipEventCreate) X(hipEventCreateWithFlags)        \
    X(hipEventRecord) X(hipEventQuery) X(hipEventSynchronize)                 \
    X(hipEventElapsedTime) X(hipEventDestroy) X(hipModuleLoadData)            \
    X(hipModuleLoad) X(hipModuleUnload) X(hipModuleGetFunction)               \
    X(hipModuleLaunchKernel) X(hipLaunchKernel) X(hipExtLaunchKernel)         \
    X(hipMalloc) X(hipFree) X(hipHostMalloc) X(hipHostFree) X(hipMemcpy)      \
    X(hipMemcpyAsync) X(hipMemset) X(hipMemsetAsync) X(hipMallocAsync)       \
    X(hipFreeAsync) X(hipMallocManaged) X(hipExtMallocWithFlags)

enum fn_id {
#define X(name) FN_##name,
    HIPDOUBLE_FUNCS(X)
#undef X
    FN_COUNT
};

static const char *const fn_names[FN_COUNT] = {
#define X(name) #name,
    HIPDOUBLE_FUNCS(X)
#undef X
};

/* ---- global state ---------------------------------------------------------
 * One mutex guards everything. Nothing here is performance critical, and a
 * single lock makes the cross-object waits (event <- stream <- hang release)
 * trivially race-free. Workers drop it while they sleep or copy. */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast whenever any operation completes, an event is stamped, a stream
 * goes away or hangs are released; every host-side wait loops on it. */
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static struct {
    long calls;
    int fail_code;
    long fail_left; /* < 0: forever */
} g_fn[FN_COUNT];

static uint64_t g_seq;          /* enqueue order of all operations */
static uint64_t g_next_id = 1;  /* object ids, never reused */
static uint64_t g_release_gen;  /* bumped by hipdouble_release_hangs */
static int g_hung;              /* "hang" kernels currently stalled */

static __thread hipError_t t_last_error = hipSuccess;
static __thread int t_device = 0;

/* Ceiling for any simulated duration (~146 years): keeps start + duration
 * far from int64 overflow, which would turn an endless op into an instant one. */
#define MAX_OP_NS ((uint64_t)INT64_MAX / 2)

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- handle registry ------------------------------------------------------
 * Python callers can pass any integer as a handle, so handles are validated
 * against the set of live objects instead of being dereferenced blindly. Each
 * object also carries an id that is never reused, so work queued against an
 * object that was destroyed (and whose address malloc handed out again)
 * cannot touch its successor. */

enum kind { K_STREAM = 1, K_EVENT, K_MODULE, K_FUNCTION, K_DEVMEM, K_HOSTMEM };

struct obj {
    uintptr_t key; /* the handle value the caller sees */
    int kind;
    uint64_t id;
    struct obj *next;
};

#define NBUCKETS 4096
static struct obj *g_buckets[NBUCKETS];

static size_t bucket_of(uintptr_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 52); /* 12 bits */
}

static void reg_add(struct obj *o, uintptr_t key, int kind)
{
    size_t b = bucket_of(key);
    o->key = key;
    o->kind = kind;
    o->id = g_next_id++;
    o->next = g_buckets[b];
    g_buckets[b] = o;
}

static void reg_del(struct obj *o)
{
    struct obj **p = &g_buckets[bucket_of(o->key)];
    while (*p && *p != o)
        p = &(*p)->next;
    if (*p)
        *p = o->next;
}

static struct obj *reg_find(uintptr_t key, int kind)
{
    for (struct obj *o = g_buckets[bucket_of(key)]; o; o = o->next)
        if (o->key == key && o->kind == kind)
            return o;
    return NULL;
}

/* ---- objects -------------------------------------------------------------- */

enum op_kind { OP_SLEEP, OP_HANG, OP_COPY, OP_SET, OP_RECORD, OP_WAIT_EVENT, OP_FREE, OP_EXIT };

struct op {
    struct op *next;
    enum op_kind kind;
    uint64_t seq;
    int64_t t_submit; /* host clock at enqueue */
    uint64_t ns;      /* simulated device time */
    void *dst;
    const void *src;
    size_t bytes;
    int value;
    struct hd_event *ev; /* OP_RECORD / OP_WAIT_EVENT: (ev, ev_id) validated on use */
    uint64_t ev_id, ev_seq;
    uint64_t hang_gen;
};

struct hd_stream {
    struct obj hdr; /* registered while the handle is valid (not the NULL stream) */
    unsigned flags;
    pthread_cond_t work_cv;
    struct op *head, *tail;
    struct op *cur; /* executing now; still counts as pending */
    int64_t t_free; /* device clock: end of the last completed op */
    /* Streams with a live worker, destroyed-but-draining ones included, so
     * that device-wide waits see all outstanding work. */
    struct hd_stream *all_next, *all_prev;
};

struct hd_event {
    struct obj hdr;
    unsigned flags;
    uint64_t record_seq; /* bumped per hipEventRecord; 0 = never recorded */
    uint64_t done_seq;   /* record_seq of the latest record a worker reached */
    int64_t t_ns;
};

struct hd_function;

struct hd_module {
    struct obj hdr;
    const void *image; /* kept for debugging only; never dereferenced later */
    char *path;
    struct hd_function *functions;
};

struct hd_function {
    struct obj hdr;
    struct hd_module *module;
    struct hd_function *next_in_module;
    char name[];
};

struct hd_alloc {
    struct obj hdr; /* key = the user pointer */
};

static struct hd_stream *g_null_stream;
static struct hd_stream *g_streams; /* list head, see all_next */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* ---- worker --------------------------------------------------------------- */

/* Nanosleep alone overshoots by tens of microseconds, which would show up in
 * every event-timed kernel, so sleep most of the way and spin the rest. */
static void wait_until(int64_t deadline)
{
    const int64_t spin_ns = 200000;
    int64_t sleep_to = deadline - spin_ns;
    if (sleep_to > now_ns()) {
        struct timespec ts = {.tv_sec = sleep_to / 1000000000, .tv_nsec = sleep_to % 1000000000};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while (now_ns() < deadline)
        ;
}

static uint64_t oldest_pending(const struct hd_stream *s)
{
    if (s->cur)
        return s->cur->seq;
    return s->head ? s->head->seq : UINT64_MAX;
}

static struct hd_event *live_event(struct hd_event *ev, uint64_t id)
{
    struct obj *o = reg_find((uintptr_t)ev, K_EVENT);
    return (o && o->id == id) ? ev : NULL;
}

/* Runs op, which starts at device time `start`, and returns its end time.
 * Called and returns with g_lock held. */
static int64_t run_op(struct op *op, int64_t start)
{
    struct hd_event *ev;
    int64_t end = start, t0;
    switch (op->kind) {
    case OP_SLEEP:
        end = start + (int64_t)op->ns;
        pthread_mutex_unlock(&g_lock);
        wait_until(end);
        pthread_mutex_lock(&g_lock);
        break;
    case OP_COPY:
    case OP_SET:
        pthread_mutex_unlock(&g_lock);
        t0 = now_ns();
        if (op->kind == OP_COPY)
            memmove(op->dst, op->src, op->bytes);
        else
            memset(op->dst, op->value, op->bytes);
        end = start + (now_ns() - t0) + (int64_t)op->ns;
        wait_until(end);
        pthread_mutex_lock(&g_lock);
        break;
    case OP_HANG:
        g_hung++;
        pthread_cond_broadcast(&g_cv);
        while (g_release_gen <= op->hang_gen)
            pthread_cond_wait(&g_cv, &g_lock);
        g_hung--;
        end = now_ns(); /* the hang lasted until the release, in real time */
        if (end < start)
            end = start;
        break;
    case OP_RECORD:
        ev = live_event(op->ev, op->ev_id);
        /* A later record of the same event may already have completed on
         * another stream; the event reflects the latest record only. */
        if (ev && op->ev_seq > ev->done_seq) {
            ev->done_seq = op->ev_seq;
            ev->t_ns = start;
        }
        break;
    case OP_WAIT_EVENT:
        while ((ev = live_event(op->ev, op->ev_id)) && ev->done_seq < op->ev_seq)
            pthread_cond_wait(&g_cv, &g_lock);
        if (ev && ev->t_ns > end)
            end = ev->t_ns;
        break;
    case OP_FREE: /* hipFreeAsync: the memory goes back when the stream reaches it */
        free(op->dst);
        break;
    case OP_EXIT:
        break;
    }
    return end;
}

static void *worker(void *arg)
{
    struct hd_stream *s = arg;
    struct op *op;
    /* Default timer slack (50 us) would make short kernels visibly late. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    pthread_mutex_lock(&g_lock);
    for (;;) {
        while (!s->head)
            pthread_cond_wait(&s->work_cv, &g_lock);
        op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        if (op->kind == OP_EXIT)
            break;
        s->cur = op;
        s->t_free = run_op(op, op->t_submit > s->t_free ? op->t_submit : s->t_free);
        s->cur = NULL;
        free(op);
        pthread_cond_broadcast(&g_cv);
    }
    /* Destroyed and drained (OP_EXIT is always last): leave and free. */
    if (s->all_prev)
        s->all_prev->all_next = s->all_next;
    else
        g_streams = s->all_next;
    if (s->all_next)
        s->all_next->all_prev = s->all_prev;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_lock);
    pthread_cond_destroy(&s->work_cv);
    free(op);
    free(s);
    return NULL;
}

/* Called with g_lock held. Workers are detached: a destroyed stream's worker
 * drains its queue and frees the stream itself, so destroy never blocks (as in
 * HIP) and nothing is left to join at exit. */
static struct hd_stream *stream_new(unsigned flags)
{
    pthread_attr_t attr;
    pthread_t tid;
    struct hd_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->flags = flags;
    pthread_cond_init(&s->work_cv, NULL);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&tid, &attr, worker, s) != 0) {
        pthread_attr_destroy(&attr);
        pthread_cond_destroy(&s->work_cv);
        free(s);
        return NULL;
    }
    pthread_attr_destroy(&attr);
    s->all_next = g_streams;
    if (g_streams)
        g_streams->all_prev = s;
    g_streams = s;
    return s;
}

static void init_once(void)
{
    pthread_mutex_lock(&g_lock);
    g_null_stream = stream_new(0);
    pthread_mutex_unlock(&g_lock);
    /* Without a NULL stream nothing can work; fail loudly rather than later. */
    if (!g_null_stream)
        abort();
}

/* Called with g_lock held. Takes ownership of op. Returns its sequence.
 * Ops enqueued by one API call share one submit time, so that waking the
 * worker in between does not open a gap on the device clock. */
static uint64_t enqueue_at(struct hd_stream *s, struct op *op, int64_t t_submit)
{
    op->seq = ++g_seq;
    op->t_submit = t_submit;
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->work_cv);
    return op->seq;
}

static uint64_t enqueue(struct hd_stream *s, struct op *op)
{
    return enqueue_at(s, op, now_ns());
}

static struct op *op_new(enum op_kind kind)
{
    struct op *op = calloc(1, sizeof *op);
    if (op)
        op->kind = kind;
    return op;
}

/* NULL is the default stream; anything else must be a live stream handle. */
static struct hd_stream *stream_of(hipStream_t h)
{
    if (!h)
        return g_null_stream;
    return (struct hd_stream *)reg_find((uintptr_t)h, K_STREAM);
}

static int stream_alive(const struct hd_stream *s)
{
    for (const struct hd_stream *t = g_streams; t; t = t->all_next)
        if (t == s)
            return 1;
    return 0;
}

/* Any pending op with seq <= ticket on the streams selected by `which`:
 * 0 = all streams, 1 = NULL stream + blocking streams. */
static int device_busy(uint64_t ticket, int which)
{
    for (const struct hd_stream *s = g_streams; s; s = s->all_next) {
        if (which == 1 && s != g_null_stream && (s->flags & hipStreamNonBlocking))
            continue;
        if (oldest_pending(s) <= ticket)
            return 1;
    }
    return 0;
}

static void wait_device(int which)
{
    uint64_t ticket = g_seq;
    while (device_busy(ticket, which))
        pthread_cond_wait(&g_cv, &g_lock);
}

/* ---- entry/exit bookkeeping ----------------------------------------------- */

static hipError_t enter(enum fn_id id)
{
    hipError_t code = hipSuccess;
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_lock);
    g_fn[id].calls++;
    if (g_fn[id].fail_left != 0) {
        code = g_fn[id].fail_code;
        if (g_fn[id].fail_left > 0)
            g_fn[id].fail_left--;
    }
    pthread_mutex_unlock(&g_lock);
    return code;
}

/* hipErrorNotReady is a status, not a failure, so it is not remembered. */
static hipError_t done(hipError_t e)
{
    if (e != hipSuccess && e != hipErrorNotReady)
        t_last_error = e;
    return e;
}

#define ENTER(name)                                                           \
    do {                                                                      \
        hipError_t injected_ = enter(FN_##name);                              \
        if (injected_ != hipSuccess)                                          \
            return done(injected_);                                           \
    } while (0)

#define UNLOCK_RETURN(e)                                                      \
    do {                                                                      \
        hipError_t e_ = (e);                                                  \
        pthread_mutex_unlock(&g_lock);                                        \
        return done(e_);                                                      \
    } while (0)

static int env_devices(void)
{
    const char *v = getenv("HIPDOUBLE_DEVICES");
    char *end;
    long n;
    if (!v || !*v)
        return 1;
    n = strtol(v, &end, 10);
    return (*end || n < 0 || n > 1024) ? 1 : (int)n;
}

static uint64_t transfer_ns(size_t bytes)
{
    const char *v = getenv("HIPDOUBLE_BYTES_PER_US");
    double rate = 1000.0;
    if (v && *v) {
        char *end;
        double r = strtod(v, &end);
        if (!*end && r > 0) /* NaN fails r > 0 too */
            rate = r;
    }
    double ns = (double)bytes * 1000.0 / rate; /* 0 for rate = inf */
    return ns >= (double)MAX_OP_NS ? MAX_OP_NS : (uint64_t)ns;
}

/* ---- device and runtime --------------------------------------------------- */

hipError_t hipGetDeviceCount(int *count)
{
    int n;
    ENTER(hipGetDeviceCount);
    if (!count)
        return done(hipErrorInvalidValue);
    n = env_devices();
    *count = n;
    return done(n ? hipSuccess : hipErrorNoDevice);
}

hipError_t hipGetDevice(int *deviceId)
{
    ENTER(hipGetDevice);
    if (!deviceId)
        return done(hipErrorInvalidValue);
    *deviceId = t_device;
    return hipSuccess;
}

hipError_t hipSetDevice(int deviceId)
{
    ENTER(hipSetDevice);
    if (deviceId < 0 || deviceId >= env_devices())
        return done(hipErrorInvalidDevice);
    t_device = deviceId;
    return hipSuccess;
}

hipError_t hipDeviceGetName(char *name, int len, int device)
{
    ENTER(hipDeviceGetName);
    if (device < 0 || device >= env_devices())
        return done(hipErrorInvalidDevice);
    if (!name || len <= 0)
        return done(hipErrorInvalidValue);
    strncpy(name, HIPDOUBLE_DEVICE_NAME, (size_t)len - 1);
    name[len - 1] = '\0';
    return hipSuccess;
}

hipError_t hipRuntimeGetVersion(int *runtimeVersion)
{
    ENTER(hipRuntimeGetVersion);
    if (!runtimeVersion)
        return done(hipErrorInvalidValue);
    *runtimeVersion = HIPDOUBLE_VERSION;
    return hipSuccess;
}

hipError_t hipDriverGetVersion(int *driverVersion)
{
    ENTER(hipDriverGetVersion);
    if (!driverVersion)
        return done(hipErrorInvalidValue);
    *driverVersion = HIPDOUBLE_VERSION;
    return hipSuccess;
}

hipError_t hipDeviceSynchronize(void)
{
    ENTER(hipDeviceSynchronize);
    pthread_mutex_lock(&g_lock);
    wait_device(0);
    UNLOCK_RETURN(hipSuccess);
}

hipError_t hipGetLastError(void)
{
    hipError_t e;
    ENTER(hipGetLastError);
    e = t_last_error;
    t_last_error = hipSuccess;
    return e;
}

hipError_t hipPeekAtLastError(void)
{
    ENTER(hipPeekAtLastError);
    return t_last_error;
}

/* These two return strings, so they are counted but cannot be failed. */
const char *hipGetErrorName(hipError_t hip_error)
{
    (void)enter(FN_hipGetErrorName);
    switch (hip_error) {
#define X(name, value, desc) case value: return #name;
        HIPDOUBLE_ERRORS(X)
#undef X
    }
    return "hipErrorUnknown";
}

const char *hipGetErrorString(hipError_t hipError)
{
    (void)enter(FN_hipGetErrorString);
    switch (hipError) {
#define X(name, value, desc) case value: return (desc) ? (desc) : #name;
        HIPDOUBLE_ERRORS(X)
#undef X
    }
    return "unknown error";
}

/* ---- streams -------------------------------------------------------------- */

static hipError_t stream_create(hipStream_t *stream, unsigned int flags)
{
    struct hd_stream *s;
    if (!stream)
        return hipErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    s = stream_new(flags);
    if (s) {
        reg_add(&s->hdr, (uintptr_t)s, K_STREAM);
        *stream = s;
    }
    pthread_mutex_unlock(&g_lock);
    return s ? hipSuccess : hipErrorOutOfMemory;
}

hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags)
{
    ENTER(hipStreamCreateWithFlags);
    return done(stream_create(stream, flags));
}

hipError_t hipStreamCreate(hipStream_t *stream)
{
    ENTER(hipStreamCreate);
    return done(stream_create(stream, 0));
}

/* Returns at once; queued work still runs, then the worker frees the stream. */
hipError_t hipStreamDestroy(hipStream_t stream)
{
    struct hd_stream *s;
    struct op *op;
    ENTER(hipStreamDestroy);
    op = op_new(OP_EXIT);
    if (!op)
        return done(hipErrorOutOfMemory);
    pthread_mutex_lock(&g_lock);
    s = stream ? stream_of(stream) : NULL; /* the NULL stream cannot be destroyed */
    if (!s) {
        free(op);
        UNLOCK_RETURN(hipErrorInvalidHandle);
    }
    reg_del(&s->hdr);
    enqueue(s, op);
    UNLOCK_RETURN(hipSuccess);
}

hipError_t hipStreamSynchronize(hipStream_t stream)
{
    struct hd_stream *s;
    uint64_t ticket;
    ENTER(hipStreamSynchronize);
    pthread_mutex_lock(&g_lock);
    s = stream_of(stream);
    if (!s)
        UNLOCK_RETURN(hipErrorInvalidHandle);
    if (s == g_null_stream) {
        /* Documented HIP semantics: the NULL stream also waits for blocking streams. */
        wait_device(1);
        UNLOCK_RETURN(hipSuccess);
    }
    ticket = g_seq;
    /* The stream may be destroyed while we wait; once its worker has freed
     * it, all of its work is done. */
    while (stream_alive(s) && oldest_pending(s) <= ticket)
        pthread_cond_wait(&g_cv, &g_lock);
    UNLOCK_RETURN(hipSuccess);
}

hipError_t hipStreamQuery(hipStream_t stream)
{
    struct hd_stream *s;
    ENTER(hipStreamQuery);
    pthread_mutex_lock(&g_lock);
    s = stream_of(stream);
    if (!s)
        UNLOCK_RETURN(hipErrorInvalidHandle);
    UNLOCK_RETURN(oldest_pending(s) == UINT64_MAX ? hipSuccess : hipErrorNotReady);
}

hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
    struct hd_stream *s;
    struct hd_event *ev;
    struct op *op;
    (void)flags;
    ENTER(hipStreamWaitEvent);
    op = op_new(OP_WAIT_EVENT);
    if (!op)
        return done(hipErrorOutOfMemory);
    pthread_mutex_lock(&g_lock);
    s = stream_of(stream);
    ev = (struct hd_event *)reg_find((uintptr_t)event, K_EVENT);
    if (!s || !ev) {
        free(op);
        UNLOCK_RETURN(hipErrorInvalidHandle);
    }
    if (ev->record_seq == 0) { /* never recorded: nothing to wait for */
        free(op);
        UNLOCK_RETURN(hipSuccess);
    }
    op->ev = ev;
    op->ev_id = ev->hdr.id;
    op->ev_seq = ev->record_seq;
    enqueue(s, op);
    UNLOCK_RETURN(hipSuccess);
}

/* ---- events --------------------------------------------------------------- */

static hipError_t event_create(hipEvent_t *event, unsigned int flags)
{
    struct hd_event *ev;
    if (!event)
        return hipErrorInvalidValue;
    ev = calloc(1, sizeof *ev);
    if (!ev)
        return hipErrorOutOfMemory;
    ev->flags = flags;
    pthread_mutex_lock(&g_lock);
    reg_add(&ev->hdr, (uintptr_t)ev, K_EVENT);
    pthread_mutex_unlock(&g_lock);
    *event = ev;
    return hipSuccess;
}

hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags)
{
    ENTER(hipEventCreateWithFlags);
    return done(event_create(event, flags));
}

hipError_t hipEventCreate(hipEvent_t *event)
{
    ENTER(hipEventCreate);
    return done(event_create(event, 0));
}

/* Called with g_lock held; ev and s already validated. */
static void record_locked(struct hd_event *ev, struct hd_stream *s, struct op *op, int64_t t)
{
    op->ev = ev;
    op->ev_id = ev->hdr.id;
    op->ev_seq = ++ev->record_seq;
    enqueue_at(s, op, t);
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)
{
    struct hd_stream *s;
    struct hd_event *ev;
    struct op *op;
    ENTER(hipEventRecord);
    op = op_new(OP_RECORD);
    if (!op)
        return done(hipErrorOutOfMemory);
    pthread_mutex_lock(&g_lock);
    ev = (struct hd_event *)reg_find((uintptr_t)event, K_EVENT);
    s = stream_of(stream);
    if (!ev || !s) {
        free(op);
        UNLOCK_RETURN(hipErrorInvalidHandle);
    }
    record_locked(ev, s, op, now_ns());
    UNLOCK_RETURN(hipSuccess);
}

/* A never-recorded event counts as complete, as in CUDA/HIP. */
hipError_t hipEventQuery(hipEvent_t event)
{
    struct hd_event *ev;
    ENTER(hipEventQuery);
    pthread_mutex_lock(&g_lock);
    ev = (struct hd_event *)reg_find((uintptr_t)event, K_EVENT);
    if (!ev)
        UNLOCK_RETURN(hipErrorInvalidHandle);
    UNLOCK_RETURN(ev->done_seq == ev->record_seq ? hipSuccess : hipErrorNotReady);
}

hipError_t hipEventSynchronize(hipEvent_t event)
{
    struct hd_event *ev;
    uint64_t id, target;
    ENTER(hipEventSynchronize);
    pthread_mutex_lock(&g_lock);
    ev = (struct hd_event *)reg_find((uintptr_t)event, K_EVENT);
    if (!ev)
        UNLOCK_RETURN(hipErrorInvalidHandle);
    id = ev->hdr.id;
    target = ev->record_seq;
    while (live_event(ev, id) && ev->done_seq < target)
        pthread_cond_wait(&g_cv, &g_lock);
    UNLOCK_RETURN(hipSuccess);
}

hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop)
{
    struct hd_event *a, *b;
    ENTER(hipEventElapsedTime);
    if (!ms)
        return done(hipErrorInvalidValue);
    pthread_mutex_lock(&g_lock);
    a = (struct hd_event *)reg_find((uintptr_t)start, K_EVENT);
    b = (struct hd_event *)reg_find((uintptr_t)stop, K_EVENT);
    if (!a || !b || !a->record_seq || !b->record_seq ||
        ((a->flags | b->flags) & hipEventDisableTiming))
        UNLOCK_RETURN(hipErrorInvalidHandle);
    if (a->done_seq != a->record_seq || b->done_seq != b->record_seq)
        UNLOCK_RETURN(hipErrorNotReady);
    *ms = (float)((double)(b->t_ns - a->t_ns) / 1e6);
    UNLOCK_RETURN(hipSuccess);
}

/* Pending records of a destroyed event are skipped by the worker (id check). */
hipError_t hipEventDestroy(hipEvent_t event)
{
    struct hd_event *ev;
    ENTER(hipEventDestroy);
    pthread_mutex_lock(&g_lock);
    ev = (struct hd_event *)reg_find((uintptr_t)event, K_EVENT);
    if (!ev)
        UNLOCK_RETURN(hipErrorInvalidHandle);
    reg_del(&ev->hdr);
    pthread_cond_broadcast(&g_cv); /* hipEventSynchronize waiters re-check */
    pthread_mutex_unlock(&g_lock);
    free(ev);
    return hipSuccess;
}

/* ---- modules and launches ------------------------------------------------- */

static hipError_t module_new(hipModule_t *module, const void *image, const char *path)
{
    struct hd_module *m = calloc(1, sizeof *m);
    if (!m)
        return hipErrorOutOfMemory;
    m->image = image;
    if (path && !(m->path = strdup(path))) {
        free(m);
        return hipErrorOutOfMemory;
    }
    pthread_mutex_lock(&g_lock);
    reg_add(&m->hdr, (uintptr_t)m, K_MODULE);
    pthread_mutex_unlock(&g_lock);
    *module = m;
    return hipSuccess;
}

/* The image is not parsed (its size is not even known), so any bytes load. */
hipError_t hipModuleLoadData(hipModule_t *module, const void *image)
{
    ENTER(hipModuleLoadData);
    if (!module || !image)
        return done(hipErrorInvalidValue);
    return done(module_new(module, image, NULL));
}

/* The file is not opened: kernels in tests have no real code. */
hipError_t hipModuleLoad(hipModule_t *module, const char *fname)
{
    ENTER(hipModuleLoad);
    if (!module || !fname)
        return done(hipErrorInvalidValue);
    return done(module_new(module, NULL, fname));
}

hipError_t hipModuleUnload(hipModule_t module)
{
    struct hd_module *m;
    struct hd_function *f, *next;
    ENTER(hipModuleUnload);
    pthread_mutex_lock(&g_lock);
    m = (struct hd_module *)reg_find((uintptr_t)module, K_MODULE);
    if (!m)
        UNLOCK_RETURN(hipErrorInvalidHandle);
    reg_del(&m->hdr);
    for (f = m->functions; f; f = f->next_in_module)
        reg_del(&f->hdr);
    pthread_mutex_unlock(&g_lock);
    /* Queued launches copied what they need, so freeing is safe now. */
    for (f = m->functions; f; f = next) {
        next = f->next_in_module;
        free(f);
    }
    free(m->path);
    free(m);
    return hipSuccess;
}

/* Every name exists; asking twice for a name gives the same handle, as in HIP. */
hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module, const char *kname)
{
    struct hd_module *m;
    struct hd_function *f;
    size_t n;
    ENTER(hipModuleGetFunction);
    if (!function || !kname)
        return done(hipErrorInvalidValue);
    pthread_mutex_lock(&g_lock);
    m = (struct hd_module *)reg_find((uintptr_t)module, K_MODULE);
    if (!m)
        UNLOCK_RETURN(hipErrorInvalidHandle);
    for (f = m->functions; f; f = f->next_in_module)
        if (strcmp(f->name, kname) == 0)
            break;
    if (!f) {
        n = strlen(kname);
        f = malloc(sizeof *f + n + 1);
        if (!f)
            UNLOCK_RETURN(hipErrorOutOfMemory);
        memcpy(f->name, kname, n + 1);
        f->module = m;
        f->next_in_module = m->functions;
        m->functions = f;
        reg_add(&f->hdr, (uintptr_t)f, K_FUNCTION);
    }
    *function = f;
    UNLOCK_RETURN(hipSuccess);
}

/* Called with g_lock held; s validated. The kernel's duration is its grid size
 * in microseconds, so tests choose kernel times through the launch geometry. */
static hipError_t launch_locked(const char *name, uint32_t gx, uint32_t gy, uint32_t gz,
                                struct hd_stream *s, struct op *op, int64_t t)
{
    uint64_t us;
    if (name && strcmp(name, "hang") == 0) {
        op->kind = OP_HANG;
        op->hang_gen = g_release_gen;
    } else {
        op->kind = OP_SLEEP;
        /* gx * gy fits in 64 bits; the rest can overflow. */
        if (__builtin_mul_overflow((uint64_t)gx * gy, (uint64_t)gz, &us) || us > MAX_OP_NS / 1000)
            op->ns = MAX_OP_NS;
        else
            op->ns = us * 1000;
    }
    enqueue_at(s, op, t);
    return hipSuccess;
}

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY,
                                 unsigned int gridDimZ, unsigned int blockDimX,
                                 unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, hipStream_t stream,
                                 void **kernelParams, void **extra)
{
    struct hd_function *fn;
    struct hd_stream *s;
    struct op *op;
    (void)sharedMemBytes;
    ENTER(hipModuleLaunchKernel);
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
        return done(hipErrorInvalidValue);
    if (kernelParams && extra) /* HIP rejects giving both */
        return done(hipErrorInvalidValue);
    op = op_new(OP_SLEEP);
    if (!op)
        return done(hipErrorOutOfMemory);
    pthread_mutex_lock(&g_lock);
    fn = (struct hd_function *)reg_find((uintptr_t)f, K_FUNCTION);
    s = stream_of(stream);
    if (!fn || !s) {
        free(op);
        UNLOCK_RETURN(hipErrorInvalidHandle);
    }
    UNLOCK_RETURN(launch_locked(fn->name, gridDimX, gridDimY, gridDimZ, s, op, now_ns()));
}

/* Shared by hipLaunchKernel and hipExtLaunchKernel. There is no host stub to
 * look up: a handle from hipModuleGetFunction keeps its name (so "hang"
 * works), any other non-NULL address is an anonymous kernel. */
static hipError_t launch_by_address(const void *function_address, dim3 grid, dim3 block,
                                    hipStream_t stream, hipEvent_t start, hipEvent_t stop)
{
    struct hd_function *fn;
    struct hd_stream *s;
    struct hd_event *e0 = NULL, *e1 = NULL;
    struct op *op = op_new(OP_SLEEP), *r0 = op_new(OP_RECORD), *r1 = op_new(OP_RECORD);
    hipError_t e = hipSuccess;
    int64_t t;
    if (!function_address)
        e = hipErrorInvalidDeviceFunction;
    else if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        e = hipErrorInvalidValue;
    else if (!op || !r0 || !r1)
        e = hipErrorOutOfMemory;
    if (e != hipSuccess)
        goto out;
    pthread_mutex_lock(&g_lock);
    fn = (struct hd_function *)reg_find((uintptr_t)function_address, K_FUNCTION);
    s = stream_of(stream);
    if (start)
        e0 = (struct hd_event *)reg_find((uintptr_t)start, K_EVENT);
    if (stop)
        e1 = (struct hd_event *)reg_find((uintptr_t)stop, K_EVENT);
    if (!s || (start && !e0) || (stop && !e1)) {
        pthread_mutex_unlock(&g_lock);
        e = hipErrorInvalidHandle;
        goto out;
    }
    t = now_ns();
    if (e0) {
        record_locked(e0, s, r0, t);
        r0 = NULL;
    }
    launch_locked(fn ? fn->name : NULL, grid.x, grid.y, grid.z, s, op, t);
    op = NULL;
    if (e1) {
        record_locked(e1, s, r1, t);
        r1 = NULL;
    }
    pthread_mutex_unlock(&g_lock);
out:
    free(op);
    free(r0);
    free(r1);
    return e;
}

hipError_t hipLaunchKernel(const void *function_address, dim3 numBlocks, dim3 dimBlocks,
                           void **args, size_t sharedMemBytes, hipStream_t stream)
{
    (void)args;
    (void)sharedMemBytes;
    ENTER(hipLaunchKernel);
    return done(launch_by_address(function_address, numBlocks, dimBlocks, stream, NULL, NULL));
}

hipError_t hipExtLaunchKernel(const void *function_address, dim3 numBlocks, dim3 dimBlocks,
                              void **args, size_t sharedMemBytes, hipStream_t stream,
                              hipEvent_t startEvent, hipEvent_t stopEvent, int flags)
{
    (void)args;
    (void)sharedMemBytes;
    (void)flags;
    ENTER(hipExtLaunchKernel);
    return done(launch_by_address(function_address, numBlocks, dimBlocks, stream, startEvent,
                                  stopEvent));
}

/* ---- memory --------------------------------------------------------------- */

static hipError_t alloc_new(void **ptr, size_t size, int kind)
{
    struct hd_alloc *a;
    void *mem;
    if (!ptr)
        return hipErrorInvalidValue;
    if (size == 0) {
        *ptr = NULL;
        return hipSuccess;
    }
    a = malloc(sizeof *a);
    /* 256-byte alignment like real device allocations, so alignment
     * assumptions in callers are not accidentally stricter on the double. */
    if (!a || posix_memalign(&mem, 256, size) != 0) {
        free(a);
        return hipErrorOutOfMemory;
    }
    pthread_mutex_lock(&g_lock);
    reg_add(&a->hdr, (uintptr_t)mem, kind);
    pthread_mutex_unlock(&g_lock);
    *ptr = mem;
    return hipSuccess;
}

/* Like HIP, freeing synchronises the whole device first, so queued copies
 * never touch freed memory. Consequence: it blocks while a "hang" kernel is
 * stalled anywhere. */
static hipError_t alloc_free(void *ptr, int kind)
{
    struct obj *o;
    if (!ptr)
        return hipSuccess;
    pthread_mutex_lock(&g_lock);
    o = reg_find((uintptr_t)ptr, kind);
    if (!o) {
        pthread_mutex_unlock(&g_lock);
        return hipErrorInvalidValue;
    }
    reg_del(o);
    wait_device(0);
    pthread_mutex_unlock(&g_lock);
    free(ptr);
    free(o);
    return hipSuccess;
}

hipError_t hipMalloc(void **ptr, size_t size)
{
    ENTER(hipMalloc);
    return done(alloc_new(ptr, size, K_DEVMEM));
}

hipError_t hipFree(void *ptr)
{
    ENTER(hipFree);
    return done(alloc_free(ptr, K_DEVMEM));
}

hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    ENTER(hipHostMalloc);
    return done(alloc_new(ptr, size, K_HOSTMEM));
}

hipError_t hipHostFree(void *ptr)
{
    ENTER(hipHostFree);
    return done(alloc_free(ptr, K_HOSTMEM));
}

/* Managed memory and hipExtMallocWithFlags' memory are device memory here
 * ("device memory" is host memory anyway), freed with hipFree. */
hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags)
{
    (void)flags;
    ENTER(hipMallocManaged);
    return done(alloc_new(dev_ptr, size, K_DEVMEM));
}

hipError_t hipExtMallocWithFlags(void **ptr, size_t sizeBytes, unsigned int flags)
{
    (void)flags;
    ENTER(hipExtMallocWithFlags);
    return done(alloc_new(ptr, sizeBytes, K_DEVMEM));
}

/* Stream-ordered allocation: the memory is handed out at once (the stream is
 * checked), as from a pool with memory to spare; freed with hipFree or
 * hipFreeAsync. */
hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream)
{
    struct hd_stream *s;
    ENTER(hipMallocAsync);
    pthread_mutex_lock(&g_lock);
    s = stream_of(stream);
    pthread_mutex_unlock(&g_lock);
    if (!s)
        return done(hipErrorInvalidHandle);
    return done(alloc_new(dev_ptr, size, K_DEVMEM));
}

/* Stream-ordered free: the pointer is invalid at once (a second free fails),
 * the memory goes back when the stream reaches the free (OP_FREE, no device
 * time), so work queued before it on the stream can still use it. */
hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream)
{
    struct hd_stream *s;
    struct obj *o;
    struct op *op;
    ENTER(hipFreeAsync);
    if (!dev_ptr)
        return done(hipSuccess);
    op = op_new(OP_FREE);
    if (!op)
        return done(hipErrorOutOfMemory);
    pthread_mutex_lock(&g_lock);
    s = stream_of(stream);
    o = reg_find((uintptr_t)dev_ptr, K_DEVMEM);
    if (!s || !o) {
        free(op);
        UNLOCK_RETURN(!s ? hipErrorInvalidHandle : hipErrorInvalidValue);
    }
    reg_del(o);
    free(o);
    op->dst = dev_ptr;
    enqueue(s, op);
    UNLOCK_RETURN(hipSuccess);
}

/* Builds and enqueues a copy (src != NULL) or memset; if `wait`, blocks until
 * it has run. Pointers are not checked against allocations: "device" and host
 * memory are the same, and numpy buffers are legitimate on both sides. */
static hipError_t transfer(void *dst, const void *src, int value, size_t bytes, int kind,
                           hipStream_t stream, int wait)
{
    struct hd_stream *s;
    struct op *op;
    uint64_t seq;
    if (kind < 0 || (kind > 4 && kind != 1024)) /* 1024: hipMemcpyDeviceToDeviceNoCU */
        return hipErrorInvalidMemcpyDirection;
    if (bytes && !dst)
        return hipErrorInvalidValue;
    op = op_new(src ? OP_COPY : OP_SET);
    if (!op)
        return hipErrorOutOfMemory;
    op->dst = dst;
    op->src = src;
    op->value = value;
    op->bytes = bytes;
    op->ns = transfer_ns(bytes);
    pthread_mutex_lock(&g_lock);
    s = stream_of(stream);
    if (!s) {
        pthread_mutex_unlock(&g_lock);
        free(op);
        return hipErrorInvalidHandle;
    }
    seq = enqueue(s, op);
    if (wait)
        while (oldest_pending(s) <= seq)
            pthread_cond_wait(&g_cv, &g_lock);
    pthread_mutex_unlock(&g_lock);
    return hipSuccess;
}

hipError_t hipMemcpy(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind)
{
    ENTER(hipMemcpy);
    if (sizeBytes && !src)
        return done(hipErrorInvalidValue);
    return done(transfer(dst, src, 0, sizeBytes, kind, NULL, 1));
}

hipError_t hipMemcpyAsync(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind,
                          hipStream_t stream)
{
    ENTER(hipMemcpyAsync);
    if (sizeBytes && !src)
        return done(hipErrorInvalidValue);
    return done(transfer(dst, src, 0, sizeBytes, kind, stream, 0));
}

hipError_t hipMemset(void *dst, int value, size_t sizeBytes)
{
    ENTER(hipMemset);
    return done(transfer(dst, NULL, value, sizeBytes, 0, NULL, 1));
}

hipError_t hipMemsetAsync(void *dst, int value, size_t sizeBytes, hipStream_t stream)
{
    ENTER(hipMemsetAsync);
    return done(transfer(dst, NULL, value, sizeBytes, 0, stream, 0));
}

/* ---- control API (see the header comment) --------------------------------- */

static int fn_lookup(const char *name)
{
    if (name)
        for (int i = 0; i < FN_COUNT; i++)
            if (strcmp(fn_names[i], name) == 0)
                return i;
    return -1;
}

int hipdouble_fail(const char *fn_name, int code, int count)
{
    int i = fn_lookup(fn_name);
    if (i < 0)
        return -1;
    pthread_mutex_lock(&g_lock);
    g_fn[i].fail_code = code;
    g_fn[i].fail_left = count;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int hipdouble_calls(const char *fn_name)
{
    int i = fn_lookup(fn_name);
    long n;
    if (i < 0)
        return -1;
    pthread_mutex_lock(&g_lock);
    n = g_fn[i].calls;
    pthread_mutex_unlock(&g_lock);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

void hipdouble_release_hangs(void)
{
    pthread_mutex_lock(&g_lock);
    g_release_gen++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_lock);
}

int hipdouble_hung(void)
{
    int n;
    pthread_mutex_lock(&g_lock);
    n = g_hung;
    pthread_mutex_unlock(&g_lock);
    return n;
}

void hipdouble_reset(void)
{
    pthread_mutex_lock(&g_lock);
    memset(g_fn, 0, sizeof g_fn);
    g_release_gen++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_lock);
}
