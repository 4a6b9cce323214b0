/* Kernel names, cached per cl_kernel: asking the driver at every launch costs two calls.
 *
 * Open addressing; the GIL guards reads and inserts, names_lock also guards against
 * clReleaseKernel, which may run on a thread without the GIL: it moves the name to `dead`,
 * decref'd later under the GIL. A released handle may be reused by a new kernel, hence the
 * hooked clReleaseKernel.
 */
#include "kernel_names.h"
#include "table.h"

#if HOOK_SUPPORTED
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

typedef struct {
    cl_kernel key;
    PyObject *name;
} NameSlot;
static NameSlot *names;
static size_t names_cap, names_len;
static PyObject **dead;
size_t kprof_names_dead;
static size_t dead_cap;
#define TOMB ((cl_kernel)1)
/* The last kernel asked and its name (a reference of its own), read without the lock: most
 * launches repeat the kernel. clReleaseKernel clears `last_kernel` before the handle can be
 * reused; the name is let go of under the GIL, at the next ask. */
static cl_kernel last_kernel;
static PyObject *last_name;
#if HOOK_SUPPORTED
#define LOAD_ACQUIRE(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define STORE_RELEASE(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)
#else
#define LOAD_ACQUIRE(p) (*(p))
#define STORE_RELEASE(p, v) (*(p) = (v))
#endif

static PyObject *name_slow(cl_kernel k);

void
kprof_names_lock(void)
{
#if HOOK_SUPPORTED
    pthread_mutex_lock(&names_lock);
#endif
}

void
kprof_names_unlock(void)
{
#if HOOK_SUPPORTED
    pthread_mutex_unlock(&names_lock);
#endif
}

/* A fork while another thread holds the lock would leave the child's copy locked for good (its
 * holder does not exist there): the forking thread takes it before fork() and gives it back on
 * both sides. Holders never wait for the GIL while holding it, so the forking thread, which
 * holds the GIL, waits at most for a holder's few instructions. Registered once: handlers
 * registered twice would take the lock twice. */
int
kprof_names_at_fork(void)
{
#if HOOK_SUPPORTED
    static int registered;
    if (!registered) {
        if (pthread_atfork(kprof_names_lock, kprof_names_unlock, kprof_names_unlock) != 0)
            return -1;
        registered = 1;
    }
#endif
    return 0;
}

static size_t
hash_ptr(void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static NameSlot *
name_slot(cl_kernel k, int insert)
{
    if (names_cap == 0)
        return NULL;
    size_t mask = names_cap - 1, i = hash_ptr(k) & mask;
    NameSlot *tomb = NULL;
    for (size_t n = 0; n < names_cap; n++, i = (i + 1) & mask) {
        NameSlot *s = &names[i];
        if (s->key == k)
            return s;
        if (s->key == TOMB) {
            if (tomb == NULL)
                tomb = s;
            continue;
        }
        if (s->key == NULL)
            return insert ? (tomb ? tomb : s) : NULL;
    }
    return insert ? tomb : NULL;
}

static int
names_grow(void)
{
    size_t cap = names_cap ? names_cap * 2 : 64;
    NameSlot *fresh = (NameSlot *)calloc(cap, sizeof(NameSlot));
    if (fresh == NULL)
        return -1;
    NameSlot *old = names;
    size_t old_cap = names_cap;
    names = fresh;
    names_cap = cap;
    names_len = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key != NULL && old[i].key != TOMB) {
            NameSlot *s = name_slot(old[i].key, 1);
            *s = old[i];
            names_len++;
        }
    free(old);
    return 0;
}

static void
names_bury(PyObject *name)
{
    if (kprof_names_dead == dead_cap) {
        size_t cap = dead_cap ? dead_cap * 2 : 16;
        PyObject **d = (PyObject **)realloc(dead, cap * sizeof(PyObject *));
        if (d == NULL)
            return; /* leaks one str rather than touching Python without the GIL */
        dead = d;
        dead_cap = cap;
    }
    dead[kprof_names_dead++] = name;
}

