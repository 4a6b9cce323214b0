/* The batch reader of status, START and END of many cl_events (the harvest, off the launch
 * path).
 *
 * kprof_opencl/reader.py binds it to clGetEventInfo and clGetEventProfilingInfo of the OpenCL
 * library PyOpenCL has loaded (their addresses, found through ctypes), and hands it PyOpenCL
 * Event objects: each one's cl_event is its `int_ptr`. Through PyOpenCL, each of the three
 * values costs a Python call; here they cost a C call each. Where this module is missing
 * (no compiler, KPROF_PURE_PYTHON=1, free-threaded CPython), reader.py reads them through
 * PyOpenCL's own methods instead, with the same result.
 */
#include "reader.h"

static cl_api_clGetEventInfo get_event_info = NULL;
static cl_api_clGetEventProfilingInfo get_profiling_info = NULL;
static PyObject *str_int_ptr;

int
kprof_reader_init(void)
{
    str_int_ptr = PyUnicode_InternFromString("int_ptr");
    return str_int_ptr == NULL ? -1 : 0;
}

PyObject *
kprof_py_bind(PyObject *module, PyObject *args)
{
    PyObject *info_addr, *prof_addr;
    if (!PyArg_ParseTuple(args, "OO:bind", &info_addr, &prof_addr))
        return NULL;
    void *info = PyLong_AsVoidPtr(info_addr);
    if (info == NULL && PyErr_Occurred())
        return NULL;
    void *prof = PyLong_AsVoidPtr(prof_addr);
    if (prof == NULL && PyErr_Occurred())
        return NULL;
    if (info == NULL || prof == NULL) {
        PyErr_SetString(PyExc_ValueError, "bind() needs two function addresses");
        return NULL;
    }
    get_event_info = (cl_api_clGetEventInfo)info;
    get_profiling_info = (cl_api_clGetEventProfilingInfo)prof;
    Py_RETURN_NONE;
}

/* The cl_event of a PyOpenCL Event; NULL with an exception set on failure. */
static cl_event
event_of(PyObject *event)
{
    PyObject *ptr = PyObject_GetAttr(event, str_int_ptr);
    if (ptr == NULL)
        return NULL;
    void *ev = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (ev == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "an event without a cl_event");
    return (cl_event)ev;
}

/* read(starts, stops) -> (begins, ends): native int64 bytes for the longest prefix of
 * complete, readable events (see the device_times_batch hook). A failed command (status < 0)
 * or a failed query ends the prefix: the harvest then asks about it alone and reports it. */
PyObject *
kprof_py_read(PyObject *module, PyObject *args)
{
    PyObject *starts, *stops, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!:read", &PyTuple_Type, &starts, &PyTuple_Type, &stops))
        return NULL;
    if (get_event_info == NULL || get_profiling_info == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(stops);
    if (PyTuple_Size(starts) != n) {
        PyErr_SetString(PyExc_ValueError, "starts and stops differ in length");
        return NULL;
    }
    int64_t *out = (int64_t *)PyMem_Malloc(sizeof(int64_t) * 2 * (size_t)(n ? n : 1));
    if (out == NULL)
        return PyErr_NoMemory();
    int64_t *begins = out, *ends = out + n;
    Py_ssize_t k = 0;
    for (; k < n; k++) {
        PyObject *stop_obj = PyTuple_GetItem(stops, k);
        PyObject *start_obj = PyTuple_GetItem(starts, k);
        cl_event stop = event_of(stop_obj);
        if (stop == NULL)
            goto fail;
        cl_int status = 1;
        if (get_event_info(stop, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                           NULL) != CL_SUCCESS || status != CL_COMPLETE)
            break;
        cl_event start = stop;
        if (start_obj != stop_obj) {
            start = event_of(start_obj);
            if (start == NULL)
                goto fail;
        }
        cl_ulong t0 = 0, t1 = 0;
        if (get_profiling_info(start, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL)
                != CL_SUCCESS
            || get_profiling_info(stop, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL)
                != CL_SUCCESS)
            break;
        begins[k] = (int64_t)t0;
        ends[k] = (int64_t)t1;
    }
    {
        PyObject *b = PyBytes_FromStringAndSize((const char *)begins, k * 8);
        PyObject *e = PyBytes_FromStringAndSize((const char *)ends, k * 8);
        if (b != NULL && e != NULL)
            result = PyTuple_Pack(2, b, e);
        Py_XDECREF(b);
        Py_XDECREF(e);
    }
fail:
    PyMem_Free(out);
    return result;
}
