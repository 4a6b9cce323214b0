/*
 * cuptidouble.c - a host-only test double of NVIDIA's CUPTI Activity API (libcupti.so).
 *
 * TEST CODE ONLY. Never shipped. It lets kprof's CUPTI path run through the real
 * cupti-python bindings on machines without a GPU. It implements documented CUPTI
 * functions only, compiled against the public headers the nvidia-cuda-cupti wheel ships
 * (so every record's layout is the header's), and nothing of the CUDA runtime or driver.
 * See README.md for how it is built and loaded.
 *
 * Model
 *   - Activity kinds are enabled and disabled one by one; a record is written only while
 *     its kind is enabled (otherwise it is counted in cuptidouble_suppressed()).
 *   - Buffers come from the tool's buffer-requested callback. A buffer that cannot take the
 *     next record is complete: a delivery thread of the double hands it to the
 *     buffer-completed callback (as CUPTI does from its own thread). cuptiActivityFlushAll
 *     completes the current buffer too (if it holds records, or always with the FORCED
 *     flag) and returns after every completed buffer was delivered, in order. As CUPTI's
 *     header says, a flush without FORCED leaves a buffer that holds a record of work still
 *     running (a kernel, copy or memset whose end is later than now on the double's clock),
 *     and with it every record written before; cuptidouble_busy_until() says when the
 *     simulated devices finish all the work written so far.
 *     A record for which no buffer was given is dropped and counted
 *     (cuptiActivityGetNumDroppedRecords).
 *   - External correlation: every thread has one stack of ids per external kind
 *     (cuptiActivityPush/PopExternalCorrelationId). An API record made on a thread is
 *     preceded by one EXTERNAL_CORRELATION record per non-empty stack, with the top id,
 *     when that kind and the API record's kind are enabled (as CUPTI documents it).
 *   - Clock: CLOCK_MONOTONIC nanoseconds plus an offset the tests set
 *     (cuptidouble_set_clock_offset), so placement on perf_counter_ns can be checked exactly.
 *   - API records are written for an enabled RUNTIME/DRIVER kind, or for the APIs enabled
 *     one by one (cuptiActivityEnableDriverApi / cuptiActivityEnableRuntimeApi).
 *   - Subscribers: cuptidouble_set_busy(code) makes cuptiActivityEnable and
 *     cuptiActivityRegisterCallbacks fail with `code` (for example
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), as when another tool holds CUPTI.
 *   - Callback API: one subscriber (cuptiSubscribe; a second one, or one while
 *     cuptidouble_take_subscriber() holds it for "another tool", gets
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). Callbacks are enabled per domain and
 *     callback id (cuptiEnableCallback, cuptiEnableDomain). A simulated API call
 *     (cuptidouble_api) calls the subscriber on the calling thread at its entry, before any of
 *     its records is written, and at its exit, with the correlation id its records carry
 *     (CUpti_CallbackData), when that callback is enabled; calls delivered are counted.
 *
 * Control API (plain C, through ctypes on the same loaded file): see README.md.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

/* The newest record structs of the headers (build.py passes them): what a libcupti built
 * from these headers writes and the matching cupti-python reads. */
#ifndef KERNEL_RECORD
#define KERNEL_RECORD CUpti_ActivityKernel9
#endif
#ifndef MEMCPY_RECORD
#define MEMCPY_RECORD CUpti_ActivityMemcpy6
#endif
#ifndef MEMSET_RECORD
#define MEMSET_RECORD CUpti_ActivityMemset4
#endif
#ifndef MEMORY_RECORD
#define MEMORY_RECORD CUpti_ActivityMemory4
#endif

#define MAX_DEPTH 64
#define N_EXT_KINDS 8
#define MAX_STREAMS 1024
#define MAX_NAMES 4096
#define MAX_PENDING 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t delivery = PTHREAD_MUTEX_INITIALIZER; /* one delivery at a time */

static CUpti_BuffersCallbackRequestFunc on_request;
static CUpti_BuffersCallbackCompleteFunc on_complete;
static int enabled[CUPTI_ACTIVITY_KIND_COUNT];
/* Per-API enabling (cuptiActivityEnableDriverApi / ...RuntimeApi), by callback id. */
#define MAX_CBID 4096
static unsigned char driver_api_on[MAX_CBID], runtime_api_on[MAX_CBID];
static int api_enable_calls;
static int enable_calls[CUPTI_ACTIVITY_KIND_COUNT];
static CUptiResult busy = CUPTI_SUCCESS;
static CUpti_ActivityThreadIdType thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
static int64_t clock_offset;
static uint32_t next_correlation = 1;
static size_t dropped;
static long suppressed;
static long delivered_buffers;
static long flushes;
static long forced_flushes;

