/* Device memory (memory.c): buffers and SVM allocations, whoever makes them. */
#ifndef KPROF_CLHOOK_MEMORY_H
#define KPROF_CLHOOK_MEMORY_H

#include "clhook.h"
#include "table.h"

/* The entries mem_hook() swaps in. */
KPROF_INTERNAL extern const KprofHookSet kprof_memory_set;

KPROF_INTERNAL PyObject *kprof_py_mem_hook(PyObject *module, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_mem_unhook(PyObject *module, PyObject *addr);
KPROF_INTERNAL PyObject *kprof_py_mem_drain(PyObject *module, PyObject *unused);
KPROF_INTERNAL PyObject *kprof_py_mem_released(PyObject *module, PyObject *unused);
KPROF_INTERNAL PyObject *kprof_py_mem_stats(PyObject *module, PyObject *unused);

/* The lock of the ends queued: taken around fork() (kprof_memory_at_fork) and by
 * _hold_locks. */
KPROF_INTERNAL void kprof_memory_lock(void);
KPROF_INTERNAL void kprof_memory_unlock(void);
KPROF_INTERNAL int kprof_memory_at_fork(void);

#endif /* KPROF_CLHOOK_MEMORY_H */
