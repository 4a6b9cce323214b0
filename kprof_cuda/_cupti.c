/* The CUDA plugin's compiled CUPTI reader (see kprof_cuda/cupti_native.py, which drives it).
 *
 * CUPTI hands completed activity buffers to C callbacks registered here; each buffer is walked
 * with cuptiActivityGetNextRecord on the thread CUPTI calls from (its own, or a flushing one),
 * its external-correlation, API, kernel, memcpy and memset records joined by correlation id in
 * C (in any order: work records whose launch is not complete wait), kernel names interned, and
 * the rows kept in C. No Python runs on CUPTI's thread and no Python object is made per
 * record: Python takes every ready row at once as int64 columns (take()), holding the GIL once
 * per batch, on its own schedule.
 *
 * Limited API (abi3, CPython >= 3.10). No NVIDIA header is needed: CUPTI's functions are
 * reached through addresses Python found with ctypes (cupti_lib.py), and record fields are
 * read at the offsets Python passes in (cupti_abi.layout(), the one definition), which are
 * those common to every supported header version. Records are stepped by CUPTI itself.
 * The row columns' and the offsets' indexes come from _cupti_layout.h, generated from
 * cupti_layout.py (the one definition of both formats); LAYOUT says which this was built from.
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

typedef int cupti_result;
typedef void (*request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*complete_fn)(void *, uint32_t, uint8_t *, size_t, size_t);
typedef cupti_result (*next_record_t)(uint8_t *, size_t, void **);
typedef cupti_result (*cupti_register_t)(request_fn, complete_fn);
typedef cupti_result (*register_ts_t)(uint64_t (*)(void));

static next_record_t next_record;
static cupti_register_t register_callbacks;
static register_ts_t register_timestamp;

/* CUpti_ActivityKind values and kprof's external correlation kind (set by configure). */
enum { K_MEMCPY = 1, K_MEMSET = 2, K_DRIVER = 4, K_RUNTIME = 5, K_KERNEL = 10, K_EXT = 39,
       K_MEMORY2 = 49 };
static uint32_t ext_kind = 5;

/* Offsets, in cupti_abi.layout()'s order: O_* of the generated header. */
static size_t off[N_OFFSETS];

#define MAX_CBID 8192
static unsigned char work_api[2][MAX_CBID], graph_api[2][MAX_CBID]; /* [0] driver, [1] runtime */
/* Calls that allocate or free (MEMORY2 records): joined as work, never waited for. */
static unsigned char mem_api[2][MAX_CBID];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rows_cond = PTHREAD_COND_INITIALIZER;

/* ---- buffers ------------------------------------------------------------------------------ */
static size_t buffer_size = 1 << 20;
static long max_buffers = 64, outstanding;
static int refuse_ok; /* CUPTI API >= 27: refusing a buffer is safe */
#define FREE_KEPT 8
static uint8_t *free_bufs[FREE_KEPT];
static int n_free;

/* ---- counts ------------------------------------------------------------------------------- */
static long long c_buffers, c_decoded, c_refused, c_records, c_unknown, c_foreign, c_dropped_rows,
    c_discarded_buffers;

/* ---- rows --------------------------------------------------------------------------------- */
/* Row columns: R_* of the generated header (kprof_cuda/cupti_layout.py). */
typedef struct { int64_t v[N_COLS]; } row_t;
/* A work record before the join: its row, and its context id (the queue's key). */
typedef struct { row_t r; uint32_t ctx; } raw_t;

static row_t *rows;
static size_t n_rows, cap_rows, max_rows = (size_t)1 << 20;
static raw_t *pending;
static size_t n_pending, cap_pending;
#define MAX_PENDING ((size_t)1 << 20)

/* ---- launches: correlation id -> scope, launch times (open addressing) -------------------- */
enum { L_SCOPE = 1, L_API = 2, L_GRAPH = 4, L_MEM = 8 };
typedef struct {
    uint32_t corr; /* 0: empty slot */
    uint32_t flags;
    uint32_t nrows;
    uint32_t tomb;
    uint64_t scope;
    uint64_t devices; /* bit d: a row of this launch ran on device d (d < 64) */
    int64_t lb, le;
    int64_t site1; /* the launch site's raw id + 1 (the callback's; 0: none) */
} launch_t;
static launch_t *launches;
static size_t cap_launches, n_launches, n_used; /* n_used counts tombstones too */
#define MAX_LAUNCHES ((size_t)1 << 20)

static size_t hash32(uint32_t x) { return (size_t)(x * 2654435761u); }

static launch_t *find_launch(uint32_t corr) {
    if (!cap_launches) return NULL;
    size_t mask = cap_launches - 1, i = hash32(corr) & mask;
    for (;;) {
        launch_t *l = &launches[i];
        if (l->corr == corr && !l->tomb) return l;
        if (l->corr == 0 && !l->tomb) return NULL;
        i = (i + 1) & mask;
    }
}

/* Rehash into a table sized for the live launches (at most a quarter full): tombstones of
 * launches that got their records go, so probes stay short however many launches passed. */
