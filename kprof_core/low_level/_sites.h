/* Launch sites in C: the twin of kprof_core/recording/sites.py's SiteCatcher.
 *
 * capture() walks out from the calling Python frame to the first frame whose code the
 * skipper (sites.Skipper, called once per code object) calls the user's, and returns the raw
 * site id of (code, f_lasti): an index into sites.KEYS, the process-wide list both catchers
 * append to. Two open-addressing tables keyed by pointer keep the per-launch cost to a few
 * attribute reads (f_back, f_lasti: the limited API has no PyFrame_GetBack) and two probes.
 * Included by _crecorder.c. */

typedef struct {
    void *code;     /* a code object (a strong reference while in the table) */
    long lasti;     /* -1 in the verdict table */
    Py_ssize_t val; /* the verdict (0: the user's, 1: skipped), or the raw site id */
} site_slot;

typedef struct {
    site_slot *slots;
    Py_ssize_t cap, used; /* cap: a power of two, 0 before the first insert */
} site_table;

typedef struct {
    PyObject_HEAD
    PyObject *skip;  /* sites.Skipper: frame -> bool (not the user's) */
    PyObject *keys;  /* sites.KEYS */
    site_table verdicts, ids;
} SiteCatcher;

static PyObject *str_f_back, *str_f_lasti;

static size_t
site_hash(void *code, long lasti)
{
    size_t h = (size_t)code >> 4;
    h ^= (size_t)lasti * (size_t)0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 17);
}

static site_slot *
site_find(site_table *t, void *code, long lasti)
{
    if (t->cap == 0)
        return NULL;
    size_t mask = (size_t)t->cap - 1, i = site_hash(code, lasti) & mask;
    for (;;) {
        site_slot *s = &t->slots[i];
        if (s->code == NULL)
            return NULL;
        if (s->code == code && s->lasti == lasti)
            return s;
        i = (i + 1) & mask;
    }
}

