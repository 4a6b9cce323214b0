/* What every unit of the dispatch-table hook (kprof_opencl._clhook) needs first: Python's
 * limited API, the OpenCL declarations, the platform switch and the host clock.
 *
 * The units share state through the headers beside this one, each declaring what its unit
 * lends to the others. Shared names start with kprof_ and are hidden: the module is loaded into
 * processes with OpenCL loaders and ICDs, and a name of its own must neither clash with theirs
 * nor be reached through the PLT (the enqueue path crosses units).
 */
#ifndef KPROF_CLHOOK_H
#define KPROF_CLHOOK_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../_cltypes.h"

#if defined(_WIN32)
#define HOOK_SUPPORTED 0
#else
#define HOOK_SUPPORTED 1
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#endif

#include "../_cunit.h"

/* time.perf_counter_ns's clock on Linux and the BSDs (CPython's _PyTime_GetPerfCounter);
 * inline: every hooked enqueue reads it twice. */
static inline int64_t
kprof_now_ns(void)
{
#if HOOK_SUPPORTED
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#else
    return 0;
#endif
}

#endif /* KPROF_CLHOOK_H */
