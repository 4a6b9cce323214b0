/* The join (see join.h): the launch table's growth, the waiting records retried, and Python's
 * questions about a profile's launches (waiting, graph_devices, forget). */
#include "reader.h"
#include "join.h"

launch_t *kprof_launches;
size_t kprof_cap_launches, kprof_n_launches, kprof_n_used;
raw_t *kprof_pending;
size_t kprof_n_pending, kprof_cap_pending;
long long kprof_c_foreign;
size_t kprof_max_launches = MAX_LAUNCHES;
long long kprof_c_forgotten;

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void kprof_launches_forget_oldest(void) {
    size_t n = 0, k = kprof_n_launches / 8 + 1;
    uint32_t *ids = malloc(kprof_n_launches * sizeof *ids);
    if (!ids) return;
    for (size_t i = 0; i < kprof_cap_launches; i++)
        if (kprof_launches[i].corr && !kprof_launches[i].tomb) ids[n++] = kprof_launches[i].corr;
    if (k > n) k = n;
    qsort(ids, n, sizeof *ids, cmp_u32); /* rare: only a table full of launches never done */
    uint32_t below = k < n ? ids[k] : UINT32_MAX;
    free(ids);
    for (size_t i = 0; i < kprof_cap_launches; i++) {
        launch_t *l = &kprof_launches[i];
        if (l->corr && !l->tomb && (l->corr < below || (k == n && l->corr == below))) {
            kprof_drop_launch(l);
            kprof_c_forgotten++;
        }
    }
}

/* Rehash into a table sized for the live launches (at most a quarter full): tombstones of
 * launches that got their records go, so probes stay short however many launches passed. */
int kprof_launches_grow(void) {
    size_t ncap = 1024;
    while (ncap < 4 * (kprof_n_launches + 1)) ncap *= 2;
    launch_t *nl = calloc(ncap, sizeof *nl);
    if (!nl) return -1;
    for (size_t j = 0; j < kprof_cap_launches; j++) {
        launch_t *l = &kprof_launches[j];
        if (l->corr == 0 || l->tomb) continue;
        size_t i = kprof_hash32(l->corr) & (ncap - 1);
        while (nl[i].corr) i = (i + 1) & (ncap - 1);
        nl[i] = *l;
    }
    free(kprof_launches);
    kprof_launches = nl;
    kprof_cap_launches = ncap;
    kprof_n_used = kprof_n_launches;
    return 0;
}

int kprof_pending_grow(void) {
    size_t nc = kprof_cap_pending ? kprof_cap_pending * 2 : 256;
    raw_t *np = realloc(kprof_pending, nc * sizeof *np);
    if (!np) return -1;
    kprof_pending = np;
    kprof_cap_pending = nc;
    return 0;
}

void kprof_join_retry(int final, const uint64_t *release, size_t n_release) {
    size_t keep = 0;
    for (size_t i = 0; i < kprof_n_pending; i++)
        if (!kprof_resolve(&kprof_pending[i], final, release, n_release))
            kprof_pending[keep++] = kprof_pending[i];
    kprof_n_pending = keep;
}

void kprof_join_reset(void) {
    free(kprof_launches);
    kprof_launches = NULL;
    kprof_cap_launches = kprof_n_launches = kprof_n_used = 0;
    kprof_n_pending = 0;
}

/* ---- Python's questions about its scopes' launches ---------------------------------------- */
int kprof_scopes_of(PyObject *seq, uint64_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (seq == Py_None) return 0;
    Py_ssize_t k = PySequence_Size(seq);
    if (k < 0) return -1;
    *out = malloc((k ? k : 1) * sizeof **out);
    if (!*out) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *x = PySequence_GetItem(seq, i);
        if (x) {
            (*out)[i] = PyLong_AsUnsignedLongLongMask(x);
            Py_DECREF(x);
        }
        if (!x || PyErr_Occurred()) { /* an item that is not an int: nothing is kept */
            free(*out);
            *out = NULL;
            return -1;
        }
    }
    *n = (size_t)k;
    return 0;
}

static int in_scopes(uint64_t s, const uint64_t *sc, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (sc[k] == s) return 1;
    return 0;
}

/* waiting(scopes) -> launches of the scopes whose records have not come. */
PyObject *kprof_py_waiting(PyObject *m, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O:waiting", &seq)) return NULL;
    uint64_t *sc;
    size_t n;
    if (kprof_scopes_of(seq, &sc, &n) < 0) return NULL;
    long long w = 0;
    pthread_mutex_lock(&kprof_lock);
    for (size_t i = 0; i < kprof_cap_launches; i++) {
        launch_t *l = &kprof_launches[i];
        if (l->corr && !l->tomb && (l->flags & L_SCOPE) && (l->flags & L_API) &&
            !(l->flags & L_MEM) && !l->nrows && in_scopes(l->scope, sc, n))
            w++;
    }
    pthread_mutex_unlock(&kprof_lock);
    free(sc);
    return PyLong_FromLongLong(w);
}

/* graph_devices(scopes) -> bit mask of the devices the rows of the scopes' graph launches ran on
 * (CUPTI does not say how many node records a graph launch has: the end waits for these). */
PyObject *kprof_py_graph_devices(PyObject *m, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O:graph_devices", &seq)) return NULL;
    uint64_t *sc;
    size_t n;
    if (kprof_scopes_of(seq, &sc, &n) < 0) return NULL;
    uint64_t mask = 0;
    pthread_mutex_lock(&kprof_lock);
    for (size_t i = 0; i < kprof_cap_launches; i++) {
        launch_t *l = &kprof_launches[i];
        if (l->corr && !l->tomb && (l->flags & L_SEVERAL) && (l->flags & L_SCOPE) && l->nrows &&
            in_scopes(l->scope, sc, n))
            mask |= l->devices;
    }
    pthread_mutex_unlock(&kprof_lock);
    free(sc);
    return PyLong_FromUnsignedLongLong(mask);
}

/* forget(scopes): drops the scopes' launches, but those still waiting for their records. */
PyObject *kprof_py_forget(PyObject *m, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O:forget", &seq)) return NULL;
    uint64_t *sc;
    size_t n;
    if (kprof_scopes_of(seq, &sc, &n) < 0) return NULL;
    pthread_mutex_lock(&kprof_lock);
    for (size_t i = 0; i < kprof_cap_launches; i++) {
        launch_t *l = &kprof_launches[i];
        if (!l->corr || l->tomb || !(l->flags & L_SCOPE) || !in_scopes(l->scope, sc, n)) continue;
        /* Launches still waiting stay: their records, if they come, are known as late. */
        if ((l->flags & L_API) && !(l->flags & L_MEM) && !l->nrows) continue;
        kprof_drop_launch(l);
    }
    pthread_mutex_unlock(&kprof_lock);
    free(sc);
    Py_RETURN_NONE;
}