static int grow_launches(void) {
    size_t ncap = 1024;
    while (ncap < 4 * (n_launches + 1)) ncap *= 2;
    launch_t *nl = calloc(ncap, sizeof *nl);
    if (!nl) return -1;
    for (size_t j = 0; j < cap_launches; j++) {
        launch_t *l = &launches[j];
        if (l->corr == 0 || l->tomb) continue;
        size_t i = hash32(l->corr) & (ncap - 1);
        while (nl[i].corr) i = (i + 1) & (ncap - 1);
        nl[i] = *l;
    }
    free(launches);
    launches = nl;
    cap_launches = ncap;
    n_used = n_launches;
    return 0;
}

static launch_t *get_launch(uint32_t corr) {
    launch_t *l = find_launch(corr);
    if (l) return l;
    if (n_launches >= MAX_LAUNCHES) return NULL; /* launches whose records never came */
    if ((n_used + 1) * 2 > cap_launches && grow_launches() < 0) return NULL;
    size_t mask = cap_launches - 1, i = hash32(corr) & mask;
    while (launches[i].corr && !launches[i].tomb) i = (i + 1) & mask;
    if (!launches[i].tomb) n_used++;
    memset(&launches[i], 0, sizeof launches[i]);
    launches[i].corr = corr;
    n_launches++;
    return &launches[i];
}

static void drop_launch(launch_t *l) {
    l->tomb = 1;
    n_launches--;
}

/* ---- names: kernel names by text (12 on: 0-11 are memset and copy names) ----------------- */
#define FIRST_KERNEL_NAME 12
static char **texts;                 /* id - 12 -> the name's text (a copy) */
static size_t n_texts, cap_texts, texts_taken;
static int64_t *text_slots;          /* open addressing by FNV-1a hash: id or -1 */
static size_t cap_text_slots;
typedef struct { const char *ptr; int64_t id; } ptr_cache_t;
#define PTR_CACHE 1024
static ptr_cache_t ptr_cache[PTR_CACHE]; /* CUPTI shares one pointer per kernel name */

