/* kprof.range's timestamps recorded raw (ranges.c): the record_timestamp hook's C twin. */
#ifndef KPROF_CLHOOK_RANGES_H
#define KPROF_CLHOOK_RANGES_H

#include "clhook.h"

/* raw_stamp() -> the KprofRawStamp capsule (the hook function's `kprof_raw_stamp`). */
KPROF_INTERNAL PyObject *kprof_py_raw_stamp(PyObject *module, PyObject *unused);

/* stamp_forget(): drops the last queue stamped (a capture's end: the program's queue must not
 * outlive the profile because kprof kept it). */
KPROF_INTERNAL PyObject *kprof_py_stamp_forget(PyObject *module, PyObject *unused);

/* Interns the names; -1 with an exception. */
KPROF_INTERNAL int kprof_ranges_init(void);

#endif /* KPROF_CLHOOK_RANGES_H */
