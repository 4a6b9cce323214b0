/* The join (join.c): a launch's entry by correlation id (its scope from the external
 * correlation record, its launch times from the API record, its site from the callback), the
 * work records waiting for theirs, and a joined record's row. Lock held throughout. The steps
 * each record takes are inline: the decode loop (decode.c) takes them per record. */
#ifndef KPROF_CUPTI_JOIN_H
#define KPROF_CUPTI_JOIN_H

#include "reader.h"
#include "intern.h"
#include "rows.h"
#include "../_cupti_layout.h" /* generated from kprof_cuda/cupti_layout.py */

/* A work record before the join: its row, and its context id (the queue's key). */
typedef struct { row_t r; uint32_t ctx; } raw_t;

/* ---- launches: correlation id -> scope, launch times (open addressing) -------------------- */
/* L_SEVERAL: a call whose records share its correlation id, however many (a graph launch, a
 * batched copy; cupti_abi.SEVERAL_*): kept until its profile ends. */
enum { L_SCOPE = 1, L_API = 2, L_SEVERAL = 4, L_MEM = 8 };
typedef struct {
    uint32_t corr; /* 0: empty slot */
    uint32_t flags;
    uint32_t nrows;
    uint32_t tomb;
    uint64_t scope;
    uint64_t devices; /* bit d: a row of this launch ran on device d (d < 64) */
    int64_t lb, le;
    int64_t site1; /* the launch site's raw id + 1 (the callback's; 0: none) */
} launch_t;

KPROF_INTERNAL extern launch_t *kprof_launches;
/* kprof_n_used counts tombstones too. */
KPROF_INTERNAL extern size_t kprof_cap_launches, kprof_n_launches, kprof_n_used;
/* At most this many live launches (MAX_LAUNCHES; set_max_launches() for the tests): past it
 * the oldest eighth are forgotten (kprof_c_forgotten), as the pure reader does. */
KPROF_INTERNAL extern size_t kprof_max_launches;
#define MAX_LAUNCHES ((size_t)1 << 20)
KPROF_INTERNAL extern long long kprof_c_forgotten;

/* Rehashes into a table sized for the live launches; -1 without the memory. */
KPROF_INTERNAL int kprof_launches_grow(void);

/* Forgets the oldest eighth of the live launches (by correlation id): launches whose records
 * never came (a lost buffer, a call CUPTI wrote no work for), so that new ones always fit. */
KPROF_INTERNAL void kprof_launches_forget_oldest(void);

static inline size_t kprof_hash32(uint32_t x) { return (size_t)(x * 2654435761u); }

static inline launch_t *kprof_find_launch(uint32_t corr) {
    if (!kprof_cap_launches) return NULL;
    size_t mask = kprof_cap_launches - 1, i = kprof_hash32(corr) & mask;
    for (;;) {
        launch_t *l = &kprof_launches[i];
        if (l->corr == corr && !l->tomb) return l;
        if (l->corr == 0 && !l->tomb) return NULL;
        i = (i + 1) & mask;
    }
}

/* The launch's entry, made if new; NULL past MAX_LAUNCHES or without the memory. */
static inline launch_t *kprof_get_launch(uint32_t corr) {
    launch_t *l = kprof_find_launch(corr);
    if (l) return l;
    if (kprof_n_launches >= kprof_max_launches) kprof_launches_forget_oldest();
    if (kprof_n_launches >= kprof_max_launches) return NULL;
    if ((kprof_n_used + 1) * 2 > kprof_cap_launches && kprof_launches_grow() < 0) return NULL;
    size_t mask = kprof_cap_launches - 1, i = kprof_hash32(corr) & mask;
    while (kprof_launches[i].corr && !kprof_launches[i].tomb) i = (i + 1) & mask;
    if (!kprof_launches[i].tomb) kprof_n_used++;
    memset(&kprof_launches[i], 0, sizeof kprof_launches[i]);
    kprof_launches[i].corr = corr;
    kprof_n_launches++;
    return &kprof_launches[i];
}