static size_t fnv(const char *p) {
    size_t h = 1469598103934665603ull;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static int grow_text_slots(void) {
    size_t ncap = cap_text_slots ? cap_text_slots * 2 : 256;
    int64_t *ns = malloc(ncap * sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < ncap; i++) ns[i] = -1;
    for (size_t t = 0; t < n_texts; t++) {
        size_t i = fnv(texts[t]) & (ncap - 1);
        while (ns[i] >= 0) i = (i + 1) & (ncap - 1);
        ns[i] = (int64_t)t;
    }
    free(text_slots);
    text_slots = ns;
    cap_text_slots = ncap;
    return 0;
}

static int64_t intern_name(const char *p) {
    if (!p) p = "?";
    ptr_cache_t *pc = &ptr_cache[((uintptr_t)p >> 3) & (PTR_CACHE - 1)];
    /* The same pointer with the same text (a pointer reused for another name is caught). */
    if (pc->ptr == p && strcmp(texts[pc->id - FIRST_KERNEL_NAME], p) == 0) return pc->id;
    if ((n_texts + 1) * 2 > cap_text_slots && grow_text_slots() < 0) return FIRST_KERNEL_NAME - 1;
    size_t mask = cap_text_slots - 1, i = fnv(p) & mask;
    int64_t id = -1;
    while (text_slots[i] >= 0) {
        if (strcmp(texts[text_slots[i]], p) == 0) { id = FIRST_KERNEL_NAME + text_slots[i]; break; }
        i = (i + 1) & mask;
    }
    if (id < 0) {
        if (n_texts == cap_texts) {
            size_t nc = cap_texts ? cap_texts * 2 : 64;
            char **nt = realloc(texts, nc * sizeof *nt);
            if (!nt) return FIRST_KERNEL_NAME - 1;
            texts = nt;
            cap_texts = nc;
        }
        char *copy = strdup(p);
        if (!copy) return FIRST_KERNEL_NAME - 1;
        texts[n_texts] = copy;
        text_slots[i] = (int64_t)n_texts;
        id = FIRST_KERNEL_NAME + (int64_t)n_texts++;
    }
    pc->ptr = p;
    pc->id = id;
    return id;
}

/* ---- queues: (device, context, stream) -> index ------------------------------------------- */
typedef struct { uint32_t dev, ctx, stream; } qkey_t;
static qkey_t *queues;
static size_t n_queues, cap_queues, queues_taken;
static qkey_t last_q;
static int64_t last_qi = -1;

static int64_t intern_queue(uint32_t dev, uint32_t ctx, uint32_t stream) {
    if (last_qi >= 0 && last_q.dev == dev && last_q.ctx == ctx && last_q.stream == stream)
        return last_qi;
    size_t i;
    for (i = 0; i < n_queues; i++) /* few queues: a scan, once per change of queue */
        if (queues[i].dev == dev && queues[i].ctx == ctx && queues[i].stream == stream) break;
    if (i == n_queues) {
        if (n_queues == cap_queues) {
            size_t nc = cap_queues ? cap_queues * 2 : 16;
            qkey_t *nq = realloc(queues, nc * sizeof *nq);
            if (!nq) return 0;
            queues = nq;
            cap_queues = nc;
        }
        queues[n_queues++] = (qkey_t){dev, ctx, stream};
    }
    last_q = (qkey_t){dev, ctx, stream};
    last_qi = (int64_t)i;
    return last_qi;
}

/* ---- the join ------------------------------------------------------------------------------ */
static int push_row(const row_t *r) {
    if (n_rows >= max_rows) { c_dropped_rows++; return -1; }
    if (n_rows == cap_rows) {
        size_t nc = cap_rows ? cap_rows * 2 : 4096;
        row_t *nr = realloc(rows, nc * sizeof *nr);
        if (!nr) { c_dropped_rows++; return -1; }
        rows = nr;
        cap_rows = nc;
    }
    rows[n_rows++] = *r;
    return 0;
}

static void emit(raw_t *w, launch_t *l, int with_api) {
    w->r.v[R_SCOPE] = (int64_t)l->scope;
    w->r.v[R_SITE] = l->site1 - 1;
    w->r.v[R_LAUNCH_BEGIN] = with_api ? l->lb : 0;
    w->r.v[R_LAUNCH_END] = with_api ? l->le : 0;
    w->r.v[R_QUEUE] = intern_queue((uint32_t)w->r.v[R_DEVICE], w->ctx, (uint32_t)w->r.v[R_STREAM]);
    push_row(&w->r);
}

/* 1: the row was emitted or is foreign (done with); 0: its launch is not complete yet. */
static int resolve(raw_t *w, int final, const uint64_t *release, size_t n_release) {
    launch_t *l = find_launch((uint32_t)w->r.v[R_CORRELATION]);
    int done = 0;
    if (l && (l->flags & L_API) && (l->flags & L_SCOPE)) {
        emit(w, l, 1);
        done = 1;
    } else if (l && (l->flags & L_API)) {
        c_foreign++; /* launched outside every profile */
        done = 1;
    } else if (l && (l->flags & L_SCOPE)) {
        int rel = final;
        for (size_t k = 0; k < n_release && !rel; k++) rel = l->scope == release[k];
        if (rel) { emit(w, l, 0); done = 1; } /* its API record was lost */
    }
    if (done && l) {
        l->nrows++;
        if ((uint64_t)w->r.v[R_DEVICE] < 64) l->devices |= (uint64_t)1 << w->r.v[R_DEVICE];
        if (!(l->flags & L_GRAPH)) drop_launch(l);
        return 1;
    }
    if (final) { c_foreign++; return 1; }
    return 0;
}

static void retry_pending(int final, const uint64_t *release, size_t n_release) {
    size_t keep = 0;
    for (size_t i = 0; i < n_pending; i++)
        if (!resolve(&pending[i], final, release, n_release)) pending[keep++] = pending[i];
    n_pending = keep;
}

static void add_pending(const raw_t *w) {
    if (n_pending >= MAX_PENDING) { c_foreign++; return; }
    if (n_pending == cap_pending) {
        size_t nc = cap_pending ? cap_pending * 2 : 256;
        raw_t *np = realloc(pending, nc * sizeof *np);
        if (!np) { c_foreign++; return; }
        pending = np;
        cap_pending = nc;
    }
    pending[n_pending++] = *w;
}

#define U32(rec, o) (*(const uint32_t *)((const uint8_t *)(rec) + (o)))
#define I32(rec, o) (*(const int32_t *)((const uint8_t *)(rec) + (o)))
#define U64(rec, o) (*(const uint64_t *)((const uint8_t *)(rec) + (o)))
#define PTR(rec, o) (*(const char *const *)((const uint8_t *)(rec) + (o)))

/* Walk a completed buffer (lock held). */
static void decode(uint8_t *buf, size_t valid) {
    void *rec = NULL;
    int waiting = 0;
    int full = n_rows >= max_rows;
    while (next_record(buf, valid, &rec) == 0) {
        c_records++;
        uint32_t kind = U32(rec, 0);
        raw_t w;
        switch (kind) {
        case K_EXT: {
            if (U32(rec, off[O_EXT_EXTERNALKIND]) != ext_kind) break;
            launch_t *l = get_launch(U32(rec, off[O_EXT_CORRELATIONID]));
            if (l) { l->scope = U64(rec, off[O_EXT_EXTERNALID]); l->flags |= L_SCOPE; }
            break;
        }
        case K_DRIVER:
        case K_RUNTIME: {
            int rt = kind == K_RUNTIME;
            uint32_t cbid = U32(rec, off[O_API_CBID]), corr = U32(rec, off[O_API_CORRELATIONID]);
            /* A call that failed (returnValue: not CUDA_SUCCESS/cudaSuccess) enqueued nothing. */
            int failed = U32(rec, off[O_API_RETURNVALUE]) != 0;
            if (failed || cbid >= MAX_CBID || (!work_api[rt][cbid] && !mem_api[rt][cbid])) {
                /* A call that enqueues no device work: nothing will come for it. */
                launch_t *l = find_launch(corr);
                if (l) drop_launch(l);
                break;
            }
            launch_t *l = get_launch(corr);
            if (!l) break;
            l->flags |= L_API | (graph_api[rt][cbid] ? L_GRAPH : 0) |
                        (mem_api[rt][cbid] && !work_api[rt][cbid] ? L_MEM : 0);
            l->lb = (int64_t)U64(rec, off[O_API_START]);
            l->le = (int64_t)U64(rec, off[O_API_END]);
            break;
        }
        case K_KERNEL:
        case K_MEMCPY:
        case K_MEMSET: {
            if (full) { c_dropped_rows++; break; }
            memset(&w, 0, sizeof w);
            int64_t *v = w.r.v;
            if (kind == K_KERNEL) {
                v[R_KIND] = 0;
                v[R_NAME] = intern_name(PTR(rec, off[O_KERNEL_NAME]));
                v[R_DEVICE] = U32(rec, off[O_KERNEL_DEVICEID]);
                w.ctx = U32(rec, off[O_KERNEL_CONTEXTID]);
                v[R_STREAM] = U32(rec, off[O_KERNEL_STREAMID]);
                v[R_BEGIN] = (int64_t)U64(rec, off[O_KERNEL_START]);
                v[R_END] = (int64_t)U64(rec, off[O_KERNEL_END]);
                v[R_NBYTES] = -1;
                v[R_CORRELATION] = U32(rec, off[O_KERNEL_CORRELATIONID]);
                v[R_GRID_X] = I32(rec, off[O_KERNEL_GRIDX]);
                v[R_GRID_Y] = I32(rec, off[O_KERNEL_GRIDY]);
                v[R_GRID_Z] = I32(rec, off[O_KERNEL_GRIDZ]);
                v[R_BLOCK_X] = I32(rec, off[O_KERNEL_BLOCKX]);
                v[R_BLOCK_Y] = I32(rec, off[O_KERNEL_BLOCKY]);
                v[R_BLOCK_Z] = I32(rec, off[O_KERNEL_BLOCKZ]);
            } else if (kind == K_MEMCPY) {
                uint8_t ck = *((const uint8_t *)rec + off[O_MEMCPY_COPYKIND]);
                v[R_KIND] = 1;
                v[R_NAME] = (ck >= 1 && ck <= 10) ? ck : 11;
                v[R_DEVICE] = U32(rec, off[O_MEMCPY_DEVICEID]);
                w.ctx = U32(rec, off[O_MEMCPY_CONTEXTID]);
                v[R_STREAM] = U32(rec, off[O_MEMCPY_STREAMID]);
                v[R_BEGIN] = (int64_t)U64(rec, off[O_MEMCPY_START]);
                v[R_END] = (int64_t)U64(rec, off[O_MEMCPY_END]);
                v[R_NBYTES] = (int64_t)U64(rec, off[O_MEMCPY_BYTES]);
                v[R_CORRELATION] = U32(rec, off[O_MEMCPY_CORRELATIONID]);
            } else {
                v[R_KIND] = 1;
                v[R_NAME] = 0;
                v[R_DEVICE] = U32(rec, off[O_MEMSET_DEVICEID]);
                w.ctx = U32(rec, off[O_MEMSET_CONTEXTID]);
                v[R_STREAM] = U32(rec, off[O_MEMSET_STREAMID]);
                v[R_BEGIN] = (int64_t)U64(rec, off[O_MEMSET_START]);
                v[R_END] = (int64_t)U64(rec, off[O_MEMSET_END]);
                v[R_NBYTES] = (int64_t)U64(rec, off[O_MEMSET_BYTES]);
                v[R_CORRELATION] = U32(rec, off[O_MEMSET_CORRELATIONID]);
            }
            if (!resolve(&w, 0, NULL, 0)) { add_pending(&w); waiting = 1; }
            break;
        }
        case K_MEMORY2: {
            /* An allocation or a free: a row of kind 2 or 3 joined as work by its call's
             * correlation id (begin = end = its time; name = CUPTI's memory kind). */
            uint32_t op = U32(rec, off[O_MEMORY_MEMORYOPERATIONTYPE]);
            if (op != 1 && op != 2) break;
            if (full) { c_dropped_rows++; break; }
            memset(&w, 0, sizeof w);
            int64_t *v = w.r.v;
            v[R_KIND] = op == 1 ? 2 : 3;
            v[R_NAME] = U32(rec, off[O_MEMORY_MEMORYKIND]);
            v[R_DEVICE] = U32(rec, off[O_MEMORY_DEVICEID]);
            w.ctx = U32(rec, off[O_MEMORY_CONTEXTID]);
            v[R_STREAM] = U32(rec, off[O_MEMORY_STREAMID]);
            v[R_BEGIN] = v[R_END] = (int64_t)U64(rec, off[O_MEMORY_TIMESTAMP]);
            v[R_NBYTES] = (int64_t)U64(rec, off[O_MEMORY_BYTES]);
            v[R_ADDRESS] = (int64_t)U64(rec, off[O_MEMORY_ADDRESS]);
            v[R_CORRELATION] = U32(rec, off[O_MEMORY_CORRELATIONID]);
            if (!resolve(&w, 0, NULL, 0)) { add_pending(&w); waiting = 1; }
            break;
        }
        default:
            c_unknown++; /* a kind kprof does not read: skipped, counted */
        }
    }
    (void)waiting;
    if (n_pending) retry_pending(0, NULL, 0); /* launches completed by this buffer */
}

/* ---- CUPTI's callbacks (C only: no GIL, no Python) ----------------------------------------- */
static void on_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *max_records = 0;
    pthread_mutex_lock(&lock);
    if (outstanding >= max_buffers && refuse_ok) {
        c_refused++; /* CUPTI drops records and counts them */
        pthread_mutex_unlock(&lock);
        *buf = NULL;
        *size = 0;
        return;
    }
    outstanding++;
    uint8_t *b = n_free ? free_bufs[--n_free] : NULL;
    size_t bs = buffer_size;
    pthread_mutex_unlock(&lock);
    if (!b) {
        void *p = NULL;
        if (posix_memalign(&p, 8, bs) != 0) p = NULL;
        b = p;
    }
    if (!b) { /* CUPTI gets none (drops records, counts them): none is out, none comes back */
        pthread_mutex_lock(&lock);
        outstanding--;
        pthread_mutex_unlock(&lock);
    }
    *buf = b;
    *size = b ? bs : 0;
}

