/* The batch reader of event times (reader.c), kprof_opencl/reader.py's C side. */
#ifndef KPROF_CLNATIVE_READER_H
#define KPROF_CLNATIVE_READER_H

#include "clnative.h"

/* Interns the names; -1 with an exception. */
KPROF_INTERNAL int kprof_reader_init(void);

KPROF_INTERNAL PyObject *kprof_py_bind(PyObject *module, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_read(PyObject *module, PyObject *args);

#endif /* KPROF_CLNATIVE_READER_H */
