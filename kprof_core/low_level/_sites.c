/* Launch sites in C: the twin of kprof_core/recording/sites.py's SiteCatcher.
 *
 * capture() walks out from the calling Python frame to the first frame whose code the
 * skipper (sites.Skipper, called once per code object) calls the user's, and returns the raw
 * site id of (code, f_lasti): an index into sites.KEYS, the process-wide list both catchers
 * append to. Two open-addressing tables keyed by pointer keep the per-launch cost to a few
 * attribute reads (f_back, f_lasti: the limited API has no PyFrame_GetBack) and two probes.
 *
 * With a depth (profile(stacks=N)), capture() goes on from the user's frame outwards, up to N
 * frames, each a raw site id as above, and interns the chain of ids in a third table: the
 * raw id it returns is the chain's (a sites.StackKey in KEYS, made once per distinct chain).
 * The walk keeps the frame objects of its chain (not the launching frame's, nor generators')
 * until the next walk or forget() at the profile's end: the next walk stops at the first of
 * them it meets with the same lasti, as its callers cannot have changed (stack_capture). */

#include "_crecorder_unit.h"
#include <string.h>

#include "_sites.h"

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
    Py_ssize_t *ids; /* the chain, innermost first (NULL: an empty slot) */
    Py_ssize_t n, val;
    size_t hash;
} stack_slot;

typedef struct {
    stack_slot *slots;
    Py_ssize_t cap, used;
} stack_table;

#define SITES_MAX_DEPTH 256

/* A frame of the previous capture's chain: the frame object (a strong reference; NULL where
 * not kept: the launching frame, and generators', whose callers can change), its lasti and
 * raw site id. */
typedef struct {
    PyObject *frame;
    long lasti;
    Py_ssize_t id;
} chain_frame;

struct SiteCatcher {
    PyObject_HEAD
    PyObject *skip;  /* sites.Skipper: frame -> bool (not the user's) */
    PyObject *keys;  /* sites.KEYS */
    PyObject *stack_type; /* sites.StackKey */
    int depth;       /* frames of a stack; 0: the site alone */
    site_table verdicts, ids;
    stack_table stacks;
    /* The previous chain: a walk stops at a frame it holds (same object, same lasti): that
     * frame is still running, so its callers are the ones recorded then. */
    site_table gens;      /* code -> 1: a generator's or coroutine's (never an anchor) */
    chain_frame *last;    /* SITES_MAX_DEPTH entries, allocated on the first stack */
    Py_ssize_t last_n;
    int last_whole;       /* the previous chain reached the outermost frame */
};

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

static size_t
stack_hash(const Py_ssize_t *ids, Py_ssize_t n)
{
    size_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ (size_t)ids[i]) * (size_t)1099511628211ULL;
    return h ^ (h >> 29);
}

static void
stack_table_clear(stack_table *t)
{
    for (Py_ssize_t j = 0; j < t->cap; j++)
        PyMem_Free(t->slots[j].ids);
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->cap = t->used = 0;
}

/* The raw id of the chain ids[0..n-1], interned: a new StackKey appended to KEYS once per
 * distinct chain. -2 with an exception set. */
static Py_ssize_t
stack_intern(SiteCatcher *self, const Py_ssize_t *ids, Py_ssize_t n)
{
    stack_table *t = &self->stacks;
    size_t h = stack_hash(ids, n);
    if (t->cap) {
        size_t mask = (size_t)t->cap - 1, i = h & mask;
        for (;;) {
            stack_slot *s = &t->slots[i];
            if (s->ids == NULL)
                break;
            if (s->hash == h && s->n == n && memcmp(s->ids, ids, (size_t)n * sizeof(*ids)) == 0)
                return s->val;
            i = (i + 1) & mask;
        }
    }
    if ((t->used + 1) * 2 > t->cap) {
        Py_ssize_t ncap = t->cap ? t->cap * 2 : 64;
        stack_slot *ns = PyMem_Calloc((size_t)ncap, sizeof(stack_slot));
        if (ns == NULL) {
            PyErr_NoMemory();
            return -2;
        }
        for (Py_ssize_t j = 0; j < t->cap; j++) {
            stack_slot *s = &t->slots[j];
            if (s->ids == NULL)
                continue;
            size_t m = (size_t)ncap - 1, i = s->hash & m;
            while (ns[i].ids != NULL)
                i = (i + 1) & m;
            ns[i] = *s;
        }
        PyMem_Free(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    Py_ssize_t *copy = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*ids));
    PyObject *chain = PyTuple_New(n), *key = NULL;
    if (copy == NULL || chain == NULL) {
        PyMem_Free(copy);
        Py_XDECREF(chain);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -2;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromSsize_t(ids[i]);
        if (v == NULL) {
            PyMem_Free(copy);
            Py_DECREF(chain);
            return -2;
        }
        PyTuple_SetItem(chain, i, v);
    }
    key = PyObject_CallFunctionObjArgs(self->stack_type, chain, NULL);
    Py_DECREF(chain);
    Py_ssize_t id = PyList_Size(self->keys);
    if (key == NULL || PyList_Append(self->keys, key) < 0) {
        Py_XDECREF(key);
        PyMem_Free(copy);
        return -2;
    }
    Py_DECREF(key);
    memcpy(copy, ids, (size_t)n * sizeof(*ids));
    size_t mask = (size_t)t->cap - 1, i = h & mask;
    while (t->slots[i].ids != NULL)
        i = (i + 1) & mask;
    t->slots[i].ids = copy;
    t->slots[i].n = n;
    t->slots[i].val = id;
    t->slots[i].hash = h;
    t->used++;
    return id;
}

