/* The rows handed to Python (rows.c): joined rows kept in C until take() hands them over. */
#ifndef KPROF_CUPTI_ROWS_H
#define KPROF_CUPTI_ROWS_H

#include "reader.h"
#include "../_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

/* Row columns: R_* of the generated header. */
typedef struct { int64_t v[N_COLS]; } row_t;

/* The rows ready (lock held), and their bound (set_limits()). */
KPROF_INTERNAL extern row_t *kprof_rows;
KPROF_INTERNAL extern size_t kprof_n_rows, kprof_cap_rows, kprof_max_rows;
/* Rows dropped past the bound or for want of memory (for stats()). */
KPROF_INTERNAL extern long long kprof_c_dropped_rows;

/* Doubles the rows' array; -1 without the memory. */
KPROF_INTERNAL int kprof_rows_grow(void);

/* Appends a row (lock held); -1: dropped, and counted. Inline: every joined record ends here. */
static inline int kprof_push_row(const row_t *r) {
    if (kprof_n_rows >= kprof_max_rows) { kprof_c_dropped_rows++; return -1; }
    if (kprof_n_rows == kprof_cap_rows && kprof_rows_grow() < 0) {
        kprof_c_dropped_rows++;
        return -1;
    }
    kprof_rows[kprof_n_rows++] = *r;
    return 0;
}

/* Lock held, after a buffer: ends a wait() where rows are ready. */
KPROF_INTERNAL void kprof_rows_announce(void);

KPROF_INTERNAL PyObject *kprof_py_wait(PyObject *m, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_wake(PyObject *m, PyObject *noargs);
KPROF_INTERNAL PyObject *kprof_py_take(PyObject *m, PyObject *args);

#endif /* KPROF_CUPTI_ROWS_H */