/* The buffer being filled. */
static uint8_t *cur;
static size_t cur_size, cur_used;

/* Complete buffers not delivered yet, in order. */
struct pending { uint8_t *buf; size_t size, used; };
static struct pending queue_[MAX_PENDING];
static int q_head, q_len, delivering;
static pthread_t worker;
static int worker_started;

static uint64_t stream_handles[MAX_STREAMS];
static int n_streams;
static char *names[MAX_NAMES];
static int n_names;

static __thread uint64_t ext_stack[N_EXT_KINDS][MAX_DEPTH];
static __thread int ext_depth[N_EXT_KINDS];

/* The callback API's one subscriber, and the callbacks it enabled ([domain][cbid]). */
static CUpti_CallbackFunc subscriber_fn;
static void *subscriber_data;
static int subscribed, taken_by_other;
#define CB_DOMAINS 8
static unsigned char callback_on[CB_DOMAINS][MAX_CBID];
static long callbacks_delivered, callbacks_enter;
static CUpti_TimestampCallbackFunc timestamp_fn; /* cuptiActivityRegisterTimestampCallback */
static uint64_t CUPTIAPI other_clock(void);     /* the other client's (see its section) */
static uint32_t api_version = CUPTI_API_VERSION;   /* cuptidouble_set_version */
static long refused;                                /* requests answered with no buffer */
/* Sizes of records of other kinds (cuptidouble_other), as a newer CUPTI would write them. */
static size_t other_size[CUPTI_ACTIVITY_KIND_COUNT + 64];
static uint32_t context_handles_n;
static uint64_t context_handles[64];

static uint64_t now_ns(void) {
    /* With a timestamp callback registered, CUPTI takes every timestamp from it (docs of
     * cuptiActivityRegisterTimestampCallback); the test offset then does not apply. */
    if (timestamp_fn) return timestamp_fn();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + clock_offset);
}

static size_t record_size(CUpti_ActivityKind kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(KERNEL_RECORD);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(MEMCPY_RECORD);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(MEMSET_RECORD);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(MEMORY_RECORD);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default:
        return ((unsigned)kind < sizeof other_size / sizeof other_size[0]) ? other_size[kind] : 0;
    }
}

/* Records are 8-byte aligned in a buffer, as CUPTI's are. */
static size_t aligned(size_t n) { return (n + 7) & ~(size_t)7; }

static void *worker_main(void *arg);

static void start_worker_locked(void) {
    if (!worker_started) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&worker, &attr, worker_main, NULL) == 0) worker_started = 1;
        pthread_attr_destroy(&attr);
    }
}

/* Move the current buffer to the delivery queue (lock held). */
static uint64_t cur_busy_until;    /* the latest end of a device record in the current buffer */
static uint64_t device_busy_until; /* the latest end of any device record */
#define MAX_DEVICES 64
static uint64_t busy_until_of[MAX_DEVICES]; /* ... of one device's records */

static void note_end_locked(uint32_t device, uint64_t end) {
    if (end > cur_busy_until) cur_busy_until = end;
    if (end > device_busy_until) device_busy_until = end;
    if (device < MAX_DEVICES && end > busy_until_of[device]) busy_until_of[device] = end;
}

static void complete_current_locked(void) {
    if (cur == NULL) return;
    cur_busy_until = 0;
    if (q_len == MAX_PENDING) { /* cannot happen in tests: the records are lost */
        dropped++;
        return;
    }
    struct pending *p = &queue_[(q_head + q_len) % MAX_PENDING];
    p->buf = cur; p->size = cur_size; p->used = cur_used;
    q_len++;
    cur = NULL; cur_size = cur_used = 0;
    start_worker_locked();
    pthread_cond_broadcast(&cond);
}

/* Deliver the oldest complete buffer, if any; returns 0 when none was waiting. */
static int deliver_one(void) {
    pthread_mutex_lock(&delivery);
    pthread_mutex_lock(&lock);
    if (q_len == 0) {
        pthread_mutex_unlock(&lock);
        pthread_mutex_unlock(&delivery);
        return 0;
    }
    struct pending p = queue_[q_head];
    q_head = (q_head + 1) % MAX_PENDING;
    q_len--;
    delivering = 1;
    CUpti_BuffersCallbackCompleteFunc complete = on_complete;
    pthread_mutex_unlock(&lock);
    if (complete) complete(NULL, 0, p.buf, p.size, p.used);
    pthread_mutex_lock(&lock);
    delivering = 0;
    delivered_buffers++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&delivery);
    return 1;
}

static void *worker_main(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (q_len == 0) pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        deliver_one();
    }
    return NULL;
}