/* f's f_lasti into *lasti; -1 with an exception set. */
static int
frame_lasti(PyFrameObject *f, long *lasti)
{
    PyObject *lo = PyObject_GetAttr((PyObject *)f, str_f_lasti);
    *lasti = lo == NULL ? -1 : PyLong_AsLong(lo);
    Py_XDECREF(lo);
    return lo == NULL || (*lasti == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The raw site id of (code, lasti): known, or appended to KEYS. -2 with an exception. */
static Py_ssize_t
site_id_at(SiteCatcher *self, PyCodeObject *code, long lasti)
{
    site_slot *s = site_find(&self->ids, code, lasti);
    if (s != NULL)
        return s->val;
    /* A new raw site: appended to KEYS (under the GIL: its index is its id). */
    PyObject *key = Py_BuildValue("(Ol)", (PyObject *)code, lasti);
    Py_ssize_t id = PyList_Size(self->keys);
    if (key == NULL || PyList_Append(self->keys, key) < 0
        || site_put(&self->ids, code, lasti, id) < 0) {
        Py_XDECREF(key);
        return -2;
    }
    Py_DECREF(key);
    return id;
}

static Py_ssize_t
site_id(SiteCatcher *self, PyFrameObject *f, PyCodeObject *code)
{
    long lasti;
    if (frame_lasti(f, &lasti) < 0)
        return -2;
    return site_id_at(self, code, lasti);
}

/* 1 where code is a generator's, a coroutine's or an async generator's (resumed from any
 * caller: its frame is no anchor), 0 if not, -1 with an exception set. */
static int
is_resumable(SiteCatcher *self, PyCodeObject *code)
{
    site_slot *g = site_find(&self->gens, code, -1);
    if (g != NULL)
        return (int)g->val;
    PyObject *fl = PyObject_GetAttrString((PyObject *)code, "co_flags");
    long flags = fl == NULL ? -1 : PyLong_AsLong(fl);
    Py_XDECREF(fl);
    if (flags == -1 && PyErr_Occurred())
        return -1;
    /* CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR */
    int r = (flags & (0x20 | 0x80 | 0x100 | 0x200)) != 0;
    return site_put(&self->gens, code, -1, r) < 0 ? -1 : r;
}

static void
chain_clear(SiteCatcher *self)
{
    for (Py_ssize_t i = 0; i < self->last_n; i++)
        Py_CLEAR(self->last[i].frame);
    self->last_n = 0;
}

/* From the user's frame f (its code, code; both references owned and released here)
 * outwards, up to depth frames: the raw id of the chain. -2 with an exception.
 *
 * A frame that the previous chain holds at position k >= 1, with the same lasti, is running
 * still (a frame object is one call; generators' are never held), so its callers have not
 * changed: the rest of the chain is the previous one's from k. A launch loop thus walks one
 * or two frames, not 32. */
static Py_ssize_t
stack_capture(SiteCatcher *self, PyFrameObject *f, PyCodeObject *code)
{
    chain_frame now[SITES_MAX_DEPTH];
    Py_ssize_t n = 0, depth = self->depth;
    int whole = 0;
    if (self->last == NULL) {
        self->last = PyMem_Calloc(SITES_MAX_DEPTH, sizeof(chain_frame));
        if (self->last == NULL) {
            Py_DECREF(code);
            Py_DECREF(f);
            PyErr_NoMemory();
            return -2;
        }
    }
    for (;;) {
        long lasti;
        if (frame_lasti(f, &lasti) < 0)
            goto fail;
        if (n >= 1) {
            Py_ssize_t k = -1, ln = self->last_n;
            if (n < ln && self->last[n].frame == (PyObject *)f && self->last[n].lasti == lasti)
                k = n; /* the usual case: the same depth as before */
            else
                for (Py_ssize_t i = 1; i < ln; i++)
                    if (self->last[i].frame == (PyObject *)f && self->last[i].lasti == lasti) {
                        k = i;
                        break;
                    }
            if (k >= 0 && (self->last_whole || n + (ln - k) >= depth)) {
                Py_ssize_t m = ln - k < depth - n ? ln - k : depth - n;
                for (Py_ssize_t i = 0; i < m; i++) {
                    now[n + i] = self->last[k + i];
                    Py_XINCREF(now[n + i].frame);
                }
                n += m;
                whole = self->last_whole && m == ln - k;
                Py_DECREF(code);
                Py_DECREF(f);
                goto done;
            }
        }
        Py_ssize_t id = site_id_at(self, code, lasti);
        int resumable = n == 0 ? 1 : is_resumable(self, code);
        if (id == -2 || resumable < 0)
            goto fail;
        Py_DECREF(code);
        code = NULL;
        now[n].id = id;
        now[n].lasti = lasti;
        now[n].frame = NULL;
        if (!resumable) { /* kept: an anchor for the next walk */
            Py_INCREF(f);
            now[n].frame = (PyObject *)f;
        }
        n++;
        if (n >= depth)
            break;
        PyObject *back = PyObject_GetAttr((PyObject *)f, str_f_back);
        Py_DECREF(f);
        f = NULL;
        if (back == NULL)
            goto fail_chain;
        if (back == Py_None) {
            Py_DECREF(back);
            whole = 1;
            goto done;
        }
        f = (PyFrameObject *)back;
        code = PyFrame_GetCode(f);
    }
    Py_DECREF(f);
done:;
    Py_ssize_t ids[SITES_MAX_DEPTH];
    for (Py_ssize_t i = 0; i < n; i++)
        ids[i] = now[i].id;
    Py_ssize_t sid = stack_intern(self, ids, n);
    chain_clear(self);
    memcpy(self->last, now, (size_t)n * sizeof(chain_frame));
    self->last_n = n;
    self->last_whole = whole;
    return sid;
fail:
    Py_XDECREF(code);
    Py_XDECREF(f);
fail_chain:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(now[i].frame);
    return -2;
}

/* The raw site id of the calling thread's first user frame, or -1 (none within 64 frames,
 * or no Python frame at all: a launch from a C thread). -2 with an exception set. */
Py_ssize_t
kprof_site_capture(SiteCatcher *self)
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
            if (self->depth > 0)
                return stack_capture(self, f, code);
            Py_ssize_t id = site_id(self, f, code);
            Py_DECREF(f);
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
    Py_ssize_t id = kprof_site_capture(self);
    return id == -2 ? NULL : PyLong_FromSsize_t(id);
}

static int
sc_traverse(SiteCatcher *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->skip);
    Py_VISIT(self->keys);
    Py_VISIT(self->stack_type);
    if (site_table_visit(&self->verdicts, visit, arg) || site_table_visit(&self->ids, visit, arg)
        || site_table_visit(&self->gens, visit, arg))
        return -1;
    for (Py_ssize_t i = 0; i < self->last_n; i++)
        Py_VISIT(self->last[i].frame);
    return 0;
}

