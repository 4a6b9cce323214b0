/* Turning the enqueue hooks on and off (install.c): in a dispatch table, or through the
 * interposer `kprof run` preloaded. */
#ifndef KPROF_CLHOOK_INSTALL_H
#define KPROF_CLHOOK_INSTALL_H

#include "clhook.h"

/* Installed on some table or attached to the interposer: the hooked functions record. */
KPROF_INTERNAL extern volatile int kprof_hook_on;

KPROF_INTERNAL PyObject *kprof_py_hook(PyObject *module, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_unhook(PyObject *module, PyObject *addr);
KPROF_INTERNAL PyObject *kprof_py_preloaded(PyObject *module, PyObject *unused);
KPROF_INTERNAL PyObject *kprof_py_attach_preload(PyObject *module, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_detach_preload(PyObject *module, PyObject *unused);

#endif /* KPROF_CLHOOK_INSTALL_H */
