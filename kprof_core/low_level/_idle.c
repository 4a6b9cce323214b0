/* The idle analysis's helpers (kprof_core.analysis.idle_columns and idle.py call them; their
 * Python twins there compute the same figures, which a test checks). A unit of the compiled
 * recorder's extension, whose module exports them: one extension, one build. */

#include "_crecorder_unit.h"
#include <stdlib.h>
#include <string.h>

#include "_idle.h"

/* The helpers' calling convention: idle_columns.compiled_helpers() uses a module whose
 * IDLE_VERSION equals its own, and the Python twin otherwise (a stale build is never called
 * with arguments it does not take). */
#define KPROF_IDLE_VERSION 2

/* -- the idle analysis's scan (kprof_core.analysis.idle_columns.window, in C) ------------- */

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Natural merge sort, stable: the runs already in order (one per queue, typically) are
 * merged pairwise, O(n log runs); past 64 runs, qsort. Returns -1 out of memory. */
#define NATURAL_SORT(NAME, T, LESS)                                                            \
    static int NAME(T *v, Py_ssize_t n)                                                        \
    {                                                                                          \
        Py_ssize_t bounds[66], nb = 0;                                                         \
        bounds[nb++] = 0;                                                                      \
        for (Py_ssize_t i = 1; i < n; i++)                                                     \
            if (LESS(v[i], v[i - 1])) {                                                        \
                if (nb == 65)                                                                  \
                    return 1; /* too many runs: the caller sorts otherwise */                  \
                bounds[nb++] = i;                                                              \
            }                                                                                  \
        bounds[nb] = n;                                                                        \
        if (nb == 1)                                                                           \
            return 0;                                                                          \
        T *tmp = PyMem_Malloc(sizeof(T) * n);                                                  \
        if (tmp == NULL)                                                                       \
            return -1;                                                                         \
        while (nb > 1) {                                                                       \
            Py_ssize_t k = 0;                                                                  \
            for (Py_ssize_t r = 0; r < nb; r += 2) {                                           \
                Py_ssize_t a = bounds[r], mid = bounds[r + 1 <= nb ? r + 1 : nb];              \
                Py_ssize_t end = r + 2 <= nb ? bounds[r + 2] : mid;                            \
                Py_ssize_t i = a, j = mid, o = a;                                              \
                while (i < mid && j < end)                                                     \
                    tmp[o++] = LESS(v[j], v[i]) ? v[j++] : v[i++];                             \
                while (i < mid)                                                                \
                    tmp[o++] = v[i++];                                                         \
                while (j < end)                                                                \
                    tmp[o++] = v[j++];                                                         \
                memcpy(v + a, tmp + a, sizeof(T) * (end - a));                                 \
                bounds[k++] = a;                                                               \
            }                                                                                  \
            bounds[k] = n;                                                                     \
            nb = k;                                                                            \
        }                                                                                      \
        PyMem_Free(tmp);                                                                       \
        return 0;                                                                              \
    }

#define LESS_I64(x, y) ((x) < (y))
NATURAL_SORT(merge_runs_i64, int64_t, LESS_I64)

static int
sort_i64(int64_t *v, Py_ssize_t n)
{
    int r = merge_runs_i64(v, n);
    if (r == 1)
        qsort(v, n, sizeof(int64_t), cmp_i64);
    return r < 0 ? -1 : 0;
}


/* idle_window(s, e, ls, le, lo, hi, w0, w1, others, keep) -> (busy, host, launch, dep, other,
 * area, depth_max, u0, u1): rows lo..hi of the int64 columns s (sorted), e, ls, le, clipped to
 * [w0, w1); host counts all waiting for the host, launch the part of it inside the next work's
 * own launch call; others: sorted int64 bytes beginning with a sentinel, or None; u0/u1 the
 * union's intervals as int64 bytes when keep, else None. The same arithmetic as the Python
 * twin, row by row. */
