/* CUPTI's activity callbacks (see buffers.h), C only: they run on CUPTI's thread (its own, or
 * a flushing one) with no GIL and no Python. A completed buffer is decoded there, under the
 * lock (decode.c), and kept for reuse. */
#include "reader.h"
#include "buffers.h"
#include "join.h"
#include "decode.h"
#include "rows.h"

static cupti_register_t register_callbacks;
static register_ts_t register_timestamp;

static size_t buffer_size = 1 << 20;
static long max_buffers = 64, outstanding;
static int refuse_ok; /* CUPTI API >= 27: refusing a buffer is safe */
#define FREE_KEPT 8
static uint8_t *free_bufs[FREE_KEPT];
static int n_free;

long long kprof_c_buffers, kprof_c_decoded, kprof_c_refused, kprof_c_discarded_buffers;
long long kprof_c_foreign_buffers;

/* The buffers lent to CUPTI and not given back yet: a completed buffer not among them is
 * another tool's (its callbacks were registered before kprof's replaced them: CUPTI completes
 * a buffer through the callbacks registered at that time). It is read, never freed nor kept:
 * its memory is the other tool's allocator's. Lock held. */
static uint8_t **lent;
static size_t n_lent, cap_lent;

static int lend(uint8_t *b) {
    if (n_lent == cap_lent) {
        size_t nc = cap_lent ? 2 * cap_lent : 64;
        uint8_t **nl = realloc(lent, nc * sizeof *nl);
        if (!nl) return -1;
        lent = nl;
        cap_lent = nc;
    }
    lent[n_lent++] = b;
    return 0;
}

static int given_back(uint8_t *b) {
    for (size_t i = 0; i < n_lent; i++)
        if (lent[i] == b) {
            lent[i] = lent[--n_lent];
            return 1;
        }
    return 0;
}

void kprof_buffers_bind(cupti_register_t register_cb, register_ts_t register_ts) {
    register_callbacks = register_cb;
    register_timestamp = register_ts;
}

static void on_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *max_records = 0;
    pthread_mutex_lock(&kprof_lock);
    if (outstanding >= max_buffers && refuse_ok) {
        kprof_c_refused++; /* CUPTI drops records and counts them */
        pthread_mutex_unlock(&kprof_lock);
        *buf = NULL;
        *size = 0;
        return;
    }
    outstanding++;
    uint8_t *b = n_free ? free_bufs[--n_free] : NULL;
    size_t bs = buffer_size;
    pthread_mutex_unlock(&kprof_lock);
    if (!b) {
        void *p = NULL;
        if (posix_memalign(&p, 8, bs) != 0) p = NULL;
        b = p;
    }
    pthread_mutex_lock(&kprof_lock);
    if (b && lend(b) < 0) { /* (no memory to note it: CUPTI gets none) */
        free(b);
        b = NULL;
    }
    if (!b) outstanding--; /* CUPTI gets none (drops records, counts them): none comes back */
    pthread_mutex_unlock(&kprof_lock);
    *buf = b;
    *size = b ? bs : 0;
}

static void on_complete(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx; (void)stream;
    pthread_mutex_lock(&kprof_lock);
    int ours = buf && given_back(buf);
    if (ours && outstanding > 0) outstanding--;
    if (buf) {
        kprof_c_buffers++;
        if (!ours) kprof_c_foreign_buffers++;
        if (valid) {
            if (kprof_n_rows >= kprof_max_rows) kprof_c_discarded_buffers++;
            kprof_decode(buf, valid);
            kprof_c_decoded++;
        }
        if (!ours)
            buf = NULL; /* another tool's: neither kept nor freed */
        else if (n_free < FREE_KEPT && size == buffer_size) {
            free_bufs[n_free++] = buf;
            buf = NULL;
        }
    }
    kprof_rows_announce();
    pthread_mutex_unlock(&kprof_lock);
    free(buf);
}

/* CUPTI's timestamps from the host's monotonic clock (perf_counter_ns's): no drift, no steps. */
static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

PyObject *kprof_py_register(PyObject *m, PyObject *noargs) {
    cupti_result r = register_callbacks(on_request, on_complete);
    return PyLong_FromLong(r);
}

PyObject *kprof_py_register_timestamp(PyObject *m, PyObject *noargs) {
    if (!register_timestamp) return PyLong_FromLong(-1);
    return PyLong_FromLong(register_timestamp(monotonic_ns));
}

/* set_limits(buffer_size, max_buffers, max_rows, refuse_ok, max_launches): the rows' bound is
 * rows.c's, the launches' join.c's. */
PyObject *kprof_py_set_limits(PyObject *m, PyObject *args) {
    Py_ssize_t bs, mb, mr, ml;
    int ro;
    if (!PyArg_ParseTuple(args, "nnnpn:set_limits", &bs, &mb, &mr, &ro, &ml)) return NULL;
    if (ml < 8) {
        PyErr_SetString(PyExc_ValueError, "set_limits: max_launches must be at least 8");
        return NULL;
    }
    pthread_mutex_lock(&kprof_lock);
    if ((size_t)bs != buffer_size) { /* kept buffers are of the old size */
        while (n_free) free(free_bufs[--n_free]);
    }
    buffer_size = (size_t)bs;
    max_buffers = (long)mb;
    kprof_max_rows = (size_t)mr;
    refuse_ok = ro;
    kprof_max_launches = (size_t)ml;
    pthread_mutex_unlock(&kprof_lock);
    Py_RETURN_NONE;
}