static inline void kprof_drop_launch(launch_t *l) {
    l->tomb = 1;
    kprof_n_launches--;
}

/* ---- the records waiting for their launch ------------------------------------------------- */
KPROF_INTERNAL extern raw_t *kprof_pending;
KPROF_INTERNAL extern size_t kprof_n_pending, kprof_cap_pending;
#define MAX_PENDING ((size_t)1 << 20)
/* Records whose launch was outside every profile, or that could not wait (for stats()). */
KPROF_INTERNAL extern long long kprof_c_foreign;

/* Doubles the waiting records' array; -1 without the memory. */
KPROF_INTERNAL int kprof_pending_grow(void);

static inline void kprof_add_pending(const raw_t *w) {
    if (kprof_n_pending >= MAX_PENDING) { kprof_c_foreign++; return; }
    if (kprof_n_pending == kprof_cap_pending && kprof_pending_grow() < 0) {
        kprof_c_foreign++;
        return;
    }
    kprof_pending[kprof_n_pending++] = *w;
}

/* ---- a record joined ---------------------------------------------------------------------- */
static inline void kprof_emit(raw_t *w, launch_t *l, int with_api) {
    w->r.v[R_SCOPE] = (int64_t)l->scope;
    w->r.v[R_SITE] = l->site1 - 1;
    w->r.v[R_LAUNCH_BEGIN] = with_api ? l->lb : 0;
    w->r.v[R_LAUNCH_END] = with_api ? l->le : 0;
    w->r.v[R_QUEUE] =
        kprof_intern_queue((uint32_t)w->r.v[R_DEVICE], w->ctx, (uint32_t)w->r.v[R_STREAM]);
    kprof_push_row(&w->r);
}

/* 1: the row was emitted or is foreign (done with); 0: its launch is not complete yet. With
 * `final`, or for a launch of a scope in `release`, a launch without its API record completes
 * (its API record was lost). */
static inline int kprof_resolve(raw_t *w, int final, const uint64_t *release, size_t n_release) {
    launch_t *l = kprof_find_launch((uint32_t)w->r.v[R_CORRELATION]);
    int done = 0;
    if (l && (l->flags & L_API) && (l->flags & L_SCOPE)) {
        kprof_emit(w, l, 1);
        done = 1;
    } else if (l && (l->flags & L_API)) {
        kprof_c_foreign++; /* launched outside every profile */
        done = 1;
    } else if (l && (l->flags & L_SCOPE)) {
        int rel = final;
        for (size_t k = 0; k < n_release && !rel; k++) rel = l->scope == release[k];
        if (rel) { kprof_emit(w, l, 0); done = 1; } /* its API record was lost */
    }
    if (done && l) {
        l->nrows++;
        if ((uint64_t)w->r.v[R_DEVICE] < 64) l->devices |= (uint64_t)1 << w->r.v[R_DEVICE];
        if (!(l->flags & L_SEVERAL)) kprof_drop_launch(l);
        return 1;
    }
    if (final) { kprof_c_foreign++; return 1; }
    return 0;
}

/* Resolves the waiting records again, keeping those still waiting. */
KPROF_INTERNAL void kprof_join_retry(int final, const uint64_t *release, size_t n_release);

/* Forgets every launch and waiting record: reset(). */
KPROF_INTERNAL void kprof_join_reset(void);

/* A sequence of scopes (None: none) as a malloc'd array the caller frees; -1 with an
 * exception. */
KPROF_INTERNAL int kprof_scopes_of(PyObject *seq, uint64_t **out, size_t *n);

KPROF_INTERNAL PyObject *kprof_py_waiting(PyObject *m, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_graph_devices(PyObject *m, PyObject *args);
KPROF_INTERNAL PyObject *kprof_py_forget(PyObject *m, PyObject *args);

#endif /* KPROF_CUPTI_JOIN_H */