static PyObject *
idle_window(PyObject *module, PyObject *args)
{
    PyObject *sb, *eb, *lsb, *leb, *ob;
    Py_ssize_t lo, hi;
    long long w0, w1;
    int keep;
    if (!PyArg_ParseTuple(args, "SSSSnnLLOp:idle_window", &sb, &eb, &lsb, &leb, &lo, &hi, &w0,
                          &w1, &ob, &keep))
        return NULL;
    Py_ssize_t n = PyBytes_Size(sb) / 8;
    if (PyBytes_Size(eb) / 8 != n || PyBytes_Size(lsb) / 8 != n || PyBytes_Size(leb) / 8 != n
        || lo < 0 || hi > n || lo > hi || (ob != Py_None && !PyBytes_Check(ob))) {
        PyErr_SetString(PyExc_ValueError, "idle_window: bad columns or bounds");
        return NULL;
    }
    const int64_t *s = (const int64_t *)PyBytes_AsString(sb);
    const int64_t *e = (const int64_t *)PyBytes_AsString(eb);
    const int64_t *ls = (const int64_t *)PyBytes_AsString(lsb);
    const int64_t *le = (const int64_t *)PyBytes_AsString(leb);
    const int64_t *o = ob == Py_None ? NULL : (const int64_t *)PyBytes_AsString(ob);
    Py_ssize_t no = ob == Py_None ? 0 : PyBytes_Size(ob) / 8;
    Py_ssize_t m = hi - lo;
    int64_t busy = 0, host = 0, launch = 0, dep = 0, other = 0, area = 0, depth_max = 0;
    PyObject *u0b = NULL, *u1b = NULL;
    if (m <= 0) {
        host = w1 - w0;
        return Py_BuildValue("LLLLLLLOO", (long long)0, (long long)host, (long long)0,
                             (long long)0, (long long)0, (long long)0, (long long)0, Py_None,
                             Py_None);
    }
    int64_t *ends = PyMem_Malloc(sizeof(int64_t) * m);
    int64_t *lcs = PyMem_Malloc(sizeof(int64_t) * m);
    int64_t *u0 = keep ? PyMem_Malloc(sizeof(int64_t) * m) : NULL;
    int64_t *u1 = keep ? PyMem_Malloc(sizeof(int64_t) * m) : NULL;
    if (ends == NULL || lcs == NULL || (keep && (u0 == NULL || u1 == NULL))) {
        PyMem_Free(ends), PyMem_Free(lcs), PyMem_Free(u0), PyMem_Free(u1);
        return PyErr_NoMemory();
    }
    Py_ssize_t nu = 0;
    int64_t runmax = 0, ustart = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        Py_ssize_t i = lo + k;
        int64_t si = s[i] < w0 ? w0 : s[i];
        int64_t ei = e[i] > w1 ? w1 : e[i];
        if (ei < si)
            ei = si;
        int64_t g0 = 0, g1 = 0;
        int gap = 0;
        if (k == 0) {
            if (si > w0)
                gap = 1, g0 = w0, g1 = si;
            ustart = si, runmax = ei;
        } else if (si > runmax) {
            gap = 1, g0 = runmax, g1 = si;
            if (keep)
                u0[nu] = ustart, u1[nu] = runmax, nu++;
            busy += runmax - ustart;
            ustart = si, runmax = ei;
        } else if (ei > runmax) {
            runmax = ei;
        }
        if (gap) {
            int64_t cut = le[i] > g0 ? le[i] : g0;
            if (cut > g1)
                cut = g1;
            host += cut - g0;
            /* the part of it inside the next work's own launch call */
            int64_t in_call = ls[i] < g0 ? g0 : ls[i];
            if (in_call > cut)
                in_call = cut;
            launch += cut - in_call;
            int64_t rest = g1 - cut;
            if (rest && o != NULL) {
                /* the last other end at or before g1 (o[0] is a sentinel below every time) */
                Py_ssize_t a = 0, b = no;
                while (a < b) {
                    Py_ssize_t mid = (a + b) / 2;
                    if (o[mid] <= g1)
                        a = mid + 1;
                    else
                        b = mid;
                }
                int64_t latest = a > 0 ? o[a - 1] : INT64_MIN;
                if (latest > cut) {
                    dep += latest - cut;
                    rest -= latest - cut;
                }
            }
            other += rest;
        }
        /* depth counts work from its launch call's start */
        int64_t lc = ls[i] < w0 ? w0 : ls[i];
        if (lc > ei)
            lc = ei;
        area += ei - lc;
        ends[k] = ei, lcs[k] = lc;
    }
    busy += runmax - ustart;
    if (keep)
        u0[nu] = ustart, u1[nu] = runmax, nu++;
    host += w1 - runmax;
    /* depth: ends and launches merged in time order, an end first at a tie (an in-order
     * queue's are sorted already) */
    if (sort_i64(ends, m) < 0 || sort_i64(lcs, m) < 0) {
        PyMem_Free(ends), PyMem_Free(lcs), PyMem_Free(u0), PyMem_Free(u1);
        return PyErr_NoMemory();
    }
    Py_ssize_t a = 0, b = 0;
    int64_t depth = 0;
    while (b < m) {
        if (a < m && ends[a] <= lcs[b])
            depth--, a++;
        else {
            depth++, b++;
            if (depth > depth_max)
                depth_max = depth;
        }
    }
    PyMem_Free(ends), PyMem_Free(lcs);
    if (keep) {
        u0b = PyBytes_FromStringAndSize((const char *)u0, nu * 8);
        u1b = PyBytes_FromStringAndSize((const char *)u1, nu * 8);
    }
    PyMem_Free(u0), PyMem_Free(u1);
    if (keep && (u0b == NULL || u1b == NULL)) {
        Py_XDECREF(u0b), Py_XDECREF(u1b);
        return NULL;
    }
    PyObject *res = Py_BuildValue("LLLLLLLOO", (long long)busy, (long long)host,
                                  (long long)launch, (long long)dep, (long long)other,
                                  (long long)area, (long long)depth_max, keep ? u0b : Py_None,
                                  keep ? u1b : Py_None);
    Py_XDECREF(u0b), Py_XDECREF(u1b);
    return res;
}