static void on_complete(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx; (void)stream;
    pthread_mutex_lock(&lock);
    if (outstanding > 0) outstanding--;
    if (buf) {
        c_buffers++;
        if (valid) {
            if (n_rows >= max_rows) c_discarded_buffers++;
            decode(buf, valid);
            c_decoded++;
        }
        if (n_free < FREE_KEPT && size == buffer_size) { free_bufs[n_free++] = buf; buf = NULL; }
    }
    if (n_rows) pthread_cond_broadcast(&rows_cond);
    pthread_mutex_unlock(&lock);
    free(buf);
}

/* CUPTI's timestamps from the host's monotonic clock (perf_counter_ns's): no drift, no steps. */
static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the callback API: launch sites ------------------------------------------------------------
 *
 * Subscribed (cuptiSubscribe) while kprof's CUPTI path is on; Python enables the callbacks of the
 * calls that enqueue work (cuptiEnableCallback) only while a profile that keeps sites has a
 * scope entered somewhere. At a call's entry, on the launching thread, the callback asks Python
 * for the launch site (kprof.plugin.launch_site: the thread's active profile walks its frames)
 * and keeps it on the call's launch entry, by the correlation id its records carry: the row
 * takes it at the join. The GIL is taken only on a thread with a site scope entered
 * (site_depth, counted by site_scope() on that thread): any other thread, and one that is no
 * Python thread, returns at once. */
typedef cupti_result (*subscribe_t)(void **, void (*)(void *, int, uint32_t, const void *), void *);
static subscribe_t subscribe_fn;
static PyObject *site_fn;            /* kprof.plugin.launch_site, or NULL: sites off */
static PyObject *active_fn;          /* kprof.plugin.active: the thread's active profile */
static PyObject *str_launch_site;
static volatile int sites_on;
static __thread long site_depth;     /* site scopes entered on this thread */
static long long c_callbacks, c_sites, c_site_calls; /* delivered; sites kept; Python calls */

static void on_callback(void *userdata, int domain, uint32_t cbid, const void *cbdata) {
    (void)userdata; (void)cbid;
    __atomic_add_fetch(&c_callbacks, 1, __ATOMIC_RELAXED);
    if (!sites_on || site_depth <= 0 || !cbdata || (domain != 1 && domain != 2)) return;
    if (*(const uint32_t *)((const uint8_t *)cbdata + off[O_CALLBACK_CALLBACKSITE]) != 0) return;
    uint32_t corr = *(const uint32_t *)((const uint8_t *)cbdata + off[O_CALLBACK_CORRELATIONID]);
    if (PyGILState_GetThisThreadState() == NULL) return; /* not a Python thread */
    PyGILState_STATE g = PyGILState_Ensure();
    long long site = -1;
    PyObject *fn = site_fn, *r = NULL;
    if (fn && active_fn) {
        Py_INCREF(fn);
        __atomic_add_fetch(&c_site_calls, 1, __ATOMIC_RELAXED);
        /* The active profile's compiled catcher (Recorder.launch_site, a C builtin), called
         * straight from here: its walk starts at the innermost frame, the launching one, with
         * no launch_site() frame to make and skip. Any other catcher (the pure one walks from
         * its caller's caller) through launch_site(). */
        PyObject *rec = PyObject_CallNoArgs(active_fn);
        if (rec && rec != Py_None) {
            PyObject *cap = PyObject_GetAttr(rec, str_launch_site);
            if (cap && PyCFunction_Check(cap)) r = PyObject_CallNoArgs(cap);
            else if (cap) r = PyObject_CallNoArgs(fn);
            Py_XDECREF(cap);
        }
        Py_XDECREF(rec);
        Py_DECREF(fn);
        if (r) site = PyLong_AsLongLong(r);
        if (!r || (site == -1 && PyErr_Occurred())) { PyErr_Clear(); site = -1; }
        Py_XDECREF(r);
    }
    if (site >= 0) {
        pthread_mutex_lock(&lock);
        launch_t *l = get_launch(corr);
        if (l) { l->site1 = site + 1; c_sites++; }
        pthread_mutex_unlock(&lock);
    }
    PyGILState_Release(g);
}

/* subscribe() -> (CUptiResult, subscriber handle as int) */
static PyObject *subscribe(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    if (!subscribe_fn) return Py_BuildValue("(iK)", -1, 0ULL);
    void *handle = NULL;
    cupti_result r = subscribe_fn(&handle, on_callback, NULL);
    return Py_BuildValue("(iK)", r, (unsigned long long)(uintptr_t)handle);
}

/* set_sites(launch_site, active) or set_sites(None, None): the site function and the active
 * profile's getter the callback calls (None: sites off). */
static PyObject *set_sites(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *fn, *act;
    if (!PyArg_ParseTuple(args, "OO:set_sites", &fn, &act)) return NULL;
    if (!str_launch_site && !(str_launch_site = PyUnicode_InternFromString("launch_site")))
        return NULL;
    PyObject *old = site_fn, *old_act = active_fn;
    if (fn == Py_None || act == Py_None) {
        sites_on = 0;
        site_fn = active_fn = NULL;
    } else {
        Py_INCREF(fn);
        Py_INCREF(act);
        site_fn = fn;
        active_fn = act;
        sites_on = 1;
    }
    Py_XDECREF(old);
    Py_XDECREF(old_act);
    Py_RETURN_NONE;
}

/* site_scope(delta): a site scope entered (+1) or left (-1) on the calling thread. */
static PyObject *site_scope(PyObject *m, PyObject *arg) {
    (void)m;
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred()) return NULL;
    site_depth += d;
    if (site_depth < 0) site_depth = 0;
    return PyLong_FromLong(site_depth);
}

