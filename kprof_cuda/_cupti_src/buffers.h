/* CUPTI's activity callbacks (buffers.c): the buffers lent to CUPTI and taken back full, and
 * the timestamp callback. */
#ifndef KPROF_CUPTI_BUFFERS_H
#define KPROF_CUPTI_BUFFERS_H

#include "reader.h"

typedef void (*request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*complete_fn)(void *, uint32_t, uint8_t *, size_t, size_t);
typedef cupti_result (*cupti_register_t)(request_fn, complete_fn);
typedef cupti_result (*register_ts_t)(uint64_t (*)(void));

/* configure(): cuptiActivityRegisterCallbacks and cuptiActivityRegisterTimestampCallback (NULL:
 * this CUPTI has none). */
KPROF_INTERNAL void kprof_buffers_bind(cupti_register_t register_callbacks,
                                       register_ts_t register_timestamp);

/* Buffers completed, decoded, refused (max_buffers out, refusing safe), decoded with the
 * rows full, and completed that were another tool's (for stats(), under the lock). */
KPROF_INTERNAL extern long long kprof_c_buffers, kprof_c_decoded, kprof_c_refused,
    kprof_c_discarded_buffers, kprof_c_foreign_buffers;

KPROF_INTERNAL PyObject *kprof_py_register(PyObject *m, PyObject *noargs);
KPROF_INTERNAL PyObject *kprof_py_register_timestamp(PyObject *m, PyObject *noargs);
KPROF_INTERNAL PyObject *kprof_py_set_limits(PyObject *m, PyObject *args);

#endif /* KPROF_CUPTI_BUFFERS_H */
