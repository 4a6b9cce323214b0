/* The rows handed to Python (see rows.h): kept in C as CUPTI's thread joins them, handed over
 * by take() as int64 columns, holding the GIL once per batch; wait() sleeps without it until
 * rows are ready. */
#include "reader.h"
#include "rows.h"
#include "intern.h"
#include "join.h"
#include "../_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

row_t *kprof_rows;
size_t kprof_n_rows, kprof_cap_rows, kprof_max_rows = (size_t)1 << 20;
long long kprof_c_dropped_rows;

static pthread_cond_t rows_cond = PTHREAD_COND_INITIALIZER;
static int woken;

int kprof_rows_grow(void) {
    size_t nc = kprof_cap_rows ? kprof_cap_rows * 2 : 4096;
    row_t *nr = realloc(kprof_rows, nc * sizeof *nr);
    if (!nr) return -1;
    kprof_rows = nr;
    kprof_cap_rows = nc;
    return 0;
}

void kprof_rows_announce(void) {
    if (kprof_n_rows) pthread_cond_broadcast(&rows_cond);
}

PyObject *kprof_py_wake(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    pthread_mutex_lock(&kprof_lock);
    woken = 1;
    pthread_cond_broadcast(&rows_cond);
    pthread_mutex_unlock(&kprof_lock);
    Py_RETURN_NONE;
}

PyObject *kprof_py_wait(PyObject *m, PyObject *args) {
    double timeout;
    if (!PyArg_ParseTuple(args, "d:wait", &timeout)) return NULL;
    PyThreadState *ts = PyEval_SaveThread();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(timeout * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&kprof_lock);
    if (!kprof_n_rows && !woken) pthread_cond_timedwait(&rows_cond, &kprof_lock, &until);
    woken = 0;
    size_t n = kprof_n_rows;
    pthread_mutex_unlock(&kprof_lock);
    PyEval_RestoreThread(ts);
    return PyLong_FromSize_t(n);
}

/* take(final, release) -> None, or (columns: tuple of N_COLS bytes of int64, new names: list of
 * bytes, new queues: list of (device, context, stream)). */
PyObject *kprof_py_take(PyObject *m, PyObject *args) {
    int final;
    PyObject *release;
    if (!PyArg_ParseTuple(args, "pO:take", &final, &release)) return NULL;
    uint64_t *rel;
    size_t n_rel;
    if (kprof_scopes_of(release, &rel, &n_rel) < 0) return NULL;
    pthread_mutex_lock(&kprof_lock);
    if (kprof_n_pending && (final || n_rel)) kprof_join_retry(final, rel, n_rel);
    free(rel);
    /* The new texts and queues, copied under the lock: CUPTI's thread may realloc both arrays
     * meanwhile. Without the memory for the copies, nothing is taken: the rows wait for the
     * next take. */
    char **tx;
    qkey_t *qs;
    size_t nt, nq;
    if (kprof_intern_new(&tx, &nt, &qs, &nq) < 0) {
        pthread_mutex_unlock(&kprof_lock);
        return PyErr_NoMemory();
    }
    row_t *got = kprof_rows;
    size_t n = kprof_n_rows;
    kprof_rows = NULL;
    kprof_n_rows = kprof_cap_rows = 0;
    pthread_mutex_unlock(&kprof_lock);
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
