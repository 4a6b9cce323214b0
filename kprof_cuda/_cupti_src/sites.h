/* Launch sites through CUPTI's callback API (sites.c). */
#ifndef KPROF_CUPTI_SITES_H
#define KPROF_CUPTI_SITES_H

#include "reader.h"

typedef cupti_result (*subscribe_t)(void **, void (*)(void *, int, uint32_t, const void *), void *);

/* configure(): cuptiSubscribe (NULL: not found). */
KPROF_INTERNAL void kprof_sites_bind(subscribe_t subscribe);

KPROF_INTERNAL PyObject *kprof_py_subscribe(PyObject *m, PyObject *noargs);
KPROF_INTERNAL PyObject *kprof_py_set_sites(PyObject *m, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_site_scope(PyObject *m, PyObject *arg);
KPROF_INTERNAL PyObject *kprof_py_callback_stats(PyObject *m, PyObject *noargs);

#endif /* KPROF_CUPTI_SITES_H */
