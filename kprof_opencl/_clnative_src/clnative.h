/* What every unit of kprof_opencl._clnative needs first: Python's limited API, the OpenCL
 * declarations, the visibility marker of shared names, and an attribute lookup that two units
 * make on their common path.
 *
 * The units share state through the headers beside this one, each declaring what its unit
 * lends to the others. Shared names start with kprof_ and are hidden: the module is loaded into
 * processes with OpenCL loaders and ICDs, and a name of its own must neither clash with theirs
 * nor be reached through the PLT.
 */
#ifndef KPROF_CLNATIVE_H
#define KPROF_CLNATIVE_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "../_cltypes.h"

#include "../_cunit.h"

/* An attribute, or NULL without an exception when it is missing (the launcher's and the range
 * hooks' cached `_kprof_name`/`_kprof_profiles`). Inline: a launch with a new kernel or queue
 * asks it. */
static inline PyObject *
kprof_attr_or_null(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return v;
}

#endif /* KPROF_CLNATIVE_H */