/* k-th smallest of v[0..n) (v reordered), Hoare's selection: O(n) on average. */
static int64_t
select_k(int64_t *v, Py_ssize_t n, Py_ssize_t k)
{
    Py_ssize_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t pivot = v[lo + (hi - lo) / 2];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                int64_t t = v[i];
                v[i] = v[j], v[j] = t;
                i++, j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* nearest rank: the smallest value with q % of the values at or below it */
static Py_ssize_t
rank_of(Py_ssize_t n, int q)
{
    Py_ssize_t r = (q * n + 99) / 100 - 1;
    return r < 0 ? 0 : r;
}

static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* idle_stats(s, e, ls, le, spans, aligned) -> (rows, short_rows, short_ns, median duration,
 * median launch, delays or None): over the rows in the (lo, hi) index pairs of `spans` (int64
 * bytes); delays = (count, min, p50, p90, p99, max, mean) of s - le when aligned. The Python
 * twin is kprof_core.analysis.idle_columns.group. */
static PyObject *
idle_stats(PyObject *module, PyObject *args)
{
    PyObject *sb, *eb, *lsb, *leb, *spb;
    int aligned;
    if (!PyArg_ParseTuple(args, "SSSSSp:idle_stats", &sb, &eb, &lsb, &leb, &spb, &aligned))
        return NULL;
    Py_ssize_t n = PyBytes_Size(sb) / 8, ns = PyBytes_Size(spb) / 16;
    if (PyBytes_Size(eb) / 8 != n || PyBytes_Size(lsb) / 8 != n || PyBytes_Size(leb) / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "idle_stats: columns of different lengths");
        return NULL;
    }
    const int64_t *s = (const int64_t *)PyBytes_AsString(sb);
    const int64_t *e = (const int64_t *)PyBytes_AsString(eb);
    const int64_t *ls = (const int64_t *)PyBytes_AsString(lsb);
    const int64_t *le = (const int64_t *)PyBytes_AsString(leb);
    const int64_t *sp = (const int64_t *)PyBytes_AsString(spb);
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 0; k < ns; k++) {
        if (sp[2 * k] < 0 || sp[2 * k + 1] > n || sp[2 * k] > sp[2 * k + 1]) {
            PyErr_SetString(PyExc_ValueError, "idle_stats: bad row spans");
            return NULL;
        }
        m += sp[2 * k + 1] - sp[2 * k];
    }
    if (m == 0)
        return Py_BuildValue("nnnnnO", (Py_ssize_t)0, (Py_ssize_t)0, (Py_ssize_t)0,
                             (Py_ssize_t)0, (Py_ssize_t)0, Py_None);
    int64_t *dur = PyMem_Malloc(sizeof(int64_t) * m);
    int64_t *launch = PyMem_Malloc(sizeof(int64_t) * m);
    int64_t *delay = aligned ? PyMem_Malloc(sizeof(int64_t) * m) : NULL;
    if (dur == NULL || launch == NULL || (aligned && delay == NULL)) {
        PyMem_Free(dur), PyMem_Free(launch), PyMem_Free(delay);
        return PyErr_NoMemory();
    }
    long long short_rows = 0, short_ns = 0, dsum = 0;
    Py_ssize_t j = 0;
    for (Py_ssize_t k = 0; k < ns; k++)
        for (Py_ssize_t i = sp[2 * k]; i < sp[2 * k + 1]; i++, j++) {
            dur[j] = e[i] - s[i];
            launch[j] = le[i] - ls[i];
            if (dur[j] < launch[j])
                short_rows++, short_ns += dur[j];
            if (aligned) {
                delay[j] = s[i] - le[i];
                dsum += delay[j];
            }
        }
    long long md = select_k(dur, m, (m - 1) / 2), ml = select_k(launch, m, (m - 1) / 2);
    PyObject *delays = Py_None;
    Py_INCREF(Py_None);
    if (aligned) {
        int64_t mn = delay[0], mx = delay[0];
        for (Py_ssize_t i = 1; i < m; i++) {
            if (delay[i] < mn)
                mn = delay[i];
            if (delay[i] > mx)
                mx = delay[i];
        }
        long long p50 = select_k(delay, m, rank_of(m, 50));
        long long p90 = select_k(delay, m, rank_of(m, 90));
        long long p99 = select_k(delay, m, rank_of(m, 99));
        Py_DECREF(Py_None);
        delays = Py_BuildValue("nLLLLLL", m, (long long)mn, p50, p90, p99, (long long)mx,
                               (long long)floor_div(dsum, m));
    }
    PyMem_Free(dur), PyMem_Free(launch), PyMem_Free(delay);
    if (delays == NULL)
        return NULL;
    PyObject *res = Py_BuildValue("nLLLLO", m, short_rows, short_ns, md, ml, delays);
    Py_DECREF(delays);
    return res;
}

