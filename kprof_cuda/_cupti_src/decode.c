/* Decoding (see decode.h): each record of a completed buffer, stepped by CUPTI itself
 * (cuptiActivityGetNextRecord), read at the offsets Python passed in (cupti_abi.layout(), those
 * common to every supported header version) and joined by correlation id (join.h, inline): no
 * NVIDIA header is needed. */
#include "reader.h"
#include "decode.h"
#include "buffers.h"
#include "intern.h"
#include "join.h"
#include "rows.h"
#include "sites.h"
#include "../_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

typedef cupti_result (*next_record_t)(uint8_t *, size_t, void **);
static next_record_t next_record;

/* CUpti_ActivityKind values and kprof's external correlation kind (set by configure). */
enum { K_MEMCPY = 1, K_MEMSET = 2, K_DRIVER = 4, K_RUNTIME = 5, K_KERNEL = 10, K_EXT = 39,
       K_MEMORY2 = 49 };
static uint32_t ext_kind = 5;

size_t kprof_off[N_OFFSETS];

#define MAX_CBID 8192
/* [0] driver, [1] runtime */
static unsigned char work_api[2][MAX_CBID], several_api[2][MAX_CBID];
/* Calls that allocate or free (MEMORY2 records): joined as work, never waited for. */
static unsigned char mem_api[2][MAX_CBID];

long long kprof_c_records, kprof_c_unknown;

#define U32(rec, o) (*(const uint32_t *)((const uint8_t *)(rec) + (o)))
#define I32(rec, o) (*(const int32_t *)((const uint8_t *)(rec) + (o)))
#define U64(rec, o) (*(const uint64_t *)((const uint8_t *)(rec) + (o)))
#define PTR(rec, o) (*(const char *const *)((const uint8_t *)(rec) + (o)))

void kprof_decode(uint8_t *buf, size_t valid) {
    const size_t *off = kprof_off;
    void *rec = NULL;
    int waiting = 0;
    int full = kprof_n_rows >= kprof_max_rows;
    while (next_record(buf, valid, &rec) == 0) {
        kprof_c_records++;
        uint32_t kind = U32(rec, 0);
        raw_t w;
        switch (kind) {
        case K_EXT: {
            if (U32(rec, off[O_EXT_EXTERNALKIND]) != ext_kind) break;
            launch_t *l = kprof_get_launch(U32(rec, off[O_EXT_CORRELATIONID]));
            if (l) { l->scope = U64(rec, off[O_EXT_EXTERNALID]); l->flags |= L_SCOPE; }
            break;
        }
        case K_DRIVER:
        case K_RUNTIME: {
            int rt = kind == K_RUNTIME;
            uint32_t cbid = U32(rec, off[O_API_CBID]), corr = U32(rec, off[O_API_CORRELATIONID]);
            /* A call that failed (returnValue: not CUDA_SUCCESS/cudaSuccess) enqueued nothing. */
            int failed = U32(rec, off[O_API_RETURNVALUE]) != 0;
            if (failed || cbid >= MAX_CBID || (!work_api[rt][cbid] && !mem_api[rt][cbid])) {
                /* A call that enqueues no device work: nothing will come for it. */
                launch_t *l = kprof_find_launch(corr);
                if (l) kprof_drop_launch(l);
                break;
            }
            launch_t *l = kprof_get_launch(corr);
            if (!l) break;
            l->flags |= L_API | (several_api[rt][cbid] ? L_SEVERAL : 0) |
                        (mem_api[rt][cbid] && !work_api[rt][cbid] ? L_MEM : 0);
            l->lb = (int64_t)U64(rec, off[O_API_START]);
            l->le = (int64_t)U64(rec, off[O_API_END]);
            break;
        }
        case K_KERNEL:
        case K_MEMCPY:
        case K_MEMSET: {
            if (full) { kprof_c_dropped_rows++; break; }
            memset(&w, 0, sizeof w);
            int64_t *v = w.r.v;
            if (kind == K_KERNEL) {
                v[R_KIND] = 0;
                v[R_NAME] = kprof_intern_name(PTR(rec, off[O_KERNEL_NAME]));
                v[R_DEVICE] = U32(rec, off[O_KERNEL_DEVICEID]);
                w.ctx = U32(rec, off[O_KERNEL_CONTEXTID]);
                v[R_STREAM] = U32(rec, off[O_KERNEL_STREAMID]);
                v[R_BEGIN] = (int64_t)U64(rec, off[O_KERNEL_START]);
                v[R_END] = (int64_t)U64(rec, off[O_KERNEL_END]);
                v[R_NBYTES] = -1;
                v[R_CORRELATION] = U32(rec, off[O_KERNEL_CORRELATIONID]);
                v[R_GRID_X] = I32(rec, off[O_KERNEL_GRIDX]);
                v[R_GRID_Y] = I32(rec, off[O_KERNEL_GRIDY]);
                v[R_GRID_Z] = I32(rec, off[O_KERNEL_GRIDZ]);
                v[R_BLOCK_X] = I32(rec, off[O_KERNEL_BLOCKX]);
                v[R_BLOCK_Y] = I32(rec, off[O_KERNEL_BLOCKY]);
                v[R_BLOCK_Z] = I32(rec, off[O_KERNEL_BLOCKZ]);
            } else if (kind == K_MEMCPY) {
                uint8_t ck = *((const uint8_t *)rec + off[O_MEMCPY_COPYKIND]);
                v[R_KIND] = 1;
                v[R_NAME] = (ck >= 1 && ck <= 10) ? ck : 11;
                v[R_DEVICE] = U32(rec, off[O_MEMCPY_DEVICEID]);
                w.ctx = U32(rec, off[O_MEMCPY_CONTEXTID]);
                v[R_STREAM] = U32(rec, off[O_MEMCPY_STREAMID]);
                v[R_BEGIN] = (int64_t)U64(rec, off[O_MEMCPY_START]);
                v[R_END] = (int64_t)U64(rec, off[O_MEMCPY_END]);
                v[R_NBYTES] = (int64_t)U64(rec, off[O_MEMCPY_BYTES]);
                v[R_CORRELATION] = U32(rec, off[O_MEMCPY_CORRELATIONID]);
            } else {
                v[R_KIND] = 1;
                v[R_NAME] = 0;
                v[R_DEVICE] = U32(rec, off[O_MEMSET_DEVICEID]);
                w.ctx = U32(rec, off[O_MEMSET_CONTEXTID]);
                v[R_STREAM] = U32(rec, off[O_MEMSET_STREAMID]);
                v[R_BEGIN] = (int64_t)U64(rec, off[O_MEMSET_START]);
                v[R_END] = (int64_t)U64(rec, off[O_MEMSET_END]);
                v[R_NBYTES] = (int64_t)U64(rec, off[O_MEMSET_BYTES]);
                v[R_CORRELATION] = U32(rec, off[O_MEMSET_CORRELATIONID]);
            }
            if (!kprof_resolve(&w, 0, NULL, 0)) { kprof_add_pending(&w); waiting = 1; }
            break;
        }
        case K_MEMORY2: {
            /* An allocation or a free: a row of kind 2 or 3 joined as work by its call's
             * correlation id (begin = end = its time; name = CUPTI's memory kind). */
            uint32_t op = U32(rec, off[O_MEMORY_MEMORYOPERATIONTYPE]);
            if (op != 1 && op != 2) break;
            if (full) { kprof_c_dropped_rows++; break; }
            memset(&w, 0, sizeof w);
            int64_t *v = w.r.v;
            v[R_KIND] = op == 1 ? 2 : 3;
            v[R_NAME] = U32(rec, off[O_MEMORY_MEMORYKIND]);
            v[R_DEVICE] = U32(rec, off[O_MEMORY_DEVICEID]);
            w.ctx = U32(rec, off[O_MEMORY_CONTEXTID]);
            v[R_STREAM] = U32(rec, off[O_MEMORY_STREAMID]);
            v[R_BEGIN] = v[R_END] = (int64_t)U64(rec, off[O_MEMORY_TIMESTAMP]);
            v[R_NBYTES] = (int64_t)U64(rec, off[O_MEMORY_BYTES]);
            v[R_ADDRESS] = (int64_t)U64(rec, off[O_MEMORY_ADDRESS]);
            v[R_CORRELATION] = U32(rec, off[O_MEMORY_CORRELATIONID]);
            if (!kprof_resolve(&w, 0, NULL, 0)) { kprof_add_pending(&w); waiting = 1; }
            break;
        }
        default:
            kprof_c_unknown++; /* a kind kprof does not read: skipped, counted */
        }
    }
    (void)waiting;
    if (kprof_n_pending) kprof_join_retry(0, NULL, 0); /* launches completed by this buffer */
}