/* Insert (code, lasti) -> val; takes a new reference to code. -1 on memory error. */
static int
site_put(site_table *t, void *code, long lasti, Py_ssize_t val)
{
    if ((t->used + 1) * 2 > t->cap) {
        Py_ssize_t ncap = t->cap ? t->cap * 2 : 64;
        site_slot *ns = PyMem_Calloc((size_t)ncap, sizeof(site_slot));
        if (ns == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t j = 0; j < t->cap; j++) {
            site_slot *s = &t->slots[j];
            if (s->code == NULL)
                continue;
            size_t m = (size_t)ncap - 1, i = site_hash(s->code, s->lasti) & m;
            while (ns[i].code != NULL)
                i = (i + 1) & m;
            ns[i] = *s;
        }
        PyMem_Free(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    size_t mask = (size_t)t->cap - 1, i = site_hash(code, lasti) & mask;
    while (t->slots[i].code != NULL)
        i = (i + 1) & mask;
    Py_INCREF((PyObject *)code);
    t->slots[i].code = code;
    t->slots[i].lasti = lasti;
    t->slots[i].val = val;
    t->used++;
    return 0;
}

static void
site_table_clear(site_table *t)
{
    for (Py_ssize_t j = 0; j < t->cap; j++)
        Py_XDECREF((PyObject *)t->slots[j].code);
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->cap = t->used = 0;
}

static int
site_table_visit(site_table *t, visitproc visit, void *arg)
{
    for (Py_ssize_t j = 0; j < t->cap; j++)
        Py_VISIT((PyObject *)t->slots[j].code);
    return 0;
}

/* The raw site id of the calling thread's first user frame, or -1 (none within 64 frames,
 * or no Python frame at all: a launch from a C thread). -2 with an exception set. */
static Py_ssize_t
site_capture(SiteCatcher *self)
{
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    if (f == NULL)
        return -1;
    Py_INCREF(f);
    for (int depth = 0; depth < 64; depth++) {
        PyCodeObject *code = PyFrame_GetCode(f);
        site_slot *v = site_find(&self->verdicts, code, -1);
        Py_ssize_t foreign;
        if (v != NULL) {
            foreign = v->val;
        } else {
            PyObject *r = PyObject_CallFunctionObjArgs(self->skip, (PyObject *)f, NULL);
            int t = r == NULL ? -1 : PyObject_IsTrue(r);
            Py_XDECREF(r);
            if (t < 0 || site_put(&self->verdicts, code, -1, t) < 0) {
                Py_DECREF(code);
                Py_DECREF(f);
                return -2;
            }
            foreign = t;
        }
        if (!foreign) {
            PyObject *lo = PyObject_GetAttr((PyObject *)f, str_f_lasti);
            Py_DECREF(f);
            long lasti = lo == NULL ? -1 : PyLong_AsLong(lo);
            if (lo == NULL || (lasti == -1 && PyErr_Occurred())) {
                Py_XDECREF(lo);
                Py_DECREF(code);
                return -2;
            }
            site_slot *s = site_find(&self->ids, code, lasti);
            Py_ssize_t id;
            if (s != NULL) {
                id = s->val;
            } else {
                /* A new raw site: appended to KEYS (under the GIL: its index is its id). */
                PyObject *key = Py_BuildValue("(Ol)", (PyObject *)code, lasti);
                id = PyList_Size(self->keys);
                if (key == NULL || PyList_Append(self->keys, key) < 0
                    || site_put(&self->ids, code, lasti, id) < 0) {
                    Py_XDECREF(key);
                    Py_DECREF(lo);
                    Py_DECREF(code);
                    return -2;
                }
                Py_DECREF(key);
            }
            Py_DECREF(lo);
            Py_DECREF(code);
            return id;
        }
        Py_DECREF(code);
        PyObject *back = PyObject_GetAttr((PyObject *)f, str_f_back);
        Py_DECREF(f);
        if (back == NULL)
            return -2;
        if (back == Py_None) {
            Py_DECREF(back);
            return -1;
        }
        f = (PyFrameObject *)back;
    }
    Py_DECREF(f);
    return -1;
}

static PyObject *
sc_capture(SiteCatcher *self, PyObject *unused)
{
    Py_ssize_t id = site_capture(self);
    return id == -2 ? NULL : PyLong_FromSsize_t(id);
}

static int
sc_traverse(SiteCatcher *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->skip);
    Py_VISIT(self->keys);
    if (site_table_visit(&self->verdicts, visit, arg) || site_table_visit(&self->ids, visit, arg))
        return -1;
    return 0;
}

static int
sc_clear(SiteCatcher *self)
{
    Py_CLEAR(self->skip);
    Py_CLEAR(self->keys);
    site_table_clear(&self->verdicts);
    site_table_clear(&self->ids);
    return 0;
}

static void
sc_dealloc(SiteCatcher *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    sc_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef sc_methods[] = {
    {"capture", (PyCFunction)sc_capture, METH_NOARGS,
     "capture() -> the raw site id of the caller's user frame, or -1: see "
     "kprof_core.recording.sites.SiteCatcher."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot sc_slots[] = {
    {Py_tp_dealloc, sc_dealloc},
    {Py_tp_traverse, sc_traverse},
    {Py_tp_clear, sc_clear},
    {Py_tp_methods, sc_methods},
    {Py_tp_doc, "The compiled launch-site catcher (kprof_core.recording.sites)."},
    {0, NULL},
};

static PyType_Spec sc_spec = {
    "kprof_core.low_level._crecorder.SiteCatcher", sizeof(SiteCatcher), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, sc_slots,
};

static PyObject *SiteCatcherType;

static PyObject *
new_site_catcher(PyObject *module, PyObject *args)
{
    PyObject *skip, *keys;
    if (!PyArg_ParseTuple(args, "OO!:site_catcher", &skip, &PyList_Type, &keys))
        return NULL;
    SiteCatcher *self = (SiteCatcher *)PyType_GenericAlloc((PyTypeObject *)SiteCatcherType, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(skip); self->skip = skip;
    Py_INCREF(keys); self->keys = keys;
    return (PyObject *)self;
}

static int
sites_init(void)
{
    str_f_back = PyUnicode_InternFromString("f_back");
    str_f_lasti = PyUnicode_InternFromString("f_lasti");
    SiteCatcherType = PyType_FromSpec(&sc_spec);
    return str_f_back && str_f_lasti && SiteCatcherType ? 0 : -1;
}
