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
#include <limits.h>
#include <stdint.h>

/* What one unit defines for another (the kprof_ names) is hidden: the module exports its init
 * alone, and a call between units is a direct call, as a static one is, not one through the
 * PLT (the launch path calls kprof_site_capture per launch). */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32) && !defined(__CYGWIN__)
#define KPROF_INTERNAL __attribute__((visibility("hidden")))
#else
#define KPROF_INTERNAL
#endif

/* An int as int64: 1, or 0 (the exception cleared) where it is not one or does not fit.
 * Inline: the harvest converts several per record. PyLong_AsLong where long is 64 bits:
 * CPython 3.11's PyLong_AsLongLong goes through _PyLong_AsByteArray for every int of more than
 * one digit (the host times: two per launch). */
static inline int
kprof_as_i64(PyObject *o, int64_t *out)
{
#if LONG_MAX == INT64_MAX
    long v = PyLong_AsLong(o);
#else
    long long v = PyLong_AsLongLong(o);
#endif
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

#ifndef Py_XSETREF  /* not in every version's limited-API headers */
#define Py_XSETREF(op, op2)                     \
    do {                                        \
        PyObject *_py_tmp = (PyObject *)(op);   \
        (op) = (op2);                           \
        Py_XDECREF(_py_tmp);                    \
    } while (0)
#endif

#endif /* KPROF_CRECORDER_UNIT_H */