/* ---- configure() -------------------------------------------------------------------------- */
static void *as_ptr(PyObject *o) { return o == Py_None ? NULL : PyLong_AsVoidPtr(o); }

static int fill_table(PyObject *seq, unsigned char *table) {
    memset(table, 0, MAX_CBID);
    PyObject *it = PyObject_GetIter(seq);
    if (!it) return -1;
    PyObject *x;
    while ((x = PyIter_Next(it))) {
        long v = PyLong_AsLong(x);
        Py_DECREF(x);
        if (v >= 0 && v < MAX_CBID) table[v] = 1;
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

/* configure(CUPTI's function addresses, offsets, the cbid tables, external kind): the functions
 * that register callbacks go to buffers.c and sites.c. */
PyObject *kprof_py_configure(PyObject *m, PyObject *args) {
    PyObject *fns, *layout, *wd, *wr, *gd, *gr, *md, *mr;
    unsigned int ek;
    if (!PyArg_ParseTuple(args, "OOOOOOOOI:configure", &fns, &layout, &wd, &wr, &gd, &gr, &md,
                          &mr, &ek))
        return NULL;
    PyObject *a = PyTuple_GetItem(fns, 0), *b = PyTuple_GetItem(fns, 1),
             *c = PyTuple_GetItem(fns, 2), *d = PyTuple_GetItem(fns, 3);
    if (!a || !b || !c || !d) return NULL;
    next_record = (next_record_t)as_ptr(a);
    cupti_register_t register_callbacks = (cupti_register_t)as_ptr(b);
    kprof_buffers_bind(register_callbacks, (register_ts_t)as_ptr(c));
    kprof_sites_bind((subscribe_t)as_ptr(d));
    if (PyErr_Occurred()) return NULL;
    if (!next_record || !register_callbacks) {
        PyErr_SetString(PyExc_ValueError, "configure() needs cuptiActivityGetNextRecord and "
                                          "cuptiActivityRegisterCallbacks");
        return NULL;
    }
    if (PyTuple_Size(layout) != N_OFFSETS) {
        PyErr_Format(PyExc_ValueError, "configure() needs %d offsets", (int)N_OFFSETS);
        return NULL;
    }
    for (int i = 0; i < N_OFFSETS; i++) {
        kprof_off[i] = PyLong_AsSize_t(PyTuple_GetItem(layout, i));
        if (PyErr_Occurred()) return NULL;
    }
    if (fill_table(wd, work_api[0]) || fill_table(wr, work_api[1]) ||
        fill_table(gd, several_api[0]) || fill_table(gr, several_api[1]) ||
        fill_table(md, mem_api[0]) || fill_table(mr, mem_api[1]))
        return NULL;
    ext_kind = ek;
    Py_RETURN_NONE;
}
