/* kprof_cuda._cupti, the CUDA plugin's compiled CUPTI reader (see kprof_cuda/cupti_native.py,
 * which drives it).
 *
 * CUPTI hands completed activity buffers to C callbacks registered here; each buffer is walked
 * with cuptiActivityGetNextRecord on the thread CUPTI calls from (its own, or a flushing one),
 * its external-correlation, API, kernel, memcpy and memset records joined by correlation id in
 * C (in any order: work records whose launch is not complete wait), kernel names interned, and
 * the rows kept in C. No Python runs on CUPTI's thread and no Python object is made per
 * record: Python takes every ready row at once as int64 columns (take()), holding the GIL once
 * per batch, on its own schedule.
 *
 * One concern a unit, each with the header that declares what it shares (reader.h: what every
 * unit includes first):
 *   buffers.c  CUPTI's activity callbacks: the buffers lent and taken back, their limits; the
 *              timestamp callback
 *   decode.c   the records' format (configure()) and the walk of a completed buffer
 *   join.c     each launch's entry by correlation id, the records waiting for theirs, a joined
 *              record's row (the per-record steps inline in join.h); waiting, forget
 *   intern.c   kernel names and queues, to the indexes rows carry
 *   rows.c     the rows kept until take() hands them over; wait, wake
 *   sites.c    launch sites through CUPTI's callback API
 *   module.c   this: the lock and fork, stats, reset, the module's functions
 *
 * Limited API (abi3, CPython >= 3.10). No NVIDIA header is needed: CUPTI's functions are
 * reached through addresses Python found with ctypes (cupti_lib.py), and record fields are
 * read at the offsets Python passes in (cupti_abi.layout(), the one definition). The row
 * columns' and the offsets' indexes come from ../_cupti_layout.h, generated from
 * cupti_layout.py (the one definition of both formats); LAYOUT says which this was built from.
 */
#include "reader.h"
#include "buffers.h"
#include "decode.h"
#include "intern.h"
#include "join.h"
#include "rows.h"
#include "sites.h"
#include "../_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

pthread_mutex_t kprof_lock = PTHREAD_MUTEX_INITIALIZER;

/* reset(): forget every launch, waiting record and queue. */
static PyObject *reset(PyObject *m, PyObject *noargs) {
    pthread_mutex_lock(&kprof_lock);
    kprof_join_reset();
    kprof_queues_reset();
    pthread_mutex_unlock(&kprof_lock);
    Py_RETURN_NONE;
}

/* stats() -> counts: buffers, records, rows dropped, launches and records waiting, rows. */
static PyObject *stats(PyObject *m, PyObject *noargs) {
    /* Copied under the lock, built after it: making Python objects can run a finalizer that
     * calls back into this module. */
    pthread_mutex_lock(&kprof_lock);
    long long c[] = {kprof_c_buffers, kprof_c_decoded, kprof_c_refused, kprof_c_records,
                     kprof_c_unknown, kprof_c_foreign, kprof_c_dropped_rows,
                     kprof_c_discarded_buffers, kprof_c_forgotten, kprof_c_foreign_buffers};
    Py_ssize_t launches = (Py_ssize_t)kprof_n_launches, pending = (Py_ssize_t)kprof_n_pending,
               rows = (Py_ssize_t)kprof_n_rows;
    pthread_mutex_unlock(&kprof_lock);
    return Py_BuildValue("{sLsLsLsLsLsLsLsLsLsLsnsnsn}", "buffers", c[0], "decoded", c[1],
                         "refused", c[2], "records", c[3], "unknown_kinds", c[4], "foreign",
                         c[5], "dropped_rows", c[6], "discarded_buffers", c[7], "forgotten",
                         c[8], "foreign_buffers", c[9], "launches", launches, "pending",
                         pending, "rows", rows);
}

/* ---- fork: the child gets the lock free --------------------------------------------------
 * A fork while CUPTI's thread holds the lock (decoding a buffer) would leave the child's copy
 * locked for good. The forking thread takes it before fork() and frees it on both sides; its
 * holders never wait for the GIL while holding it, so this waits for a decode at most. */
static void before_fork(void) { pthread_mutex_lock(&kprof_lock); }
static void after_fork(void) { pthread_mutex_unlock(&kprof_lock); }

static volatile int lock_held; /* for the tests: _hold_lock holds it now */

/* _hold_lock(seconds): hold the lock that long, without the GIL (tests: a fork meanwhile;
 * _lock_held() says when it is held). */
static PyObject *hold_lock(PyObject *self, PyObject *arg) {
    (void)self;
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&kprof_lock);
    lock_held = 1;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    lock_held = 0;
    pthread_mutex_unlock(&kprof_lock);
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
    {"configure", kprof_py_configure, METH_VARARGS,
     "configure((GetNextRecord, RegisterCallbacks, RegisterTimestampCallback, Subscribe "
     "addresses), "
     "offsets, work driver cbids, work runtime cbids, graph driver cbids, graph runtime cbids, "
     "external correlation kind)"},
    {"register", kprof_py_register, METH_NOARGS,
     "register() -> CUptiResult of registering the callbacks"},
    {"register_timestamp", kprof_py_register_timestamp, METH_NOARGS,
     "register_timestamp() -> CUptiResult (-1: this CUPTI has no timestamp callback)"},
    {"set_limits", kprof_py_set_limits, METH_VARARGS,
     "set_limits(buffer_size, max_buffers, max_rows, refuse_ok, max_launches)"},
    {"wait", kprof_py_wait, METH_VARARGS, "wait(timeout) -> rows ready (releases the GIL)"},
    {"wake", kprof_py_wake, METH_NOARGS, "wake(): end a wait() now"},
    {"take", kprof_py_take, METH_VARARGS,
     "take(final, release_scopes) -> (columns, new names, new queues)"},
    {"waiting", kprof_py_waiting, METH_VARARGS,
     "waiting(scopes) -> launches of scopes without a record"},
    {"graph_devices", kprof_py_graph_devices, METH_VARARGS,
     "graph_devices(scopes) -> mask of the devices their graph launches' rows ran on"},
    {"forget", kprof_py_forget, METH_VARARGS,
     "forget(scopes): drop their launches but those waiting"},
    {"reset", reset, METH_NOARGS, "reset(): forget every launch, pending record and queue"},
    {"stats", stats, METH_NOARGS, "stats() -> counts"},
    {"subscribe", kprof_py_subscribe, METH_NOARGS,
     "subscribe() -> (CUptiResult, handle): cuptiSubscribe with kprof's callback"},
    {"set_sites", kprof_py_set_sites, METH_VARARGS,
     "set_sites(launch_site, active) or set_sites(None, None): the site functions, or off"},
    {"site_scope", kprof_py_site_scope, METH_O,
     "site_scope(delta) -> depth: site scopes entered on this thread"},
    {"callback_stats", kprof_py_callback_stats, METH_NOARGS,
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
