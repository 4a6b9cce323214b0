/* Capturing enqueues (enqueue.c): the hooked enqueue functions and what they record into. */
#ifndef KPROF_CLHOOK_ENQUEUE_H
#define KPROF_CLHOOK_ENQUEUE_H

#include "clhook.h"
#include "table.h"

/* The entries hook() swaps in: the enqueues timed, queue creation and clReleaseKernel. */
KPROF_INTERNAL extern const KprofHookSet kprof_enqueue_set;

/* Interns the names and makes the Quiet type; -1 with an exception. */
KPROF_INTERNAL int kprof_enqueue_init(void);

/* Whether launches are handed to the compiled recorder raw (bind()'s raw_launch). */
KPROF_INTERNAL int kprof_enqueue_raw(void);

/* Whether bind() gave the recording its callables. */
KPROF_INTERNAL int kprof_enqueue_bound(void);

KPROF_INTERNAL PyObject *kprof_py_bind(PyObject *module, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_quiet(PyObject *module, PyObject *fn);
KPROF_INTERNAL PyObject *kprof_py_stats(PyObject *module, PyObject *unused);

#endif /* KPROF_CLHOOK_ENQUEUE_H */
