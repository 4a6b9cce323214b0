/* Kernel names, cached per cl_kernel and dropped at clReleaseKernel (kernel_names.c). */
#ifndef KPROF_CLHOOK_KERNEL_NAMES_H
#define KPROF_CLHOOK_KERNEL_NAMES_H

#include "clhook.h"

/* The kernel's name (a new reference), under the GIL; NULL with an exception on failure. */
KPROF_INTERNAL PyObject *kprof_kernel_name(cl_kernel k);

/* How many names released kernels left, to be let go of under the GIL (flush_dead). */
KPROF_INTERNAL extern size_t kprof_names_dead;
KPROF_INTERNAL void kprof_names_flush_dead(void);

/* Under the GIL: lets go of those names, where there are any. Inline, a racy peek: every hooked
 * enqueue asks, and the common case takes no lock; a miss waits for the next. */
static inline void
kprof_names_collect(void)
{
    if (kprof_names_dead)
        kprof_names_flush_dead();
}

/* Under the GIL, once nothing is hooked: the cache emptied. */
KPROF_INTERNAL void kprof_names_clear(void);

/* How many names are cached (for stats()). */
KPROF_INTERNAL Py_ssize_t kprof_names_cached(void);

/* The hooked clReleaseKernel. */
KPROF_INTERNAL cl_int CL_API_CALL kprof_hook_release_kernel(cl_kernel k);

/* The cache's lock: taken around fork() (kprof_names_at_fork) and by _hold_locks. */
KPROF_INTERNAL void kprof_names_lock(void);
KPROF_INTERNAL void kprof_names_unlock(void);
KPROF_INTERNAL int kprof_names_at_fork(void);

#endif /* KPROF_CLHOOK_KERNEL_NAMES_H */