typedef struct {
    int64_t key;
    int64_t index;
} keyed_t;

static int
cmp_keyed(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    if (x->key != y->key)
        return (x->key > y->key) - (x->key < y->key);
    return (x->index > y->index) - (x->index < y->index);
}

#define LESS_KEYED(x, y) ((x).key < (y).key)
NATURAL_SORT(merge_runs_keyed, keyed_t, LESS_KEYED)

/* idle_order(s) -> None when s (int64 bytes) is sorted, else the permutation that sorts it
 * (stable) as int64 bytes. */
static PyObject *
idle_order(PyObject *module, PyObject *args)
{
    PyObject *sb;
    if (!PyArg_ParseTuple(args, "S:idle_order", &sb))
        return NULL;
    Py_ssize_t n = PyBytes_Size(sb) / 8;
    const int64_t *s = (const int64_t *)PyBytes_AsString(sb);
    Py_ssize_t i = 1;
    while (i < n && s[i - 1] <= s[i])
        i++;
    if (i >= n)
        Py_RETURN_NONE;
    keyed_t *kv = PyMem_Malloc(sizeof(keyed_t) * n);
    if (kv == NULL)
        return PyErr_NoMemory();
    for (i = 0; i < n; i++)
        kv[i].key = s[i], kv[i].index = i;
    int r = merge_runs_keyed(kv, n);
    if (r < 0) {
        PyMem_Free(kv);
        return PyErr_NoMemory();
    }
    if (r == 1)
        qsort(kv, n, sizeof(keyed_t), cmp_keyed);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out != NULL) {
        int64_t *o = (int64_t *)PyBytes_AsString(out);
        for (i = 0; i < n; i++)
            o[i] = kv[i].index;
    }
    PyMem_Free(kv);
    return out;
}

