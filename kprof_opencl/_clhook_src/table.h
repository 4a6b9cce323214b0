/* The ICD dispatch tables kprof hooks, and the one way to swap a set of their entries in and
 * out (table.c), used by the enqueue hooks and the memory hooks alike. */
#ifndef KPROF_CLHOOK_TABLE_H
#define KPROF_CLHOOK_TABLE_H

#include "clhook.h"

/* One entry kprof hooks. */
typedef struct {
    int slot;
    void *fn;
    int since; /* the OpenCL version (major*10+minor) that added the entry */
    const char *name;
} KprofHook;

/* An entry whose function `fn` has the entry's type `type` (cl_api_*): the conditional makes
 * the compiler compare the two, and a mismatch warns at build time. */
#define KPROF_HOOK(slot, type, fn, since, name)                                              \
    {slot, (void *)(1 ? (fn) : (type)NULL), since, name}

/* The sets, each swapped in and out of a table as one. */
enum { KPROF_ENQUEUES, KPROF_MEMORY, KPROF_N_SETS };

typedef struct {
    const KprofHook *hooks;
    int n;
    int which;              /* KPROF_ENQUEUES or KPROF_MEMORY */
    const char *in_already; /* the error when it is hooked into a table twice */
    const char *not_in;     /* the error when it is taken out of a table it is not in */
    int needs_slot;         /* an entry the set cannot work without (-1: none), */
    int needs_since;        /* from this OpenCL version on, */
    const char *needs_why;  /* or this error */
} KprofHookSet;

/* Append-only: a thread may still be inside a hooked function after the table is restored,
 * and it reads its original from here. */
#define KPROF_MAX_TABLES 16
typedef struct {
    void **table;
    void *orig[N_SLOTS];
    int in[KPROF_N_SETS]; /* which sets are swapped in */
    int version;          /* the platform's OpenCL version (major*10+minor), once hooked */
} KprofTable;

KPROF_INTERNAL extern KprofTable kprof_tables[KPROF_MAX_TABLES];
KPROF_INTERNAL extern int kprof_n_tables;

/* The dispatch table of a cl object: its first word (cl_khr_icd). */
static inline void **
kprof_table_of(void *obj)
{
    return *(void ***)obj;
}

static inline KprofTable *
kprof_find_table(void **t)
{
    for (int i = 0; i < kprof_n_tables; i++)
        if (kprof_tables[i].table == t)
            return &kprof_tables[i];
    return NULL;
}

/* The ICD's own function for `slot` of obj's table (hooked or not). Inline: every hooked call
 * starts here. */
static inline void *
kprof_original(void *obj, int slot)
{
    void **t = kprof_table_of(obj);
    KprofTable *h = kprof_find_table(t);
    return h != NULL && h->orig[slot] != NULL ? h->orig[slot] : t[slot];
}

/* A Python int's address; NULL with an exception set where it is not one, or NULL. */
KPROF_INTERNAL void *kprof_address_of(PyObject *arg);

/* Hooks `set` into the table at the address `addr`: saves the ICD's entries, calls
 * ready(arg) (state the hooked functions need; -1 with an exception: nothing is swapped),
 * then swaps them in. Returns the names hooked, a new list, or NULL with an exception. */
KPROF_INTERNAL PyObject *kprof_table_hook(PyObject *addr, int version, const KprofHookSet *set,
                                          int (*ready)(void *), void *arg);

/* Puts the ICD's entries of `set` back; returns the names someone else replaced meanwhile
 * (left as they are), a new list, or NULL with an exception. */
KPROF_INTERNAL PyObject *kprof_table_unhook(PyObject *addr, const KprofHookSet *set);

/* Whether `which` set is in any table. */
KPROF_INTERNAL int kprof_tables_any(int which);

/* table_address(handle) -> the address of the dispatch table of a cl object. */
KPROF_INTERNAL PyObject *kprof_py_table_address(PyObject *module, PyObject *arg);

#endif /* KPROF_CLHOOK_TABLE_H */
