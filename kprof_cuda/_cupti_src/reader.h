/* What every unit of the compiled CUPTI reader (kprof_cuda._cupti) includes first: Python's
 * limited API, pthreads, how shared names are declared, and the reader's one lock.
 *
 * The units share state through the headers beside this one, each declaring what its unit
 * lends to the others. Shared names start with kprof_ and are hidden: the module is loaded into
 * processes with libcupti and the CUDA libraries, and a name of its own must neither clash with
 * theirs nor be reached through the PLT (CUPTI's callbacks call across units). What the decode
 * loop does per record is static inline in these headers: it compiles as one loop.
 */
#ifndef KPROF_CUPTI_READER_H
#define KPROF_CUPTI_READER_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32) && !defined(__CYGWIN__)
#define KPROF_INTERNAL __attribute__((visibility("hidden")))
#else
#define KPROF_INTERNAL
#endif

/* CUptiResult: 0 is CUPTI_SUCCESS. */
typedef int cupti_result;

/* The reader's one lock (module.c owns it, and its fork handlers): every unit's state that
 * CUPTI's threads and Python's share is under it. Its holders never wait for the GIL. */
KPROF_INTERNAL extern pthread_mutex_t kprof_lock;

#endif /* KPROF_CUPTI_READER_H */
