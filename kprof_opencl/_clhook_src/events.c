/* Reading the commands' events: the token a recorded command carries, and the driver's
 * callbacks where a queue has no profiling. */
#include "events.h"
#include "table.h"

/* -- the token: one reference to a cl_event ------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cl_event event;
} Event;

static PyObject *EventType;
static PyObject *py_info; /* info(handle, param): an Event's other get_info values */
static long long n_events; /* live tokens, for the tests */

static void
ev_dealloc(Event *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (self->event != NULL)
        ((cl_api_clReleaseEvent)kprof_original(self->event, SLOT_RELEASE_EVENT))(self->event);
    n_events--;
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* A token whose event moved out (kprof_event_raw) has none left to read. */
static int
ev_handed_over(Event *self)
{
    if (self->event != NULL)
        return 0;
    PyErr_SetString(PyExc_ValueError, "this kprof Event handed its cl_event over");
    return 1;
}

static PyObject *
ev_int_ptr(Event *self, void *closure)
{
    return ev_handed_over(self) ? NULL : PyLong_FromVoidPtr(self->event);
}

static PyObject *
ev_profiling_info(Event *self, PyObject *param)
{
    if (ev_handed_over(self))
        return NULL;
    long p = PyLong_AsLong(param);
    if (p == -1 && PyErr_Occurred())
        return NULL;
    cl_ulong v = 0;
    cl_int err = ((cl_api_clGetEventProfilingInfo)kprof_original(
        self->event, SLOT_GET_EVENT_PROFILING_INFO))(self->event, (cl_uint)p, sizeof v, &v, NULL);
    if (err != CL_SUCCESS)
        return PyErr_Format(PyExc_RuntimeError,
                            "clGetEventProfilingInfo failed: %d (the command is not complete, "
                            "or its queue does not profile)",
                            (int)err);
    return PyLong_FromUnsignedLongLong(v);
}

/* get_info: the execution status here; anything else through PyOpenCL (`info`). */
static PyObject *
ev_info(Event *self, PyObject *param)
{
    if (ev_handed_over(self))
        return NULL;
    long p = PyLong_AsLong(param);
    if (p == -1 && PyErr_Occurred())
        return NULL;
    if (p == CL_EVENT_COMMAND_EXECUTION_STATUS) {
        cl_int status = 0;
        cl_int err = ((cl_api_clGetEventInfo)kprof_original(self->event, SLOT_GET_EVENT_INFO))(
            self->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
        if (err != CL_SUCCESS)
            return PyErr_Format(PyExc_RuntimeError, "clGetEventInfo failed: %d", (int)err);
        return PyLong_FromLong(status);
    }
    PyObject *h = PyLong_FromVoidPtr(self->event);
    if (h == NULL)
        return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(py_info, h, param, NULL);
    Py_DECREF(h);
    return r;
}

static PyGetSetDef ev_getset[] = {
    {"int_ptr", (getter)ev_int_ptr, NULL, "the cl_event, as an int (as PyOpenCL's)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef ev_methods[] = {
    {"get_profiling_info", (PyCFunction)ev_profiling_info, METH_O,
     "a CL_PROFILING_COMMAND_* value, in ns"},
    {"get_info", (PyCFunction)ev_info, METH_O, "a CL_EVENT_* value"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot ev_slots[] = {
    {Py_tp_dealloc, ev_dealloc},
    {Py_tp_getset, ev_getset},
    {Py_tp_methods, ev_methods},
    {Py_tp_doc, "A cl_event the OpenCL hook saw (kprof holds one reference until it is dropped)."},
    {0, NULL},
};

static PyType_Spec ev_spec = {
    "kprof_opencl._clhook.Event", sizeof(Event), 0, Py_TPFLAGS_DEFAULT, ev_slots,
};

PyObject *
kprof_event_type(void)
{
    return EventType;
}

void
kprof_events_bind(PyObject *info)
{
    Py_INCREF(info);
    Py_XSETREF(py_info, info);
}

PyObject *
kprof_event_token(cl_event ev, int own)
{
    Event *e = PyObject_New(Event, (PyTypeObject *)EventType);
    if (e == NULL) {
        if (own)
            ((cl_api_clReleaseEvent)kprof_original(ev, SLOT_RELEASE_EVENT))(ev);
        return NULL;
    }
    if (!own)
        ((cl_api_clRetainEvent)kprof_original(ev, SLOT_RETAIN_EVENT))(ev);
    e->event = ev;
    n_events++;
    return (PyObject *)e;
}

/* -- raw events: a recorded command's cl_event kept by the recorder's C batch --------------
 * One reference each, as an Event token's, counted with them: nothing is made per launch. */

static long long n_raw; /* references the recorder's batches hold */

void
kprof_event_raw_taken(void)
{
    n_raw++;
}

static int
raw_read(void *start, void *stop, int64_t *begin, int64_t *end)
{
    cl_event s = (cl_event)start, e = (cl_event)stop;
    cl_int status = 1;
    if (((cl_api_clGetEventInfo)kprof_original(e, SLOT_GET_EVENT_INFO))(
            e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL)
        != CL_SUCCESS)
        return KPROF_RAW_FAILED;
    if (status != CL_COMPLETE)
        return status < 0 ? KPROF_RAW_FAILED : KPROF_RAW_NOT_DONE;
    cl_api_clGetEventProfilingInfo info
        = (cl_api_clGetEventProfilingInfo)kprof_original(e, SLOT_GET_EVENT_PROFILING_INFO);
    cl_ulong t0 = 0, t1 = 0;
    if (info(s, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) != CL_SUCCESS
        || info(e, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) != CL_SUCCESS)
        return KPROF_RAW_FAILED;
    *begin = (int64_t)t0;
    *end = (int64_t)t1;
    return KPROF_RAW_DONE;
}

static void
raw_release(void *start, void *stop)
{
    cl_event s = (cl_event)start, e = (cl_event)stop;
    if (s != NULL) {
        ((cl_api_clReleaseEvent)kprof_original(s, SLOT_RELEASE_EVENT))(s);
        n_raw--;
    }
    if (e != NULL && e != s) {
        ((cl_api_clReleaseEvent)kprof_original(e, SLOT_RELEASE_EVENT))(e);
        n_raw--;
    }
}

static PyObject *
raw_token(void *token)
{
    Event *e = PyObject_New(Event, (PyTypeObject *)EventType);
    if (e == NULL)
        return NULL; /* the reference stays the caller's */
    e->event = (cl_event)token;
    n_events++;
    n_raw--;
    return (PyObject *)e;
}

const KprofRawOps kprof_event_ops = {raw_read, raw_release, raw_token};

void *
kprof_event_raw(PyObject *token)
{
    if (Py_TYPE(token) != (PyTypeObject *)EventType || ((Event *)token)->event == NULL)
        return NULL;
    Event *e = (Event *)token;
    cl_event ev = e->event;
    /* The caller's reference the only one: the event's moves out (a retain and a release are
     * a lock each in the ICD, which contends with its worker at every range's exit). */
    if (Py_REFCNT(token) == 1)
        e->event = NULL;
    else
        ((cl_api_clRetainEvent)kprof_original(ev, SLOT_RETAIN_EVENT))(ev);
    n_raw++;
    return ev;
}

long long
kprof_events_live(void)
{
    return n_events + n_raw;
}

/* -- stamp(event): when a command without profiling ran, from the driver's callbacks --------
 * A queue created without CL_QUEUE_PROFILING_ENABLE has no device times, but the driver calls
 * back when each command becomes CL_RUNNING and CL_COMPLETE (clSetEventCallback, OpenCL 1.1):
 * kprof_opencl/observed.py stamps both on the host clock. The data outlives the Python object
 * until both callbacks ran (the spec calls each exactly once, with an error status if the
 * command failed). */

typedef struct {
    int refs;       /* the Python object and each callback still to come */
    int64_t begin;  /* when CL_RUNNING was reached, or 0 */
    int64_t armed;  /* when both callbacks were registered: a CL_RUNNING call before this came
                     * at registration (the command was running already): no start time */
    int64_t end;    /* when CL_COMPLETE (or an error) was reached, or 0 */
    int status;     /* CL_COMPLETE (0) or a negative error */
    int done;
} StampData;

static void
stamp_unref(StampData *d)
{
    if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(d);
}

static void CL_CALLBACK
on_running(cl_event ev, cl_int status, void *user)
{
    StampData *d = (StampData *)user;
    __atomic_store_n(&d->begin, kprof_now_ns(), __ATOMIC_RELEASE);
    stamp_unref(d);
}

static void CL_CALLBACK
on_complete(cl_event ev, cl_int status, void *user)
{
    StampData *d = (StampData *)user;
    d->end = kprof_now_ns();
    d->status = status;
    __atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
    stamp_unref(d);
}

typedef struct {
    PyObject_HEAD
    StampData *data;
} Stamp;

static PyObject *StampType;

static void
st_dealloc(Stamp *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (self->data != NULL)
        stamp_unref(self->data);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* read() -> None until the command completed, then (status, begin, end): begin is 0 when the
 * driver's CL_RUNNING call does not say when the command began (it was running or done before
 * the callbacks were registered, or the driver calls back late). */
static PyObject *
st_read(Stamp *self, PyObject *unused)
{
    StampData *d = self->data;
    if (!__atomic_load_n(&d->done, __ATOMIC_ACQUIRE))
        Py_RETURN_NONE;
    int64_t begin = __atomic_load_n(&d->begin, __ATOMIC_ACQUIRE);
    int64_t armed = __atomic_load_n(&d->armed, __ATOMIC_ACQUIRE);
    if (begin > d->end || begin <= armed)
        begin = 0;
    return Py_BuildValue("iLL", d->status, (long long)begin, (long long)d->end);
}

static PyMethodDef st_methods[] = {
    {"read", (PyCFunction)st_read, METH_NOARGS,
     "None until complete, then (status, begin_ns, end_ns) on perf_counter_ns"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot st_slots[] = {
    {Py_tp_dealloc, st_dealloc},
    {Py_tp_methods, st_methods},
    {Py_tp_doc, "When one OpenCL command ran, as the driver's callbacks saw it."},
    {0, NULL},
};

static PyType_Spec st_spec = {
    "kprof_opencl._clhook.Stamp", sizeof(Stamp), 0, Py_TPFLAGS_DEFAULT, st_slots,
};

PyObject *
kprof_py_stamp(PyObject *module, PyObject *arg)
{
    cl_event ev = (cl_event)kprof_address_of(arg);
    if (ev == NULL)
        return NULL;
    StampData *d = (StampData *)calloc(1, sizeof(StampData));
    if (d == NULL)
        return PyErr_NoMemory();
    cl_api_clSetEventCallback set =
        (cl_api_clSetEventCallback)kprof_original(ev, SLOT_SET_EVENT_CALLBACK);
    d->refs = 3;
    d->armed = INT64_MAX; /* until both are registered, a CL_RUNNING call tells nothing */
    if (set(ev, CL_RUNNING, on_running, d) != CL_SUCCESS)
        d->refs--; /* no start: observed.py falls back to the launch and the queue */
    if (set(ev, CL_COMPLETE, on_complete, d) != CL_SUCCESS) {
        /* Without the completion nothing can be stamped; a CL_RUNNING callback may still come
         * and must find the data alive: it is let go of through the count. */
        stamp_unref(d);
        stamp_unref(d);
        Py_RETURN_NONE;
    }
    __atomic_store_n(&d->armed, kprof_now_ns(), __ATOMIC_RELEASE);
    Stamp *self = PyObject_New(Stamp, (PyTypeObject *)StampType);
    if (self == NULL) {
        stamp_unref(d);
        return NULL;
    }
    self->data = d;
    return (PyObject *)self;
}

int
kprof_events_init(void)
{
    EventType = PyType_FromSpec(&ev_spec);
    if (EventType == NULL)
        return -1;
    StampType = PyType_FromSpec(&st_spec);
    return StampType == NULL ? -1 : 0;
}