/* Room for one record of `size` bytes, or NULL (the record is dropped). Called with the
 * lock held; it is released around the tool's buffer-requested callback. */
static uint8_t *reserve_locked(size_t size) {
    size_t need = aligned(size);
    if (cur != NULL && cur_used + need > cur_size) complete_current_locked();
    if (cur == NULL) {
        CUpti_BuffersCallbackRequestFunc request = on_request;
        if (request == NULL) { dropped++; return NULL; }
        uint8_t *buf = NULL;
        size_t bsize = 0, max_records = 0;
        pthread_mutex_unlock(&lock);
        request(&buf, &bsize, &max_records);
        pthread_mutex_lock(&lock);
        if (cur != NULL) { /* another thread got one meanwhile: use it, complete ours empty */
            if (buf != NULL && on_complete) {
                struct pending *p = &queue_[(q_head + q_len) % MAX_PENDING];
                p->buf = buf; p->size = bsize; p->used = 0; q_len++;
                start_worker_locked();
                pthread_cond_broadcast(&cond);
            }
            if (cur_used + need > cur_size) complete_current_locked();
        } else {
            if (buf == NULL || bsize < need) { refused++; dropped++; return NULL; }
            cur = buf; cur_size = bsize; cur_used = 0;
        }
        if (cur == NULL) { dropped++; return NULL; }
    }
    uint8_t *rec = cur + cur_used;
    memset(rec, 0, need);
    cur_used += need;
    return rec;
}

static uint32_t thread_id(void) {
    if (thread_id_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) return (uint32_t)syscall(SYS_gettid);
    return (uint32_t)(uintptr_t)pthread_self();
}

static const char *intern(const char *name) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], name) == 0) { pthread_mutex_unlock(&lock); return names[i]; }
    const char *out = "?";
    if (n_names < MAX_NAMES) out = names[n_names++] = strdup(name);
    pthread_mutex_unlock(&lock);
    return out;
}

