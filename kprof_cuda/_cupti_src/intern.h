/* Interning (intern.c): kernel names by text, and queues by (device, context, stream), each to
 * the index its rows carry; take() hands Python those interned since the last take. */
#ifndef KPROF_CUPTI_INTERN_H
#define KPROF_CUPTI_INTERN_H

#include "reader.h"

/* Name ids from 12 on are kernel names: 0-11 are memset and copy names (cupti_records.py). */
#define FIRST_KERNEL_NAME 12

/* The names' texts (copies), by id - FIRST_KERNEL_NAME. */
KPROF_INTERNAL extern char **kprof_texts;

/* The last id a name pointer got, by the pointer: CUPTI shares one pointer per kernel name. */
typedef struct { const char *ptr; int64_t id; } ptr_cache_t;
#define PTR_CACHE 1024
KPROF_INTERNAL extern ptr_cache_t kprof_ptr_cache[PTR_CACHE];

/* A name not in its pointer's cache slot `pc` (or another name at that pointer now). */
KPROF_INTERNAL int64_t kprof_intern_name_slow(const char *p, ptr_cache_t *pc);

/* A kernel name's id (lock held). Inline: every kernel record asks, and the pointer it saw last
 * is the common case (the same pointer with the same text: a pointer reused for another name is
 * caught). */
static inline int64_t kprof_intern_name(const char *p) {
    if (!p) p = "?";
    ptr_cache_t *pc = &kprof_ptr_cache[((uintptr_t)p >> 3) & (PTR_CACHE - 1)];
    if (pc->ptr == p && strcmp(kprof_texts[pc->id - FIRST_KERNEL_NAME], p) == 0) return pc->id;
    return kprof_intern_name_slow(p, pc);
}

typedef struct { uint32_t dev, ctx, stream; } qkey_t;

/* The queue last interned, and its index (-1: none). */
KPROF_INTERNAL extern qkey_t kprof_last_q;
KPROF_INTERNAL extern int64_t kprof_last_qi;

/* A queue other than the last one. */
KPROF_INTERNAL int64_t kprof_intern_queue_slow(uint32_t dev, uint32_t ctx, uint32_t stream);

/* A queue's index (lock held). Inline: every row asks, and the last queue is the common case. */
static inline int64_t kprof_intern_queue(uint32_t dev, uint32_t ctx, uint32_t stream) {
    if (kprof_last_qi >= 0 && kprof_last_q.dev == dev && kprof_last_q.ctx == ctx &&
        kprof_last_q.stream == stream)
        return kprof_last_qi;
    return kprof_intern_queue_slow(dev, ctx, stream);
}

/* The names' texts and the queues interned since the last call, as arrays of copies the caller
 * frees (lock held); the texts themselves are never freed while the module lives. -1 without
 * the memory for the copies: nothing is marked as handed over. */
KPROF_INTERNAL int kprof_intern_new(char ***texts, size_t *n_texts, qkey_t **queues,
                                    size_t *n_queues);

/* Forgets every queue (lock held): reset(). Names stay interned. */
KPROF_INTERNAL void kprof_queues_reset(void);

#endif /* KPROF_CUPTI_INTERN_H */
