/* The first include of every unit of the kprof_core.low_level._crecorder extension
 * (_crecorder.c, _sites.c, _range.c, _idle.c): the same limited API in each, and how the
 * symbols they share are declared. */
#ifndef KPROF_CRECORDER_UNIT_H
#define KPROF_CRECORDER_UNIT_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <stdint.h>

/* What one unit defines for another (the kprof_ names) is hidden: the module exports its init
 * alone, and a call between units is a direct call, as a static one is, not one through the
 * PLT (the launch path calls kprof_site_capture per launch). */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32) && !defined(__CYGWIN__)
#define KPROF_INTERNAL __attribute__((visibility("hidden")))
#else
#define KPROF_INTERNAL
#endif

#ifndef Py_XSETREF  /* not in every version's limited-API headers */
#define Py_XSETREF(op, op2)                     \
    do {                                        \
        PyObject *_py_tmp = (PyObject *)(op);   \
        (op) = (op2);                           \
        Py_XDECREF(_py_tmp);                    \
    } while (0)
#endif

#endif /* KPROF_CRECORDER_UNIT_H */
