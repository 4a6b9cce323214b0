/* kprof.range's hooks in C (range_hooks.c): current_queue and record_timestamp, for kprof's
 * compiled range. */
#ifndef KPROF_CLNATIVE_RANGE_HOOKS_H
#define KPROF_CLNATIVE_RANGE_HOOKS_H

#include "clnative.h"

/* Interns the names and makes the Hook type; -1 with an exception. */
KPROF_INTERNAL int kprof_hooks_init(void);

KPROF_INTERNAL PyObject *kprof_py_range_hook(PyObject *module, PyObject *args);

#endif /* KPROF_CLNATIVE_RANGE_HOOKS_H */