static PyObject *callback_stats(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    pthread_mutex_lock(&lock);
    long long sites = c_sites;
    pthread_mutex_unlock(&lock);
    return Py_BuildValue("{sLsLsL}", "callbacks", __atomic_load_n(&c_callbacks, __ATOMIC_RELAXED),
                         "site_calls", __atomic_load_n(&c_site_calls, __ATOMIC_RELAXED),
                         "sites", sites);
}

/* ---- Python interface ---------------------------------------------------------------------- */
static void *as_ptr(PyObject *o) { return o == Py_None ? NULL : PyLong_AsVoidPtr(o); }

static int fill_table(PyObject *seq, unsigned char *table) {
    memset(table, 0, MAX_CBID);
    PyObject *it = PyObject_GetIter(seq);
    if (!it) return -1;
    PyObject *x;
    while ((x = PyIter_Next(it))) {
        long v = PyLong_AsLong(x);
        Py_DECREF(x);
        if (v >= 0 && v < MAX_CBID) table[v] = 1;
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *configure(PyObject *m, PyObject *args) {
    PyObject *fns, *layout, *wd, *wr, *gd, *gr, *md, *mr;
    unsigned int ek;
    if (!PyArg_ParseTuple(args, "OOOOOOOOI:configure", &fns, &layout, &wd, &wr, &gd, &gr, &md,
                          &mr, &ek))
        return NULL;
    PyObject *a = PyTuple_GetItem(fns, 0), *b = PyTuple_GetItem(fns, 1), *c = PyTuple_GetItem(fns, 2),
             *d = PyTuple_GetItem(fns, 3);
    if (!a || !b || !c || !d) return NULL;
    next_record = (next_record_t)as_ptr(a);
    register_callbacks = (cupti_register_t)as_ptr(b);
    register_timestamp = (register_ts_t)as_ptr(c);
    subscribe_fn = (subscribe_t)as_ptr(d);
    if (PyErr_Occurred()) return NULL;
    if (!next_record || !register_callbacks) {
        PyErr_SetString(PyExc_ValueError, "configure() needs cuptiActivityGetNextRecord and "
                                          "cuptiActivityRegisterCallbacks");
        return NULL;
    }
    if (PyTuple_Size(layout) != N_OFFSETS) {
        PyErr_Format(PyExc_ValueError, "configure() needs %d offsets", (int)N_OFFSETS);
        return NULL;
    }
    for (int i = 0; i < N_OFFSETS; i++) {
        off[i] = PyLong_AsSize_t(PyTuple_GetItem(layout, i));
        if (PyErr_Occurred()) return NULL;
    }
    if (fill_table(wd, work_api[0]) || fill_table(wr, work_api[1]) || fill_table(gd, graph_api[0]) ||
        fill_table(gr, graph_api[1]) || fill_table(md, mem_api[0]) || fill_table(mr, mem_api[1]))
        return NULL;
    ext_kind = ek;
    Py_RETURN_NONE;
}

static PyObject *register_(PyObject *m, PyObject *noargs) {
    cupti_result r = register_callbacks(on_request, on_complete);
    return PyLong_FromLong(r);
}

static PyObject *register_ts(PyObject *m, PyObject *noargs) {
    if (!register_timestamp) return PyLong_FromLong(-1);
    return PyLong_FromLong(register_timestamp(monotonic_ns));
}

static PyObject *set_limits(PyObject *m, PyObject *args) {
    Py_ssize_t bs, mb, mr;
    int ro;
    if (!PyArg_ParseTuple(args, "nnnp:set_limits", &bs, &mb, &mr, &ro)) return NULL;
    pthread_mutex_lock(&lock);
    if ((size_t)bs != buffer_size) { /* kept buffers are of the old size */
        while (n_free) free(free_bufs[--n_free]);
    }
    buffer_size = (size_t)bs;
    max_buffers = (long)mb;
    max_rows = (size_t)mr;
    refuse_ok = ro;
    pthread_mutex_unlock(&lock);
    Py_RETURN_NONE;
}

static int woken;

static PyObject *wake(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    pthread_mutex_lock(&lock);
    woken = 1;
    pthread_cond_broadcast(&rows_cond);
    pthread_mutex_unlock(&lock);
    Py_RETURN_NONE;
}

static PyObject *wait_rows(PyObject *m, PyObject *args) {
    double timeout;
    if (!PyArg_ParseTuple(args, "d:wait", &timeout)) return NULL;
    PyThreadState *ts = PyEval_SaveThread();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(timeout * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&lock);
    if (!n_rows && !woken) pthread_cond_timedwait(&rows_cond, &lock, &until);
    woken = 0;
    size_t n = n_rows;
    pthread_mutex_unlock(&lock);
    PyEval_RestoreThread(ts);
    return PyLong_FromSize_t(n);
}

static int scopes_of(PyObject *seq, uint64_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (seq == Py_None) return 0;
    Py_ssize_t k = PySequence_Size(seq);
    if (k < 0) return -1;
    *out = malloc((k ? k : 1) * sizeof **out);
    if (!*out) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *x = PySequence_GetItem(seq, i);
        if (!x) return -1;
        (*out)[i] = PyLong_AsUnsignedLongLongMask(x);
        Py_DECREF(x);
    }
    *n = (size_t)k;
    return 0;
}

static int in_scopes(uint64_t s, const uint64_t *sc, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (sc[k] == s) return 1;
    return 0;
}

/* take(final, release) -> None, or (columns: tuple of N_COLS bytes of int64, new names: list of
 * bytes, new queues: list of (device, context, stream)). */
static PyObject *take(PyObject *m, PyObject *args) {
    int final;
    PyObject *release;
    if (!PyArg_ParseTuple(args, "pO:take", &final, &release)) return NULL;
    uint64_t *rel;
    size_t n_rel;
    if (scopes_of(release, &rel, &n_rel) < 0) return NULL;
    pthread_mutex_lock(&lock);
    if (n_pending && (final || n_rel)) retry_pending(final, rel, n_rel);
    free(rel);
    /* The new texts and queues, copied under the lock: CUPTI's thread may realloc both arrays
     * meanwhile (the strings themselves are never freed while the module lives). Without the
     * memory for the copies, nothing is taken: the rows wait for the next take. */
    size_t nt = n_texts - texts_taken, nq = n_queues - queues_taken;
    char **tx = nt ? malloc(nt * sizeof *tx) : NULL;
    qkey_t *qs = nq ? malloc(nq * sizeof *qs) : NULL;
    if ((nt && !tx) || (nq && !qs)) {
        pthread_mutex_unlock(&lock);
        free(tx);
        free(qs);
        return PyErr_NoMemory();
    }
    row_t *got = rows;
    size_t n = n_rows;
    rows = NULL;
    n_rows = cap_rows = 0;
    if (nt) memcpy(tx, texts + texts_taken, nt * sizeof *tx);
    if (nq) memcpy(qs, queues + queues_taken, nq * sizeof *qs);
    texts_taken = n_texts;
    queues_taken = n_queues;
    pthread_mutex_unlock(&lock);
    PyObject *names_l = PyList_New(0), *queues_l = PyList_New(0), *cols = PyTuple_New(N_COLS);
    if (!names_l || !queues_l || !cols) goto fail;
    for (size_t i = 0; i < nt; i++) {
        PyObject *b = PyBytes_FromString(tx[i]);
        if (!b || PyList_Append(names_l, b) < 0) { Py_XDECREF(b); goto fail; }
        Py_DECREF(b);
    }
    for (size_t i = 0; i < nq; i++) {
        PyObject *q = Py_BuildValue("(kkk)", (unsigned long)qs[i].dev, (unsigned long)qs[i].ctx,
                                    (unsigned long)qs[i].stream);
        if (!q || PyList_Append(queues_l, q) < 0) { Py_XDECREF(q); goto fail; }
        Py_DECREF(q);
    }
    free(tx);
    free(qs);
    tx = NULL;
    qs = NULL;
    for (int c = 0; c < N_COLS; c++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int64_t)));
        if (!b) goto fail;
        int64_t *dst = (int64_t *)PyBytes_AsString(b);
        for (size_t i = 0; i < n; i++) dst[i] = got[i].v[c];
        PyTuple_SetItem(cols, c, b);
    }
    free(got);
    PyObject *out = Py_BuildValue("(NNN)", cols, names_l, queues_l);
    return out;
