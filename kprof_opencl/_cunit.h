/* What every C unit of kprof_opencl's extensions shares after Python.h: the marker of names
 * shared between units (hidden: the modules are loaded into processes with OpenCL loaders and
 * ICDs, whose names they must neither clash with nor be reached through the PLT), and
 * Py_XSETREF where the limited-API headers lack it. */
#ifndef KPROF_OPENCL_CUNIT_H
#define KPROF_OPENCL_CUNIT_H

#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32) && !defined(__CYGWIN__)
#define KPROF_INTERNAL __attribute__((visibility("hidden")))
#else
#define KPROF_INTERNAL
#endif

#ifndef Py_XSETREF /* not in every version's limited-API headers */
#define Py_XSETREF(dst, src)                                                                 \
    do {                                                                                      \
        PyObject *_old = (PyObject *)(dst);                                                   \
        (dst) = (src);                                                                        \
        Py_XDECREF(_old);                                                                     \
    } while (0)
#endif

#endif /* KPROF_OPENCL_CUNIT_H */
