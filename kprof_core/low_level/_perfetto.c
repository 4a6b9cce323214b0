/* kprof's compiled Perfetto encoder: one track's TracePackets, as protowire.track_events writes
 * them in Python (that module's docstring says what each item becomes; both give the same
 * bytes, tests/test_perfetto.py compares them).
 *
 * Optional: protowire.encoder() uses it where the compiled parts run and it was built from the
 * current perfetto_fields.py (SIGNATURE); else the Python twin runs. Built against the limited
 * API (abi3, CPython >= 3.10), which has no buffer protocol before 3.11: columns come as bytes.
 * Times are within +-2**59 ns (data/values.py), so no sum below leaves int64; timestamps and
 * ids are written as unsigned 64-bit (two's complement below 0), as Python's `& MASK`.
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Field keys, enums, kprof's iids, column order: generated from perfetto_fields.py. */
#include "_perfetto_fields.h"

#define CHUNK (1 << 20) /* protowire.CHUNK */

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int
reserve(Buf *b, Py_ssize_t extra)
{
    if (b->n + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* The varint and fixed64 encodings, defined once for C (room reserved by the caller). */
static inline void
put_varint(Buf *b, uint64_t v)
{
    while (v > 0x7F) {
        b->p[b->n++] = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    b->p[b->n++] = (char)v;
}

static inline Py_ssize_t
varint_len(uint64_t v)
{
    Py_ssize_t n = 1;
    while (v > 0x7F) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline void
put_fixed64(Buf *b, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        b->p[b->n++] = (char)(v >> (8 * k));
}

static inline void
put_bytes(Buf *b, const char *s, Py_ssize_t n)
{
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
}

/* An annotation {name_iid, value} as a TrackEvent.debug_annotations field. */
static void
put_annotation(Buf *b, uint64_t name_iid, uint64_t value_key, uint64_t value)
{
    Py_ssize_t inner = varint_len(KPF_DEBUGANNOTATION_NAME_IID) + varint_len(name_iid)
                       + varint_len(value_key) + varint_len(value);
    put_varint(b, KPF_TRACKEVENT_DEBUG_ANNOTATIONS);
    put_varint(b, (uint64_t)inner);
    put_varint(b, KPF_DEBUGANNOTATION_NAME_IID);
    put_varint(b, name_iid);
    put_varint(b, value_key);
    put_varint(b, value);
}

/* An unresolved launch's annotation when extras has no reason for it: "unresolved". */
static PyObject *unresolved_default;

typedef struct {
    Buf out, ev;
    char seq[16];
    Py_ssize_t seq_n;
    PyObject *write;
    Py_ssize_t total;
} Writer;

/* One TracePacket {timestamp, trusted_packet_sequence_id, track_event, sequence_flags}. */
static int
put_packet(Writer *w, uint64_t ts)
{
    const Py_ssize_t tail = varint_len(KPF_TRACEPACKET_SEQUENCE_FLAGS)
                            + varint_len(KPF_SEQ_NEEDS_INCREMENTAL_STATE);
    Py_ssize_t body = varint_len(KPF_TRACEPACKET_TIMESTAMP) + varint_len(ts) + w->seq_n
                      + varint_len(KPF_TRACEPACKET_TRACK_EVENT) + varint_len((uint64_t)w->ev.n)
                      + w->ev.n + tail;
    if (reserve(&w->out, body + 16) < 0)
        return -1;
    Buf *o = &w->out;
    put_varint(o, KPF_TRACE_PACKET);
    put_varint(o, (uint64_t)body);
    put_varint(o, KPF_TRACEPACKET_TIMESTAMP);
    put_varint(o, ts);
    put_bytes(o, w->seq, w->seq_n);
    put_varint(o, KPF_TRACEPACKET_TRACK_EVENT);
    put_varint(o, (uint64_t)w->ev.n);
    put_bytes(o, w->ev.p, w->ev.n);
    put_varint(o, KPF_TRACEPACKET_SEQUENCE_FLAGS);
    put_varint(o, KPF_SEQ_NEEDS_INCREMENTAL_STATE);
    return 0;
}

static int
flush(Writer *w)
{
    if (w->out.n == 0)
        return 0;
    PyObject *chunk = PyBytes_FromStringAndSize(w->out.p, w->out.n);
    if (chunk == NULL)
        return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(w->write, chunk, NULL);
    Py_DECREF(chunk);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    w->total += w->out.n;
    w->out.n = 0;
    return 0;
}

/* Columns: a tuple of `want` bytes objects of `rows` int64 each. */
static int
columns(PyObject *tuple, Py_ssize_t want, const int64_t **cols, Py_ssize_t *rows, const char *what)
{
    if (!PyTuple_Check(tuple) || PyTuple_Size(tuple) != want) {
        PyErr_Format(PyExc_ValueError,
                     "track_events: the %s columns are not a tuple of %zd bytes objects", what,
                     want);
        return -1;
    }
    for (Py_ssize_t k = 0; k < want; k++) {
        PyObject *c = PyTuple_GetItem(tuple, k);
        if (c == NULL || !PyBytes_Check(c)) {
            PyErr_Format(PyExc_TypeError, "track_events: %s column %zd is not bytes", what, k);
            return -1;
        }
        Py_ssize_t n = PyBytes_Size(c) / 8;
        if (k == 0)
            *rows = n;
        else if (n != *rows) {
            PyErr_Format(PyExc_ValueError, "track_events: the %s columns differ in length", what);
            return -1;
        }
        cols[k] = (const int64_t *)PyBytes_AsString(c);
    }
    return 0;
}

/* extras[code] appended to the event, when extras has it; else `fallback` (may be NULL). */
static int
put_extra(Buf *ev, PyObject *extras, int64_t code, PyObject *fallback)
{
    PyObject *x = NULL;
    if (PyDict_Size(extras) > 0) {
        PyObject *k = PyLong_FromLongLong(code);
        if (k == NULL)
            return -1;
        x = PyDict_GetItemWithError(extras, k); /* borrowed */
        Py_DECREF(k);
        if (x == NULL && PyErr_Occurred())
            return -1;
    }
    if (x == NULL)
        x = fallback;
    if (x == NULL)
        return 0;
    if (!PyBytes_Check(x)) {
        PyErr_SetString(PyExc_TypeError, "track_events: extras values must be bytes");
        return -1;
    }
    Py_ssize_t n = PyBytes_Size(x);
    if (reserve(ev, n) < 0)
        return -1;
    put_bytes(ev, PyBytes_AsString(x), n);
    return 0;
}

static PyObject *
track_events(PyObject *self, PyObject *args)
{
    PyObject *write, *items, *table, *host, *extras;
    long long track_uuid, shift, flow_base, sequence;
    if (!PyArg_ParseTuple(args, "OSOOO!LLLL", &write, &items, &table, &host, &PyDict_Type,
                          &extras, &track_uuid, &shift, &flow_base, &sequence))
        return NULL;
    const int64_t *t[KPF_TABLE_LEN], *h[KPF_HOST_LEN];
    Py_ssize_t nt = 0, nh = 0;
    if (columns(table, KPF_TABLE_LEN, t, &nt, "table") < 0
        || columns(host, KPF_HOST_LEN, h, &nh, "host") < 0)
        return NULL;
    const int64_t *codes = (const int64_t *)PyBytes_AsString(items);
    Py_ssize_t n = PyBytes_Size(items) / 8;

    Writer w = {{NULL, 0, 0}, {NULL, 0, 0}, {0}, 0, write, 0};
    int64_t *stack = NULL;
    Py_ssize_t depth = 0, stack_cap = 0;
    PyObject *result = NULL;
    {
        Buf s = {w.seq, 0, sizeof w.seq};
        put_varint(&s, KPF_TRACEPACKET_TRUSTED_PACKET_SEQUENCE_ID);
        put_varint(&s, (uint64_t)sequence);
        w.seq_n = s.n;
    }
    if (reserve(&w.out, CHUNK + 4096) < 0 || reserve(&w.ev, 256) < 0)
        goto done;
    const uint64_t uuid = (uint64_t)track_uuid;

    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t code = codes[j], i = code >> 2, s, e;
        int tag = (int)(code & 3);
        int host_item = tag == KPF_ITEM_HOST_RANGE || tag == KPF_ITEM_MARK;
        if (i < 0 || i >= (host_item ? nh : nt)) {
            PyErr_Format(PyExc_IndexError, "track_events: item %lld has no row", (long long)code);
            goto done;
        }
        /* Fields in number order (canonical protobuf), as protowire.track_events. */
        Buf *ev = &w.ev;
        ev->n = 0;
        if (reserve(ev, 128) < 0)
            goto done;
        int64_t name, site = -1, flow_key = 0, callstack = -1;
        if (tag == KPF_ITEM_LAUNCH) {
            s = t[KPF_T_LAUNCH_START][i];
            int64_t d = t[KPF_T_LAUNCH_END][i] - s;
            e = s + (d > 0 ? d : 0);
            name = t[KPF_T_NAME][i];
            site = t[KPF_T_SITE][i];
            callstack = t[KPF_T_CALLSTACK][i];
            put_varint(ev, KPF_TRACKEVENT_CATEGORY_IIDS);
            put_varint(ev, KPF_CAT_LAUNCH);
            int unres = (t[KPF_T_FLAGS][i] & KPF_FLAG_UNRESOLVED) != 0;
            if (put_extra(ev, extras, code, unres ? unresolved_default : NULL) < 0)
                goto done;
            if (!unres)
                flow_key = KPF_TRACKEVENT_FLOW_IDS;
        }
        else if (tag == KPF_ITEM_DEVICE) {
            int64_t k = t[KPF_T_KIND][i], d = t[KPF_T_DURATION][i], nb = t[KPF_T_NBYTES][i];
            int64_t flags = t[KPF_T_FLAGS][i];
            if (k < 0 || k > KPF_KIND_RANGE) {
                PyErr_Format(PyExc_ValueError, "track_events: row %lld has kind %lld",
                             (long long)i, (long long)k);
                goto done;
            }
            s = t[KPF_T_START][i];
            e = s + (d > 0 ? d : 0);
            name = t[KPF_T_NAME][i];
            put_varint(ev, KPF_TRACKEVENT_CATEGORY_IIDS);
            put_varint(ev, (uint64_t)(KPF_CAT_KIND0 + k));
            if (nb >= 0)
                put_annotation(ev, KPF_ANN_BYTES, KPF_DEBUGANNOTATION_INT_VALUE, (uint64_t)nb);
            if (flags & KPF_FLAG_HOST_TIMED)
                put_annotation(ev, KPF_ANN_HOST_TIMED, KPF_DEBUGANNOTATION_BOOL_VALUE, 1);
            else if (flags & KPF_FLAG_APPROXIMATE)
                put_annotation(ev, KPF_ANN_APPROXIMATE, KPF_DEBUGANNOTATION_BOOL_VALUE, 1);
            if (put_extra(ev, extras, code, NULL) < 0)
                goto done;
            if (k != KPF_KIND_RANGE)
                flow_key = KPF_TRACKEVENT_TERMINATING_FLOW_IDS;
        }
        else {
            s = h[KPF_H_START][i];
            int64_t d = h[KPF_H_END][i] - s;
            e = s + (d > 0 ? d : 0);
            name = h[KPF_H_NAME][i];
            site = h[KPF_H_SITE][i];
            callstack = h[KPF_H_CALLSTACK][i];
            put_varint(ev, KPF_TRACKEVENT_CATEGORY_IIDS);
            put_varint(ev, tag == KPF_ITEM_MARK ? KPF_CAT_MARKER : KPF_CAT_KIND0 + KPF_KIND_RANGE);
        }
        if (reserve(ev, 96) < 0)
            goto done;
        put_varint(ev, KPF_TRACKEVENT_TYPE);
        put_varint(ev, tag == KPF_ITEM_MARK ? KPF_TYPE_INSTANT : KPF_TYPE_SLICE_BEGIN);
        put_varint(ev, KPF_TRACKEVENT_NAME_IID);
        put_varint(ev, (uint64_t)(name + 1));
        put_varint(ev, KPF_TRACKEVENT_TRACK_UUID);
        put_varint(ev, uuid);
        if (site >= 0) {
            put_varint(ev, KPF_TRACKEVENT_SOURCE_LOCATION_IID);
            put_varint(ev, (uint64_t)(site + 1));
        }
        if (flow_key) {
            put_varint(ev, (uint64_t)flow_key);
            put_fixed64(ev, (uint64_t)(flow_base + i + 1));
        }
        if (callstack >= 0) {
            put_varint(ev, KPF_TRACKEVENT_CALLSTACK_IID);
            put_varint(ev, (uint64_t)(callstack + 1));
        }
        /* Close what ended by now (an instant is drawn inside what is open at its time), as
         * packets of their own: {type END, track_uuid}. The event above waits in w.ev. */
        int strict = tag == KPF_ITEM_MARK;
        while (depth && (strict ? stack[depth - 1] < s : stack[depth - 1] <= s)) {
            Buf keep = w.ev;
            Buf end = {NULL, 0, 0};
            char tmp[32];
            end.p = tmp;
            end.cap = sizeof tmp;
            put_varint(&end, KPF_TRACKEVENT_TYPE);
            put_varint(&end, KPF_TYPE_SLICE_END);
            put_varint(&end, KPF_TRACKEVENT_TRACK_UUID);
            put_varint(&end, uuid);
            w.ev = end;
            int r = put_packet(&w, (uint64_t)(stack[--depth] + shift));
            w.ev = keep;
            if (r < 0)
                goto done;
        }
        if (put_packet(&w, (uint64_t)(s + shift)) < 0)
            goto done;
        if (tag != KPF_ITEM_MARK) {
            if (depth == stack_cap) {
                Py_ssize_t cap = stack_cap ? stack_cap * 2 : 64;
                int64_t *p = PyMem_Realloc(stack, (size_t)cap * sizeof *stack);
                if (p == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                stack = p;
                stack_cap = cap;
            }
            stack[depth++] = e;
            if (w.out.n >= CHUNK && flush(&w) < 0)
                goto done;
        }
    }
    {
        char tmp[32];
        Buf end = {tmp, 0, sizeof tmp};
        put_varint(&end, KPF_TRACKEVENT_TYPE);
        put_varint(&end, KPF_TYPE_SLICE_END);
        put_varint(&end, KPF_TRACKEVENT_TRACK_UUID);
        put_varint(&end, uuid);
        Buf keep = w.ev;
        w.ev = end;
        while (depth) {
            if (put_packet(&w, (uint64_t)(stack[--depth] + shift)) < 0) {
                w.ev = keep;
                goto done;
            }
        }
        w.ev = keep;
    }
    if (flush(&w) < 0)
        goto done;
    result = PyLong_FromSsize_t(w.total);
done:
    PyMem_Free(w.out.p);
    PyMem_Free(w.ev.p);
    PyMem_Free(stack);
    return result;
}

static PyMethodDef methods[] = {
    {"track_events", track_events, METH_VARARGS,
     "One track's TracePackets: see kprof_core.low_level.protowire.track_events."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_perfetto", "kprof's optional compiled Perfetto encoder.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__perfetto(void)
{
    /* debug_annotations {name_iid: UNRESOLVED, string_value: "unresolved"} */
    static const char word[] = "unresolved";
    char tmp[64];
    Buf b = {tmp, 0, sizeof tmp};
    Py_ssize_t inner = varint_len(KPF_DEBUGANNOTATION_NAME_IID) + varint_len(KPF_ANN_UNRESOLVED)
                       + varint_len(KPF_DEBUGANNOTATION_STRING_VALUE) + 1 + (Py_ssize_t)strlen(word);
    put_varint(&b, KPF_TRACKEVENT_DEBUG_ANNOTATIONS);
    put_varint(&b, (uint64_t)inner);
    put_varint(&b, KPF_DEBUGANNOTATION_NAME_IID);
    put_varint(&b, KPF_ANN_UNRESOLVED);
    put_varint(&b, KPF_DEBUGANNOTATION_STRING_VALUE);
    put_varint(&b, (uint64_t)strlen(word));
    put_bytes(&b, word, (Py_ssize_t)strlen(word));
    unresolved_default = PyBytes_FromStringAndSize(tmp, b.n);
    if (unresolved_default == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    /* protowire.encoder() compares it with perfetto_fields.SIGNATURE. */
    if (PyModule_AddStringConstant(m, "SIGNATURE", KPF_SIGNATURE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