fail:
    free(got);
    free(tx);
    free(qs);
    Py_XDECREF(names_l);
    Py_XDECREF(queues_l);
    Py_XDECREF(cols);
    return NULL;
}

static PyObject *waiting(PyObject *m, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O:waiting", &seq)) return NULL;
    uint64_t *sc;
    size_t n;
    if (scopes_of(seq, &sc, &n) < 0) return NULL;
    long long w = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < cap_launches; i++) {
        launch_t *l = &launches[i];
        if (l->corr && !l->tomb && (l->flags & L_SCOPE) && (l->flags & L_API) &&
            !(l->flags & L_MEM) && !l->nrows && in_scopes(l->scope, sc, n))
            w++;
    }
    pthread_mutex_unlock(&lock);
    free(sc);
    return PyLong_FromLongLong(w);
}

/* graph_devices(scopes) -> bit mask of the devices the rows of the scopes' graph launches ran on
 * (CUPTI does not say how many node records a graph launch has: the end waits for these). */
static PyObject *graph_devices(PyObject *m, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O:graph_devices", &seq)) return NULL;
    uint64_t *sc;
    size_t n;
    if (scopes_of(seq, &sc, &n) < 0) return NULL;
    uint64_t mask = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < cap_launches; i++) {
        launch_t *l = &launches[i];
        if (l->corr && !l->tomb && (l->flags & L_GRAPH) && (l->flags & L_SCOPE) && l->nrows &&
            in_scopes(l->scope, sc, n))
            mask |= l->devices;
    }
    pthread_mutex_unlock(&lock);
    free(sc);
    return PyLong_FromUnsignedLongLong(mask);
}

