/* Launch sites through CUPTI's callback API (see sites.h).
 *
 * Subscribed (cuptiSubscribe) while kprof's CUPTI path is on; Python enables the callbacks of the
 * calls that enqueue work (cuptiEnableCallback) only while a profile that keeps sites has a
 * scope entered somewhere. At a call's entry, on the launching thread, the callback asks Python
 * for the launch site (kprof.plugin.launch_site: the thread's active profile walks its frames)
 * and keeps it on the call's launch entry, by the correlation id its records carry: the row
 * takes it at the join. The GIL is taken only on a thread with a site scope entered
 * (site_depth, counted by site_scope() on that thread): any other thread, and one that is no
 * Python thread, returns at once. */
#include "reader.h"
#include "sites.h"
#include "decode.h"
#include "join.h"
#include "../_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

static subscribe_t subscribe_fn;
static PyObject *site_fn;            /* kprof.plugin.launch_site, or NULL: sites off */
static PyObject *active_fn;          /* kprof.plugin.active: the thread's active profile */
static PyObject *str_launch_site;
static volatile int sites_on;
static __thread long site_depth;     /* site scopes entered on this thread */
static long long c_callbacks, c_sites, c_site_calls; /* delivered; sites kept; Python calls */

void kprof_sites_bind(subscribe_t subscribe) { subscribe_fn = subscribe; }

static void on_callback(void *userdata, int domain, uint32_t cbid, const void *cbdata) {
    (void)userdata; (void)cbid;
    __atomic_add_fetch(&c_callbacks, 1, __ATOMIC_RELAXED);
    if (!sites_on || site_depth <= 0 || !cbdata || (domain != 1 && domain != 2)) return;
    const uint8_t *cb = cbdata;
    if (*(const uint32_t *)(cb + kprof_off[O_CALLBACK_CALLBACKSITE]) != 0) return;
    uint32_t corr = *(const uint32_t *)(cb + kprof_off[O_CALLBACK_CORRELATIONID]);
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
        pthread_mutex_lock(&kprof_lock);
        launch_t *l = kprof_get_launch(corr);
        if (l) { l->site1 = site + 1; c_sites++; }
        pthread_mutex_unlock(&kprof_lock);
    }
    PyGILState_Release(g);
}

/* subscribe() -> (CUptiResult, subscriber handle as int) */
PyObject *kprof_py_subscribe(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    if (!subscribe_fn) return Py_BuildValue("(iK)", -1, 0ULL);
    void *handle = NULL;
    cupti_result r = subscribe_fn(&handle, on_callback, NULL);
    return Py_BuildValue("(iK)", r, (unsigned long long)(uintptr_t)handle);
}

/* set_sites(launch_site, active) or set_sites(None, None): the site function and the active
 * profile's getter the callback calls (None: sites off). */
PyObject *kprof_py_set_sites(PyObject *m, PyObject *args) {
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
PyObject *kprof_py_site_scope(PyObject *m, PyObject *arg) {
    (void)m;
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred()) return NULL;
    site_depth += d;
    if (site_depth < 0) site_depth = 0;
    return PyLong_FromLong(site_depth);
}

/* callback_stats() -> {callbacks, site_calls, sites}: delivered, Python calls, sites kept. */
PyObject *kprof_py_callback_stats(PyObject *m, PyObject *noargs) {
    (void)m; (void)noargs;
    pthread_mutex_lock(&kprof_lock);
    long long sites = c_sites;
    pthread_mutex_unlock(&kprof_lock);
    return Py_BuildValue("{sLsLsL}", "callbacks", __atomic_load_n(&c_callbacks, __ATOMIC_RELAXED),
                         "site_calls", __atomic_load_n(&c_site_calls, __ATOMIC_RELAXED),
                         "sites", sites);
}