void
kprof_names_flush_dead(void)
{
    kprof_names_lock();
    size_t n = kprof_names_dead;
    PyObject **d = dead;
    dead = NULL;
    kprof_names_dead = dead_cap = 0;
    kprof_names_unlock();
    for (size_t i = 0; i < n; i++)
        Py_DECREF(d[i]);
    free(d);
}

PyObject *
kprof_kernel_name(cl_kernel k)
{
    PyObject *name = NULL;
    if (k != NULL && LOAD_ACQUIRE(&last_kernel) == k) {
        Py_INCREF(last_name);
        return last_name;
    }
    name = name_slow(k);
    if (name != NULL && k != NULL) {
        Py_INCREF(name);
        Py_XSETREF(last_name, name);
        STORE_RELEASE(&last_kernel, k);
    }
    return name;
}

static PyObject *
name_slow(cl_kernel k)
{
    PyObject *name = NULL;
    kprof_names_lock();
    NameSlot *s = name_slot(k, 0);
    if (s != NULL) {
        name = s->name;
        Py_INCREF(name);
    }
    kprof_names_unlock();
    if (name != NULL)
        return name;
    cl_api_clGetKernelInfo get = (cl_api_clGetKernelInfo)kprof_original(k, SLOT_GET_KERNEL_INFO);
    char buf[256];
    char *text = buf;
    size_t size = 0;
    if (get(k, CL_KERNEL_FUNCTION_NAME, 0, NULL, &size) != CL_SUCCESS || size == 0) {
        name = PyUnicode_FromString("[kernel]");
    }
    else {
        if (size > sizeof buf)
            text = (char *)malloc(size);
        if (text == NULL)
            return PyErr_NoMemory();
        if (get(k, CL_KERNEL_FUNCTION_NAME, size, text, NULL) != CL_SUCCESS)
            name = PyUnicode_FromString("[kernel]");
        else
            name = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strnlen(text, size), "replace");
        if (text != buf)
            free(text);
    }
    if (name == NULL)
        return NULL;
    kprof_names_lock();
    if ((names_len + 1) * 2 > names_cap && names_grow() < 0) {
        kprof_names_unlock();
        return name; /* uncached: asked again next time */
    }
    s = name_slot(k, 1);
    if (s != NULL && s->key != k) {
        if (s->key == NULL)
            names_len++;
        s->key = k;
        s->name = name;
        Py_INCREF(name);
    }
    kprof_names_unlock();
    return name;
}

void
kprof_names_clear(void)
{
    STORE_RELEASE(&last_kernel, NULL);
    Py_CLEAR(last_name);
    kprof_names_flush_dead();
    kprof_names_lock();
    NameSlot *old = names;
    size_t cap = names_cap;
    names = NULL;
    names_cap = names_len = 0;
    kprof_names_unlock();
    for (size_t i = 0; i < cap; i++)
        if (old[i].key != NULL && old[i].key != TOMB)
            Py_DECREF(old[i].name);
    free(old);
}

Py_ssize_t
kprof_names_cached(void)
{
    Py_ssize_t live = 0;
    for (size_t i = 0; i < names_cap; i++)
        live += names[i].key != NULL && names[i].key != TOMB;
    return live;
}

cl_int CL_API_CALL
kprof_hook_release_kernel(cl_kernel k)
{
    cl_api_clReleaseKernel f = (cl_api_clReleaseKernel)kprof_original(k, SLOT_RELEASE_KERNEL);
#if HOOK_SUPPORTED
    kprof_names_lock();
    cl_kernel expected = k; /* the cached name is for the released handle no more */
    __atomic_compare_exchange_n(&last_kernel, &expected, NULL, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    NameSlot *s = name_slot(k, 0);
    if (s != NULL) {
        names_bury(s->name);
        s->key = TOMB; /* still counted in names_len: the load that makes the table grow */
        s->name = NULL;
    }
    kprof_names_unlock();
#endif
    return f(k);
}