/* idle_take(column, order) -> column[order[j]] as int64 bytes. */
static PyObject *
idle_take(PyObject *module, PyObject *args)
{
    PyObject *cb, *ob;
    if (!PyArg_ParseTuple(args, "SS:idle_take", &cb, &ob))
        return NULL;
    Py_ssize_t n = PyBytes_Size(cb) / 8, m = PyBytes_Size(ob) / 8;
    const int64_t *c = (const int64_t *)PyBytes_AsString(cb);
    const int64_t *o = (const int64_t *)PyBytes_AsString(ob);
    PyObject *out = PyBytes_FromStringAndSize(NULL, m * 8);
    if (out == NULL)
        return NULL;
    int64_t *v = (int64_t *)PyBytes_AsString(out);
    for (Py_ssize_t j = 0; j < m; j++) {
        if (o[j] < 0 || o[j] >= n) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_IndexError, "idle_take: index out of range");
            return NULL;
        }
        v[j] = c[o[j]];
    }
    return out;
}

/* idle_cover(starts, ends, at_least) -> the time during which at least `at_least` of the
 * intervals [starts[j], ends[j]) cover (int64 bytes; an end counts first at a tie). */
static PyObject *
idle_cover(PyObject *module, PyObject *args)
{
    PyObject *sb, *eb;
    long long at_least;
    if (!PyArg_ParseTuple(args, "SSL:idle_cover", &sb, &eb, &at_least))
        return NULL;
    Py_ssize_t n = PyBytes_Size(sb) / 8;
    if (PyBytes_Size(eb) / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "idle_cover: columns of different lengths");
        return NULL;
    }
    int64_t *st = PyMem_Malloc(sizeof(int64_t) * (n + 1));
    int64_t *en = PyMem_Malloc(sizeof(int64_t) * (n + 1));
    if (st == NULL || en == NULL) {
        PyMem_Free(st), PyMem_Free(en);
        return PyErr_NoMemory();
    }
    memcpy(st, PyBytes_AsString(sb), n * 8);
    memcpy(en, PyBytes_AsString(eb), n * 8);
    if (sort_i64(st, n) < 0 || sort_i64(en, n) < 0) {
        PyMem_Free(st), PyMem_Free(en);
        return PyErr_NoMemory();
    }
    Py_ssize_t a = 0, b = 0;
    long long count = 0, total = 0, prev = 0;
    while (a < n || b < n) {
        int64_t t;
        int is_end = b < n && (a >= n || en[b] <= st[a]);
        t = is_end ? en[b] : st[a];
        if (count >= at_least)
            total += t - prev;
        prev = t;
        if (is_end)
            count--, b++;
        else
            count++, a++;
    }
    PyMem_Free(st), PyMem_Free(en);
    return PyLong_FromLongLong(total);
}

