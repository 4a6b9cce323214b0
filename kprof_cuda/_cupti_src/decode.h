/* Decoding (decode.c): the records' format as configure() gives it, and the walk of a completed
 * buffer. */
#ifndef KPROF_CUPTI_DECODE_H
#define KPROF_CUPTI_DECODE_H

#include "reader.h"
#include "../_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

/* Record fields' offsets, in cupti_abi.layout()'s order (O_* of the generated header); sites.c
 * reads the callback data's too. */
KPROF_INTERNAL extern size_t kprof_off[N_OFFSETS];

/* Records walked, and those of kinds kprof does not read (for stats(), under the lock). */
KPROF_INTERNAL extern long long kprof_c_records, kprof_c_unknown;

/* Walks a completed buffer's `valid` bytes (lock held): its records joined, rows kept. */
KPROF_INTERNAL void kprof_decode(uint8_t *buf, size_t valid);

KPROF_INTERNAL PyObject *kprof_py_configure(PyObject *m, PyObject *args);

#endif /* KPROF_CUPTI_DECODE_H */
