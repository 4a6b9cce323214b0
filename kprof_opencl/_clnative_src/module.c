/* kprof_opencl._clnative, the OpenCL plugin's compiled parts on PyOpenCL's side: the
 * kernel-launch wrapper's common case, the batch reader of event times, and kprof.range's
 * hooks. Each is optional: where this module is missing (no compiler, KPROF_PURE_PYTHON=1,
 * free-threaded CPython), the plugin's Python does the same.
 *
 * One concern a unit, each with the header that declares what it shares:
 *   launcher.c       the Launcher: PyOpenCL's enqueue_nd_range_kernel, its common case in C,
 *                    handed to the compiled recorder's C launch
 *   reader.c         the batch reader of status, START and END of many cl_events (bind, read)
 *   range_hooks.c    the Hook: the C twins of the current_queue and record_timestamp hooks
 *   ../_current_queue.c  the thread's current queue, which the launcher sets and the hooks
 *                    read (a unit of _clhook too)
 *   module.c         this: the module's functions
 *
 * Limited API (abi3, CPython >= 3.10); no OpenCL headers needed (../_cltypes.h declares the
 * few types and constants used).
 */
#include "clnative.h"
#include "../_current_queue.h"
#include "launcher.h"
#include "range_hooks.h"
#include "reader.h"

static PyMethodDef methods[] = {
    {"linked", kprof_py_linked, METH_NOARGS,
     "linked() -> whether launchers call the compiled recorder's launch directly"},
    {"bind", kprof_py_bind, METH_VARARGS,
     "bind(clGetEventInfo_address, clGetEventProfilingInfo_address)"},
    {"launcher", kprof_py_launcher, METH_VARARGS,
     "launcher(original, python_wrapper, active, now, current, backend, kind, launch_capsules) "
     "-> Launcher (launch_capsules: kprof.plugin.launch_capsules())"},
    {"range_hook", kprof_py_range_hook, METH_VARARGS,
     "range_hook(current, python_hook, stamp) -> the current_queue (stamp false) or "
     "record_timestamp hook in C, for kprof's compiled range"},
    {"read", kprof_py_read, METH_VARARGS,
     "read(starts, stops) -> (begins, ends) as native int64 bytes, for the longest prefix of "
     "complete, readable events"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_clnative", "kprof's optional compiled OpenCL launch path and reader.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__clnative(void)
{
    if (kprof_reader_init() < 0 || kprof_launcher_init() < 0 || kprof_current_init() < 0
        || kprof_hooks_init() < 0)
        return NULL;
    return PyModule_Create(&moduledef);
}