static PyObject *forget(PyObject *m, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O:forget", &seq)) return NULL;
    uint64_t *sc;
    size_t n;
    if (scopes_of(seq, &sc, &n) < 0) return NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < cap_launches; i++) {
        launch_t *l = &launches[i];
        if (!l->corr || l->tomb || !(l->flags & L_SCOPE) || !in_scopes(l->scope, sc, n)) continue;
        /* Launches still waiting stay: their records, if they come, are known as late. */
        if ((l->flags & L_API) && !(l->flags & L_MEM) && !l->nrows) continue;
        drop_launch(l);
    }
    pthread_mutex_unlock(&lock);
    free(sc);
    Py_RETURN_NONE;
}

static PyObject *reset(PyObject *m, PyObject *noargs) {
    pthread_mutex_lock(&lock);
    free(launches);
    launches = NULL;
    cap_launches = n_launches = n_used = 0;
    n_pending = 0;
    n_queues = queues_taken = 0;
    last_qi = -1;
    pthread_mutex_unlock(&lock);
    Py_RETURN_NONE;
}

static PyObject *stats(PyObject *m, PyObject *noargs) {
    pthread_mutex_lock(&lock);
    PyObject *d = Py_BuildValue(
        "{sLsLsLsLsLsLsLsLsnsnsn}", "buffers", c_buffers, "decoded", c_decoded, "refused",
        c_refused, "records", c_records, "unknown_kinds", c_unknown, "foreign", c_foreign,
        "dropped_rows", c_dropped_rows, "discarded_buffers", c_discarded_buffers, "launches",
        (Py_ssize_t)n_launches, "pending", (Py_ssize_t)n_pending, "rows", (Py_ssize_t)n_rows);
    pthread_mutex_unlock(&lock);
    return d;
}