/* ---------------------------------------------------------------------------------------
 * CUPTI functions (signatures from the public headers)
 * ------------------------------------------------------------------------------------- */

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version) {
    if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
    *version = api_version;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str) {
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
    case CUPTI_ERROR_QUEUE_EMPTY: *str = "CUPTI_ERROR_QUEUE_EMPTY"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetLastError(void) { return CUPTI_SUCCESS; }

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp) {
    if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
    *timestamp = now_ns();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
    if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
        return CUPTI_ERROR_INVALID_PARAMETER;
    thread_id_type = type;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type) {
    if (!type) return CUPTI_ERROR_INVALID_PARAMETER;
    *type = thread_id_type;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
    if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = busy;
    if (r == CUPTI_SUCCESS) { on_request = req; on_complete = done; }
    pthread_mutex_unlock(&lock);
    return r;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
    pthread_mutex_lock(&lock);
    CUptiResult r = busy;
    if (r == CUPTI_SUCCESS) { enabled[kind] = 1; enable_calls[kind]++; }
    pthread_mutex_unlock(&lock);
    return r;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
    pthread_mutex_lock(&lock);
    enabled[kind] = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

/* The callback ids of this CUPTI (the headers' CBID_SIZE; cuptidouble_set_cbid_sizes plays an
 * older one): an id past them is not a call of this version, refused as invalid. */
static uint32_t driver_cbid_size = CUPTI_DRIVER_TRACE_CBID_SIZE;
static uint32_t runtime_cbid_size = CUPTI_RUNTIME_TRACE_CBID_SIZE;

static CUptiResult enable_api(unsigned char *table, CUpti_CallbackId cbid, uint8_t enable) {
    uint32_t size = table == driver_api_on ? driver_cbid_size : runtime_cbid_size;
    if (cbid >= MAX_CBID || cbid >= size) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = busy;
    if (r == CUPTI_SUCCESS) { table[cbid] = enable ? 1 : 0; api_enable_calls++; }
    pthread_mutex_unlock(&lock);
    return r;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
    return enable_api(driver_api_on, cbid, enable);
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
    return enable_api(runtime_api_on, cbid, enable);
}

/* ---- the callback API ---- */
#define SUBSCRIBER_HANDLE ((CUpti_SubscriberHandle)(uintptr_t)0x5eb5)

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                    void *userdata) {
    if (!subscriber) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_SUCCESS;
    if (subscribed || taken_by_other) r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    else {
        subscribed = 1;
        subscriber_fn = callback;
        subscriber_data = userdata;
        memset(callback_on, 0, sizeof callback_on);
        *subscriber = SUBSCRIBER_HANDLE;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_ERROR_INVALID_PARAMETER;
    if (subscribed && subscriber == SUBSCRIBER_HANDLE) {
        subscribed = 0;
        subscriber_fn = NULL;
        memset(callback_on, 0, sizeof callback_on);
        r = CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    if ((int)domain <= 0 || domain >= CB_DOMAINS || cbid >= MAX_CBID) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_ERROR_INVALID_PARAMETER;
    if (subscribed && subscriber == SUBSCRIBER_HANDLE) {
        callback_on[domain][cbid] = enable ? 1 : 0;
        r = CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain) {
    if ((int)domain <= 0 || domain >= CB_DOMAINS) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_ERROR_INVALID_PARAMETER;
    if (subscribed && subscriber == SUBSCRIBER_HANDLE) {
        memset(callback_on[domain], enable ? 1 : 0, MAX_CBID);
        r = CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    if (!enable || (int)domain <= 0 || domain >= CB_DOMAINS || cbid >= MAX_CBID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = CUPTI_ERROR_INVALID_PARAMETER;
    if (subscribed && subscriber == SUBSCRIBER_HANDLE) {
        *enable = callback_on[domain][cbid];
        r = CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Call the subscriber for an API call at `site` (lock not held), if that callback is on. */
static void api_callback(int runtime, uint32_t cbid, uint32_t corr, CUpti_ApiCallbackSite site,
                         uint64_t *correlation_data) {
    CUpti_CallbackDomain domain = runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    pthread_mutex_lock(&lock);
    CUpti_CallbackFunc fn = subscribed && cbid < MAX_CBID && callback_on[domain][cbid] ? subscriber_fn : NULL;
    void *ud = subscriber_data;
    if (fn) {
        callbacks_delivered++;
        if (site == CUPTI_API_ENTER) callbacks_enter++;
    }
    pthread_mutex_unlock(&lock);
    if (!fn) return;
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    int ret = 0;
    d.callbackSite = site;
    d.functionName = runtime ? "cudaSimulatedCall" : "cuSimulatedCall";
    d.functionReturnValue = site == CUPTI_API_EXIT ? &ret : NULL;
    d.correlationData = correlation_data;
    d.correlationId = corr;
    fn(ud, domain, cbid, &d);
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
    if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
    uint8_t *at = *record == NULL ? buffer
                                  : (uint8_t *)*record + aligned(record_size((*record)->kind));
    if (at >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    CUpti_Activity *next = (CUpti_Activity *)at;
    size_t size = record_size(next->kind);
    if (size == 0 || at + size > buffer + valid) return CUPTI_ERROR_INVALID_KIND;
    *record = next;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
    pthread_mutex_lock(&lock);
    flushes++;
    if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) forced_flushes++;
    if (cur != NULL && ((cur_used > 0 && cur_busy_until <= now_ns()) ||
                        (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)))
        complete_current_locked();
    pthread_mutex_unlock(&lock);
    while (deliver_one()) {}
    /* The delivery thread may hold the last buffer: wait until it was handed over. */
    pthread_mutex_lock(&lock);
    while (q_len > 0 || delivering) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *n) {
    (void)context; (void)streamId;
    if (!n) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    *n = dropped;
    dropped = 0; /* CUPTI resets the count when it is read */
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
    if ((int)kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || (int)kind >= N_EXT_KINDS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (ext_depth[kind] == MAX_DEPTH) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    ext_stack[kind][ext_depth[kind]++] = id;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *lastId) {
    if ((int)kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || (int)kind >= N_EXT_KINDS)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (ext_depth[kind] == 0) return CUPTI_ERROR_QUEUE_EMPTY;
    uint64_t id = ext_stack[kind][--ext_depth[kind]];
    if (lastId) *lastId = id;
    return CUPTI_SUCCESS;
}

static uint32_t stream_id_of(uint64_t handle) {
    /* 7 stands for a context's NULL stream, as on real devices; others numbered from 13. */
    if (handle == 0) return 7;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_streams; i++)
        if (stream_handles[i] == handle) { pthread_mutex_unlock(&lock); return 13 + (uint32_t)i; }
    uint32_t id = 0;
    if (n_streams < MAX_STREAMS) { stream_handles[n_streams] = handle; id = 13 + (uint32_t)n_streams++; }
    pthread_mutex_unlock(&lock);
    return id;
}

CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t perThreadStream, uint32_t *streamId) {
    (void)context; (void)perThreadStream;
    if (!streamId) return CUPTI_ERROR_INVALID_PARAMETER;
    *streamId = stream_id_of((uint64_t)(uintptr_t)stream);
    return *streamId ? CUPTI_SUCCESS : CUPTI_ERROR_MAX_LIMIT_REACHED;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
    pthread_mutex_lock(&lock);
    timestamp_fn = fn;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t *contextId) {
    /* 1 for the NULL (current) context, as the tests' records use; others numbered from 2. */
    if (!contextId) return CUPTI_ERROR_INVALID_PARAMETER;
    uint64_t h = (uint64_t)(uintptr_t)context;
    if (h == 0) { *contextId = 1; return CUPTI_SUCCESS; }
    pthread_mutex_lock(&lock);
    uint32_t i = 0;
    while (i < context_handles_n && context_handles[i] != h) i++;
    if (i == context_handles_n && i < 64) context_handles[context_handles_n++] = h;
    pthread_mutex_unlock(&lock);
    *contextId = 2 + i;
    return CUPTI_SUCCESS;
}

/* ---------------------------------------------------------------------------------------
 * Control API for tests
 * ------------------------------------------------------------------------------------- */

void cuptidouble_reset(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&lock);
    memset(enabled, 0, sizeof enabled);
    memset(enable_calls, 0, sizeof enable_calls);
    memset(driver_api_on, 0, sizeof driver_api_on);
    memset(runtime_api_on, 0, sizeof runtime_api_on);
    api_enable_calls = 0;
    busy = CUPTI_SUCCESS;
    clock_offset = 0;
    /* A registered timestamp callback stays, as in CUPTI (nothing unregisters it): a tool's
     * reader registers it once per process. The simulated other client's goes with it (each
     * scenario starts without another tool). */
    if (timestamp_fn == other_clock) timestamp_fn = NULL;
    api_version = CUPTI_API_VERSION;
    driver_cbid_size = CUPTI_DRIVER_TRACE_CBID_SIZE;
    runtime_cbid_size = CUPTI_RUNTIME_TRACE_CBID_SIZE;
    refused = 0;
    dropped = 0;
    suppressed = 0;
    delivered_buffers = 0;
    flushes = 0;
    forced_flushes = 0;
    device_busy_until = 0;
    memset(busy_until_of, 0, sizeof busy_until_of);
    /* A subscriber stays subscribed (the tool unsubscribes); the counts start over. */
    taken_by_other = 0;
    callbacks_delivered = callbacks_enter = 0;
    pthread_mutex_unlock(&lock);
}

/* Another tool holds (1) or left (0) the callback API: cuptiSubscribe then fails with
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; the Activity API still works. */
void cuptidouble_take_subscriber(int taken) {
    pthread_mutex_lock(&lock);
    taken_by_other = taken;
    pthread_mutex_unlock(&lock);
}

/* Callbacks delivered to the subscriber (entry and exit), at entry only; whether one is
 * subscribed; how many callbacks are enabled now. */
long cuptidouble_callbacks(void) { return callbacks_delivered; }
long cuptidouble_callbacks_enter(void) { return callbacks_enter; }
int cuptidouble_subscribed(void) { return subscribed; }
int cuptidouble_callbacks_enabled(void) {
    pthread_mutex_lock(&lock);
    int n = 0;
    for (int d = 0; d < CB_DOMAINS; d++)
        for (int i = 0; i < MAX_CBID; i++) n += callback_on[d][i];
    pthread_mutex_unlock(&lock);
    return n;
}

void cuptidouble_set_busy(int code) {
    pthread_mutex_lock(&lock);
    busy = (CUptiResult)code;
    pthread_mutex_unlock(&lock);
}

void cuptidouble_set_clock_offset(int64_t ns) {
    pthread_mutex_lock(&lock);
    clock_offset = ns;
    pthread_mutex_unlock(&lock);
}

uint64_t cuptidouble_now(void) { return now_ns(); }
uint64_t cuptidouble_busy_until(void) {
    pthread_mutex_lock(&lock);
    uint64_t t = device_busy_until;
    pthread_mutex_unlock(&lock);
    return t;
}

/* When simulated device `device` finishes the work written so far for it (what
 * cudaDeviceSynchronize on that device waits for). */
uint64_t cuptidouble_device_busy_until(uint32_t device) {
    if (device >= MAX_DEVICES) return 0;
    pthread_mutex_lock(&lock);
    uint64_t t = busy_until_of[device];
    pthread_mutex_unlock(&lock);
    return t;
}

/* The CUPTI API version cuptiGetVersion reports (CUPTI before 27 must never be refused a
 * buffer: Kineto's policy). */
void cuptidouble_set_version(uint32_t v) { api_version = v; }
uint32_t cuptidouble_cbid_size(int runtime) { return runtime ? runtime_cbid_size : driver_cbid_size; }
void cuptidouble_set_cbid_sizes(uint32_t driver, uint32_t runtime) {
    driver_cbid_size = driver;
    runtime_cbid_size = runtime;
}
long cuptidouble_refused(void) { return refused; }
int cuptidouble_has_timestamp_callback(void) { return timestamp_fn != NULL; }

/* A record of another kind (`kind`, `size` bytes, its kind field only), as a CUPTI newer than
 * the reader writes: a reader must step over it with CUPTI's record sizes and skip it. */
int cuptidouble_other(int kind, uint32_t size) {
    if (kind <= 0 || (unsigned)kind >= sizeof other_size / sizeof other_size[0] || size < 8)
        return 0;
    pthread_mutex_lock(&lock);
    other_size[kind] = size;
    uint32_t *r = (uint32_t *)reserve_locked(size);
    if (r) r[0] = (uint32_t)kind;
    pthread_mutex_unlock(&lock);
    return r != NULL;
}

/* Take the next correlation id without writing anything: with cuptidouble_api_as, a test
 * writes a launch's work record before its API record (records of one launch arrive in
 * different buffers, in any order). */
uint32_t cuptidouble_new_correlation(void) {
    pthread_mutex_lock(&lock);
    uint32_t corr = next_correlation++;
    pthread_mutex_unlock(&lock);
    return corr;
}

int cuptidouble_enabled(int kind) {
    if (kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return -1;
    pthread_mutex_lock(&lock);
    int e = enabled[kind];
    pthread_mutex_unlock(&lock);
    return e;
}

int cuptidouble_api_enabled(int runtime, uint32_t cbid) {
    if (cbid >= MAX_CBID) return -1;
    pthread_mutex_lock(&lock);
    int e = runtime ? runtime_api_on[cbid] : driver_api_on[cbid];
    pthread_mutex_unlock(&lock);
    return e;
}

int cuptidouble_enable_calls(int kind) {
    if (kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return -1;
    pthread_mutex_lock(&lock);
    int e = enable_calls[kind];
    pthread_mutex_unlock(&lock);
    return e;
}

long cuptidouble_suppressed(void) { return suppressed; }
long cuptidouble_delivered_buffers(void) { return delivered_buffers; }
long cuptidouble_flushes(void) { return flushes; }
long cuptidouble_forced_flushes(void) { return forced_flushes; }
/* Whether the double holds a buffer of the tool's (records in CUPTI's hands). */
int cuptidouble_holds_buffer(void) {
    pthread_mutex_lock(&lock);
    int held = cur != NULL;
    pthread_mutex_unlock(&lock);
    return held;
}
int cuptidouble_ext_depth(int kind) { return (kind > 0 && kind < N_EXT_KINDS) ? ext_depth[kind] : -1; }
uint32_t cuptidouble_stream_id(uint64_t handle) { return stream_id_of(handle); }

/* Complete the current buffer now (the delivery thread hands it over), as CUPTI does when a
 * buffer is full, without a flush. */
void cuptidouble_complete_buffer(void) {
    pthread_mutex_lock(&lock);
    if (cur != NULL && cur_used > 0) complete_current_locked();
    pthread_mutex_unlock(&lock);
}

/* An API call made on the calling thread: its EXTERNAL_CORRELATION records (one per
 * non-empty stack of this thread) and its API record, each written when its kind is
 * enabled. Returns the call's correlation id. `runtime` selects RUNTIME (1) or DRIVER (0). */
static uint32_t api_record(uint32_t corr, int runtime, uint32_t cbid, uint64_t start, uint64_t end);
static int next_return; /* the returnValue of the next API record (0: success) */

/* The next API call fails with `code` (a CUresult or cudaError_t): its record says so. */
void cuptidouble_fail_next(int code) { next_return = code; }

uint32_t cuptidouble_api(int runtime, uint32_t cbid, uint64_t start, uint64_t end) {
    return api_record(0, runtime, cbid, start, end);
}

/* The API call of correlation id `corr` (from cuptidouble_new_correlation). */
uint32_t cuptidouble_api_as(uint32_t corr, int runtime, uint32_t cbid, uint64_t start, uint64_t end) {
    return api_record(corr, runtime, cbid, start, end);
}

static uint32_t api_record(uint32_t corr, int runtime, uint32_t cbid, uint64_t start, uint64_t end) {
    pthread_mutex_lock(&lock);
    if (corr == 0) corr = next_correlation++;
    pthread_mutex_unlock(&lock);
    /* The subscriber at the call's entry, on this thread, before any of its records. */
    uint64_t correlation_data = 0;
    api_callback(runtime, cbid, corr, CUPTI_API_ENTER, &correlation_data);
    pthread_mutex_lock(&lock);
    CUpti_ActivityKind kind = runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
    /* An API record is written when its kind is enabled, or this API by itself. */
    const unsigned char *one = runtime ? runtime_api_on : driver_api_on;
    int api_on = enabled[kind] || (cbid < MAX_CBID && one[cbid]);
    /* External correlation records accompany API records: none without one. */
    if (enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] && api_on) {
        for (int k = 1; k < N_EXT_KINDS; k++) {
            if (ext_depth[k] == 0) continue;
            CUpti_ActivityExternalCorrelation *r =
                (CUpti_ActivityExternalCorrelation *)reserve_locked(sizeof *r);
            if (!r) continue;
            r->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
            r->externalKind = (CUpti_ExternalCorrelationKind)k;
            r->externalId = ext_stack[k][ext_depth[k] - 1];
            r->correlationId = corr;
        }
    }
    if (api_on) {
        CUpti_ActivityAPI *r = (CUpti_ActivityAPI *)reserve_locked(sizeof *r);
        if (r) {
            r->kind = kind;
            r->cbid = cbid;
            r->start = start;
            r->end = end;
            r->processId = (uint32_t)getpid();
            r->threadId = thread_id();
            r->correlationId = corr;
            r->returnValue = (uint32_t)next_return;
        }
    } else {
        suppressed++;
    }
    next_return = 0; /* one call's result: the next succeeds unless told */
    pthread_mutex_unlock(&lock);
    api_callback(runtime, cbid, corr, CUPTI_API_EXIT, &correlation_data);
    return corr;
}

/* An API call made on a thread of the double's own (no Python thread state, no external
 * correlation pushed), joined before returning: what a library's C thread does. */
struct c_call { int runtime; uint32_t cbid; uint32_t corr; };

static void *c_call_main(void *arg) {
    struct c_call *c = arg;
    uint64_t t = now_ns();
    c->corr = api_record(0, c->runtime, c->cbid, t, t + 1000);
    return NULL;
}

uint32_t cuptidouble_api_from_c_thread(int runtime, uint32_t cbid) {
    struct c_call c = {runtime, cbid, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, c_call_main, &c) != 0) return 0;
    pthread_join(th, NULL);
    return c.corr;
}

/* A kernel that ran from `start` to `end` (double clock), launched by correlation `corr`. */
int cuptidouble_kernel(uint32_t corr, const char *name, uint32_t device, uint32_t context,
                       uint32_t stream, int32_t gx, int32_t gy, int32_t gz, int32_t bx,
                       int32_t by, int32_t bz, uint64_t start, uint64_t end) {
    const char *nm = intern(name);
    pthread_mutex_lock(&lock);
    int ok = 0;
    if (enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) {
        KERNEL_RECORD *r = (KERNEL_RECORD *)reserve_locked(sizeof *r);
        if (r) {
            r->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
            r->start = start; r->end = end;
            r->deviceId = device; r->contextId = context; r->streamId = stream;
            r->gridX = gx; r->gridY = gy; r->gridZ = gz;
            r->blockX = bx; r->blockY = by; r->blockZ = bz;
            r->name = nm;
            r->correlationId = corr;
            note_end_locked(device, end);
            ok = 1;
        }
    } else {
        suppressed++;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* A copy of `bytes` of CUpti_ActivityMemcpyKind `copy_kind`. */
int cuptidouble_memcpy(uint32_t corr, int copy_kind, uint64_t bytes, uint32_t device,
                       uint32_t context, uint32_t stream, uint64_t start, uint64_t end) {
    pthread_mutex_lock(&lock);
    int ok = 0;
    if (enabled[CUPTI_ACTIVITY_KIND_MEMCPY]) {
        MEMCPY_RECORD *r = (MEMCPY_RECORD *)reserve_locked(sizeof *r);
        if (r) {
            r->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
            r->copyKind = (uint8_t)copy_kind;
            r->bytes = bytes;
            r->start = start; r->end = end;
            r->deviceId = device; r->contextId = context; r->streamId = stream;
            r->correlationId = corr;
            note_end_locked(device, end);
            ok = 1;
        }
    } else {
        suppressed++;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* A memset of `bytes` to `value`. */
int cuptidouble_memset(uint32_t corr, uint32_t value, uint64_t bytes, uint32_t device,
                       uint32_t context, uint32_t stream, uint64_t start, uint64_t end) {
    pthread_mutex_lock(&lock);
    int ok = 0;
    if (enabled[CUPTI_ACTIVITY_KIND_MEMSET]) {
        MEMSET_RECORD *r = (MEMSET_RECORD *)reserve_locked(sizeof *r);
        if (r) {
            r->kind = CUPTI_ACTIVITY_KIND_MEMSET;
            r->value = value;
            r->bytes = bytes;
            r->start = start; r->end = end;
            r->deviceId = device; r->contextId = context; r->streamId = stream;
            r->correlationId = corr;
            note_end_locked(device, end);
            ok = 1;
        }
    } else {
        suppressed++;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* A whole simulated launch, for benchmarks: a cuLaunchKernel's records (external correlation,
 * driver API) and its kernel record, the kernel running `kernel_ns` from 3 us after the call
 * began. Writes the double's clock at its return to *exit_ns (when not NULL): the caller's
 * clock read after ctypes returns, minus this, is the time it waited to get the GIL back. */
uint32_t cuptidouble_launch(const char *name, uint32_t stream, uint64_t kernel_ns, uint64_t *exit_ns) {
    uint64_t t = now_ns();
    uint32_t corr = api_record(0, 0, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, t, t + 2000);
    cuptidouble_kernel(corr, name, 0, 1, stream, 1, 1, 1, 32, 1, 1, t + 3000, t + 3000 + kernel_ns);
    if (exit_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        *exit_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    return corr;
}

/* An allocation (operation 1) or a release (2) of `bytes` at `address`, of CUpti_ActivityMemoryKind
 * `memory_kind`, made by the call of correlation `corr` at `timestamp` (double clock): a MEMORY2
 * record, written while that kind is enabled. */
int cuptidouble_memory(uint32_t corr, int operation, int memory_kind, uint64_t address,
                       uint64_t bytes, uint32_t device, uint32_t context, uint32_t stream,
                       uint64_t timestamp) {
    pthread_mutex_lock(&lock);
    int ok = 0;
    if (enabled[CUPTI_ACTIVITY_KIND_MEMORY2]) {
        MEMORY_RECORD *r = (MEMORY_RECORD *)reserve_locked(sizeof *r);
        if (r) {
            r->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
            r->memoryOperationType = (CUpti_ActivityMemoryOperationType)operation;
            r->memoryKind = (CUpti_ActivityMemoryKind)memory_kind;
            r->correlationId = corr;
            r->address = address;
            r->bytes = bytes;
            r->timestamp = timestamp;
            r->processId = (uint32_t)getpid();
            r->deviceId = device; r->contextId = context; r->streamId = stream;
            ok = 1;
        }
    } else {
        suppressed++;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* ---- another CUPTI client in the process, as torch.profiler's Kineto behaves ---------------
 * At each trace start it registers its own buffer callbacks (CUPTI keeps one set per process
 * and silently replaces the last: a buffer is completed through the callbacks registered when
 * it completes) and its own timestamp callback (here CLOCK_REALTIME, not the host's
 * monotonic clock). Its buffers come from a static arena: a tool that free()s one of them
 * aborts the process, as freeing another allocator's memory would; one it does not own that
 * comes back to it is counted, and dropped (it cannot free what is not its own either). */
#define OTHER_BUFS 8
#define OTHER_BUF_SIZE (64 * 1024)
static uint8_t other_arena[OTHER_BUFS][OTHER_BUF_SIZE] __attribute__((aligned(8)));
static int other_busy[OTHER_BUFS];
static long other_records, other_not_its_own;
static pthread_mutex_t other_lock = PTHREAD_MUTEX_INITIALIZER;

static void CUPTIAPI other_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = NULL;
    *size = 0;
    *max_records = 0;
    pthread_mutex_lock(&other_lock);
    for (int i = 0; i < OTHER_BUFS; i++)
        if (!other_busy[i]) {
            other_busy[i] = 1;
            *buf = other_arena[i];
            *size = OTHER_BUF_SIZE;
            break;
        }
    pthread_mutex_unlock(&other_lock);
}

static void CUPTIAPI other_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                    size_t valid) {
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *rec = NULL;
    long n = 0;
    while (valid && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) n++;
    pthread_mutex_lock(&other_lock);
    other_records += n;
    int own = 0;
    for (int i = 0; i < OTHER_BUFS; i++)
        if (buf == other_arena[i]) { other_busy[i] = 0; own = 1; }
    if (!own && buf) other_not_its_own++;
    pthread_mutex_unlock(&other_lock);
}

static uint64_t CUPTIAPI other_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The other client starts a trace: its callbacks replace whatever was registered. */
int cuptidouble_other_client_start(void) {
    CUptiResult r = cuptiActivityRegisterCallbacks(other_request, other_complete);
    if (r == CUPTI_SUCCESS) r = cuptiActivityRegisterTimestampCallback(other_clock);
    return (int)r;
}

/* Records the other client got; buffers it got back that were not its own. */
long cuptidouble_other_client_records(void) { return other_records; }
long cuptidouble_other_client_not_its_own(void) { return other_not_its_own; }
