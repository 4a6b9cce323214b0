/* Swapping a dispatch table's entries: one set of functions for the enqueue and the memory
 * hooks. */
#include "table.h"

KprofTable kprof_tables[KPROF_MAX_TABLES];
int kprof_n_tables;

void *
kprof_address_of(PyObject *arg)
{
    void *p = PyLong_AsVoidPtr(arg);
    if (p == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a NULL address");
    return p;
}

PyObject *
kprof_py_table_address(PyObject *module, PyObject *arg)
{
    void *obj = kprof_address_of(arg);
    if (obj == NULL)
        return NULL;
    return PyLong_FromVoidPtr(kprof_table_of(obj));
}

/* The table at `t`, added to the tables on first sight; NULL (an exception set) when full. */
static KprofTable *
table_for(void **t)
{
    KprofTable *h = kprof_find_table(t);
    if (h != NULL)
        return h;
    if (kprof_n_tables == KPROF_MAX_TABLES) {
        PyErr_SetString(PyExc_RuntimeError, "too many OpenCL dispatch tables");
        return NULL;
    }
    h = &kprof_tables[kprof_n_tables];
    memset(h, 0, sizeof *h);
    h->table = t;
    kprof_n_tables++;
    return h;
}

/* Saves the ICD's entry of each of `hooks` that `version` has, before any entry changes (a
 * thread entering a hooked function must find its original); returns their names, a new list,
 * or NULL with an exception set. */
static PyObject *
save_originals(void **t, KprofTable *h, const KprofHook *hooks, int n, int version)
{
    PyObject *done = PyList_New(0);
    if (done == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        const KprofHook *k = &hooks[i];
        if (k->since > version || t[k->slot] == NULL)
            continue;
        if (t[k->slot] != k->fn) /* never save ourselves as the original */
            h->orig[k->slot] = t[k->slot];
        PyObject *s = PyUnicode_FromString(k->name);
        if (s == NULL || PyList_Append(done, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(done);
            return NULL;
        }
        Py_DECREF(s);
    }
    return done;
}

/* Points each saved entry of `hooks` at its hook. Each store is one aligned pointer: atomic on
 * the platforms kprof supports, so a concurrent caller calls either the ICD or the hook, never
 * a torn value. */
static void
swap_in(void **t, const KprofTable *h, const KprofHook *hooks, int n, int version)
{
    for (int i = 0; i < n; i++) {
        const KprofHook *k = &hooks[i];
        if (h->orig[k->slot] != NULL && k->since <= version)
            __atomic_store_n(&t[k->slot], k->fn, __ATOMIC_SEQ_CST);
    }
}

/* Puts each entry of `hooks` that still holds its hook back to the original; returns the names
 * of those someone else replaced meanwhile (left as they are), a new list, or NULL. */
static PyObject *
swap_out(void **t, const KprofTable *h, const KprofHook *hooks, int n)
{
    PyObject *conflicts = PyList_New(0);
    if (conflicts == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        const KprofHook *k = &hooks[i];
        if (h->orig[k->slot] == NULL)
            continue;
        void *expected = k->fn;
        if (!__atomic_compare_exchange_n(&t[k->slot], &expected, h->orig[k->slot], 0,
                                         __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            PyObject *s = PyUnicode_FromString(k->name);
            if (s != NULL) {
                PyList_Append(conflicts, s);
                Py_DECREF(s);
            }
        }
    }
    return conflicts;
}

PyObject *
kprof_table_hook(PyObject *addr, int version, const KprofHookSet *set, int (*ready)(void *),
                 void *arg)
{
    void **t = (void **)kprof_address_of(addr);
    if (t == NULL)
        return NULL;
    KprofTable *h = table_for(t);
    if (h == NULL)
        return NULL;
    if (h->in[set->which]) {
        PyErr_SetString(PyExc_RuntimeError, set->in_already);
        return NULL;
    }
    if (set->needs_slot >= 0 && (version < set->needs_since || t[set->needs_slot] == NULL)) {
        PyErr_SetString(PyExc_RuntimeError, set->needs_why);
        return NULL;
    }
    PyObject *done = save_originals(t, h, set->hooks, set->n, version);
    if (done == NULL)
        return NULL;
    if (ready != NULL && ready(arg) < 0) {
        Py_DECREF(done);
        return NULL;
    }
    swap_in(t, h, set->hooks, set->n, version);
    h->in[set->which] = 1;
    h->version = version;
    return done;
}

PyObject *
kprof_table_unhook(PyObject *addr, const KprofHookSet *set)
{
    void **t = (void **)kprof_address_of(addr);
    if (t == NULL)
        return NULL;
    KprofTable *h = kprof_find_table(t);
    if (h == NULL || !h->in[set->which]) {
        PyErr_SetString(PyExc_RuntimeError, set->not_in);
        return NULL;
    }
    PyObject *conflicts = swap_out(t, h, set->hooks, set->n);
    if (conflicts == NULL)
        return NULL;
    h->in[set->which] = 0;
    return conflicts;
}

int
kprof_tables_any(int which)
{
    int any = 0;
    for (int i = 0; i < kprof_n_tables; i++)
        any |= kprof_tables[i].in[which];
    return any;
}