/* ---- fork: the child gets the lock free --------------------------------------------------
 * A fork while CUPTI's thread holds the lock (decoding a buffer) would leave the child's copy
 * locked for good. The forking thread takes it before fork() and frees it on both sides; its
 * holders never wait for the GIL while holding it, so this waits for a decode at most. */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }

static volatile int lock_held; /* for the tests: _hold_lock holds it now */

/* _hold_lock(seconds): hold the lock that long, without the GIL (tests: a fork meanwhile;
 * _lock_held() says when it is held). */
static PyObject *hold_lock(PyObject *self, PyObject *arg) {
    (void)self;
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&lock);
    lock_held = 1;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    lock_held = 0;
    pthread_mutex_unlock(&lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *lock_is_held(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyBool_FromLong(lock_held);
}

static PyMethodDef methods[] = {
    {"_lock_held", lock_is_held, METH_NOARGS, "_lock_held(): whether _hold_lock holds it"},
    {"_hold_lock", hold_lock, METH_O,
     "_hold_lock(seconds): hold the reader's lock that long (tests: a fork meanwhile)"},
    {"configure", configure, METH_VARARGS,
     "configure((GetNextRecord, RegisterCallbacks, RegisterTimestampCallback, Subscribe "
     "addresses), "
     "offsets, work driver cbids, work runtime cbids, graph driver cbids, graph runtime cbids, "
     "external correlation kind)"},
    {"register", register_, METH_NOARGS, "register() -> CUptiResult of registering the callbacks"},
    {"register_timestamp", register_ts, METH_NOARGS,
     "register_timestamp() -> CUptiResult (-1: this CUPTI has no timestamp callback)"},
    {"set_limits", set_limits, METH_VARARGS, "set_limits(buffer_size, max_buffers, max_rows, refuse_ok)"},
    {"wait", wait_rows, METH_VARARGS, "wait(timeout) -> rows ready (releases the GIL)"},
    {"wake", wake, METH_NOARGS, "wake(): end a wait() now"},
    {"take", take, METH_VARARGS, "take(final, release_scopes) -> (columns, new names, new queues)"},
    {"waiting", waiting, METH_VARARGS, "waiting(scopes) -> launches of scopes without a record"},
    {"graph_devices", graph_devices, METH_VARARGS,
     "graph_devices(scopes) -> mask of the devices their graph launches' rows ran on"},
    {"forget", forget, METH_VARARGS, "forget(scopes): drop their launches but those waiting"},
    {"reset", reset, METH_NOARGS, "reset(): forget every launch, pending record and queue"},
    {"stats", stats, METH_NOARGS, "stats() -> counts"},
    {"subscribe", subscribe, METH_NOARGS,
     "subscribe() -> (CUptiResult, handle): cuptiSubscribe with kprof's callback"},
    {"set_sites", set_sites, METH_VARARGS,
     "set_sites(launch_site, active) or set_sites(None, None): the site functions, or off"},
    {"site_scope", site_scope, METH_O,
     "site_scope(delta) -> depth: site scopes entered on this thread"},
    {"callback_stats", callback_stats, METH_NOARGS,
     "callback_stats() -> {callbacks, site_calls, sites}: delivered, Python calls, kept"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_cupti", "kprof's optional compiled CUPTI reader.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cupti(void) {
    static int fork_handlers; /* once: handlers registered twice would take the lock twice */
    if (!fork_handlers) {
        if (pthread_atfork(before_fork, after_fork, after_fork) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
            return NULL;
        }
        fork_handlers = 1;
    }
    PyObject *m = PyModule_Create(&moduledef);
    /* The layout this module was built from: cupti_native refuses another. */
    if (m && PyModule_AddStringConstant(m, "LAYOUT", KPROF_CUPTI_LAYOUT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