static int
sc_clear(SiteCatcher *self)
{
    Py_CLEAR(self->skip);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->stack_type);
    site_table_clear(&self->verdicts);
    site_table_clear(&self->ids);
    stack_table_clear(&self->stacks);
    site_table_clear(&self->gens);
    if (self->last != NULL)
        chain_clear(self);
    PyMem_Free(self->last);
    self->last = NULL;
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

static PyObject *
sc_forget(SiteCatcher *self, PyObject *unused)
{
    if (self->last != NULL)
        chain_clear(self);
    Py_RETURN_NONE;
}

static PyMethodDef sc_methods[] = {
    {"forget", (PyCFunction)sc_forget, METH_NOARGS,
     "forget(): let go of the frames the last stack's walk kept (the profile ended)."},
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

PyObject *kprof_SiteCatcherType;

static PyObject *
new_site_catcher(PyObject *module, PyObject *args)
{
    PyObject *skip, *keys, *stack_type = Py_None;
    int depth = 0;
    if (!PyArg_ParseTuple(args, "OO!|iO:site_catcher", &skip, &PyList_Type, &keys, &depth,
                          &stack_type))
        return NULL;
    if (depth < 0 || depth > SITES_MAX_DEPTH || (depth > 0 && !PyCallable_Check(stack_type))) {
        PyErr_Format(PyExc_ValueError,
                     "site_catcher: depth must be 0 to %d, with a callable stack type",
                     SITES_MAX_DEPTH);
        return NULL;
    }
    SiteCatcher *self =
        (SiteCatcher *)PyType_GenericAlloc((PyTypeObject *)kprof_SiteCatcherType, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(skip); self->skip = skip;
    Py_INCREF(keys); self->keys = keys;
    Py_INCREF(stack_type); self->stack_type = stack_type;
    self->depth = depth;
    return (PyObject *)self;
}

static PyMethodDef sites_functions[] = {
    {"site_catcher", new_site_catcher, METH_VARARGS,
     "site_catcher(skip, keys, depth=0, stack_type=None) -> SiteCatcher: see "
     "kprof_core.recording.sites."},
    {NULL, NULL, 0, NULL},
};

int
kprof_sites_init(PyObject *m)
{
    str_f_back = PyUnicode_InternFromString("f_back");
    str_f_lasti = PyUnicode_InternFromString("f_lasti");
    kprof_SiteCatcherType = PyType_FromSpec(&sc_spec);
    if (!str_f_back || !str_f_lasti || !kprof_SiteCatcherType)
        return -1;
    return PyModule_AddFunctions(m, sites_functions);
}