/* idle_pick(codes, wanted, column, sort) -> the column's values (int64 bytes) on the rows
 * whose code (int64 bytes) is in `wanted` (a tuple of ints), or, with wanted negated
 * (`keep` false), not in it; sorted when `sort`. */
static PyObject *
idle_pick(PyObject *module, PyObject *args)
{
    PyObject *cb, *wanted, *colb;
    int keep, sort;
    if (!PyArg_ParseTuple(args, "SO!Spp:idle_pick", &cb, &PyTuple_Type, &wanted, &colb, &keep,
                          &sort))
        return NULL;
    Py_ssize_t n = PyBytes_Size(cb) / 8, nw = PyTuple_Size(wanted);
    if (PyBytes_Size(colb) / 8 != n || nw > 64) {
        PyErr_SetString(PyExc_ValueError, "idle_pick: bad columns or too many codes");
        return NULL;
    }
    int64_t w[64];
    for (Py_ssize_t k = 0; k < nw; k++) {
        w[k] = PyLong_AsLongLong(PyTuple_GetItem(wanted, k));
        if (w[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    const int64_t *c = (const int64_t *)PyBytes_AsString(cb);
    const int64_t *col = (const int64_t *)PyBytes_AsString(colb);
    int64_t *v = PyMem_Malloc(sizeof(int64_t) * (n + 1));
    if (v == NULL)
        return PyErr_NoMemory();
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int in = 0;
        for (Py_ssize_t k = 0; k < nw && !in; k++)
            in = c[i] == w[k];
        if (in == keep)
            v[m++] = col[i];
    }
    if (sort && sort_i64(v, m) < 0) {
        PyMem_Free(v);
        return PyErr_NoMemory();
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)v, m * 8);
    PyMem_Free(v);
    return out;
}

/* idle_ends(s, d) -> (s + d as int64 bytes, their maximum or None). */
static PyObject *
idle_ends(PyObject *module, PyObject *args)
{
    PyObject *sb, *db;
    if (!PyArg_ParseTuple(args, "SS:idle_ends", &sb, &db))
        return NULL;
    Py_ssize_t n = PyBytes_Size(sb) / 8;
    if (PyBytes_Size(db) / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "idle_ends: columns of different lengths");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL)
        return NULL;
    const int64_t *s = (const int64_t *)PyBytes_AsString(sb);
    const int64_t *d = (const int64_t *)PyBytes_AsString(db);
    int64_t *e = (int64_t *)PyBytes_AsString(out);
    int64_t mx = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        e[i] = s[i] + d[i];
        if (e[i] > mx)
            mx = e[i];
    }
    PyObject *res = n ? Py_BuildValue("OL", out, (long long)mx) : Py_BuildValue("OO", out, Py_None);
    Py_DECREF(out);
    return res;
}

static PyMethodDef idle_functions[] = {
    {"idle_window", idle_window, METH_VARARGS,
     "The idle analysis's scan: see kprof_core.analysis.idle_columns."},
    {"idle_stats", idle_stats, METH_VARARGS, "The idle analysis: see kprof_core.analysis."},
    {"idle_order", idle_order, METH_VARARGS, "The idle analysis: see kprof_core.analysis."},
    {"idle_take", idle_take, METH_VARARGS, "The idle analysis: see kprof_core.analysis."},
    {"idle_ends", idle_ends, METH_VARARGS, "The idle analysis: see kprof_core.analysis."},
    {"idle_pick", idle_pick, METH_VARARGS, "The idle analysis: see kprof_core.analysis."},
    {"idle_cover", idle_cover, METH_VARARGS, "The idle analysis: see kprof_core.analysis."},
    {NULL, NULL, 0, NULL},
};

int
kprof_idle_init(PyObject *m)
{
    if (PyModule_AddIntConstant(m, "IDLE_VERSION", KPROF_IDLE_VERSION) < 0)
        return -1;
    return PyModule_AddFunctions(m, idle_functions);
}
