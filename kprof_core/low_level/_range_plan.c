/* A range plan's items and the backend hooks a compiled range calls through them, a unit of
 * _crecorder: each failure is reported as the Python path reports it (Recorder._hook_failed),
 * so that both paths leave the same rows, warnings and disabled backends. */
#include "_range_plan.h"

static PyObject *str_hook_failed, *str_range_push, *str_range_pop;

PyObject *
kprof_plan_item(PyObject *plan, PyObject *b)
{
    Py_ssize_t n = plan == NULL || plan == Py_None ? 0 : PyTuple_Size(plan);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(plan, i);
        if (PyTuple_GetItem(item, RG_B) == b)
            return item;
    }
    return NULL;
}

int
kprof_plan_hook_failed(PyObject *rec, PyObject *backend, PyObject *hook)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(tb);
        return 0;
    }
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *r = PyObject_CallMethodObjArgs(rec, str_hook_failed, backend, hook, value, NULL);
    Py_XDECREF(type);
    Py_DECREF(value);
    Py_XDECREF(tb);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

int
kprof_plan_push(PyObject *rec, PyObject *item, PyObject *name)
{
    PyObject *push = PyTuple_GetItem(item, RG_PUSH);
    if (push == Py_None)
        return 1;
    PyObject *r = PyObject_CallFunctionObjArgs(push, PyTuple_GetItem(item, RG_B), name, NULL);
    if (r != NULL) {
        Py_DECREF(r);
        return 1;
    }
    return kprof_plan_hook_failed(rec, PyTuple_GetItem(item, RG_B), str_range_push) < 0 ? -1 : 0;
}

int
kprof_plan_pop(PyObject *rec, PyObject *item)
{
    PyObject *pop = PyTuple_GetItem(item, RG_POP);
    if (pop == Py_None)
        return 0;
    PyObject *r = PyObject_CallFunctionObjArgs(pop, PyTuple_GetItem(item, RG_B), NULL);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    return kprof_plan_hook_failed(rec, PyTuple_GetItem(item, RG_B), str_range_pop);
}

int
kprof_range_plan_init(void)
{
    str_hook_failed = PyUnicode_InternFromString("_hook_failed");
    str_range_push = PyUnicode_InternFromString("range_push");
    str_range_pop = PyUnicode_InternFromString("range_pop");
    return str_hook_failed && str_range_push && str_range_pop ? 0 : -1;
}
