/* Interning (see intern.h): kernel names by text, open addressing on an FNV-1a hash, behind a
 * cache by pointer; queues in a short array scanned once per change of queue. All under the
 * lock: CUPTI's thread interns, take() hands the new ones over. */
#include "reader.h"
#include "intern.h"

/* ---- names ------------------------------------------------------------------------------- */
char **kprof_texts;
static size_t n_texts, cap_texts, texts_taken;
static int64_t *text_slots; /* open addressing by FNV-1a hash: id - FIRST_KERNEL_NAME or -1 */
static size_t cap_text_slots;
ptr_cache_t kprof_ptr_cache[PTR_CACHE];

static size_t fnv(const char *p) {
    size_t h = 1469598103934665603ull;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static int grow_text_slots(void) {
    size_t ncap = cap_text_slots ? cap_text_slots * 2 : 256;
    int64_t *ns = malloc(ncap * sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < ncap; i++) ns[i] = -1;
    for (size_t t = 0; t < n_texts; t++) {
        size_t i = fnv(kprof_texts[t]) & (ncap - 1);
        while (ns[i] >= 0) i = (i + 1) & (ncap - 1);
        ns[i] = (int64_t)t;
    }
    free(text_slots);
    text_slots = ns;
    cap_text_slots = ncap;
    return 0;
}

int64_t kprof_intern_name_slow(const char *p, ptr_cache_t *pc) {
    if ((n_texts + 1) * 2 > cap_text_slots && grow_text_slots() < 0) return FIRST_KERNEL_NAME - 1;
    size_t mask = cap_text_slots - 1, i = fnv(p) & mask;
    int64_t id = -1;
    while (text_slots[i] >= 0) {
        if (strcmp(kprof_texts[text_slots[i]], p) == 0) {
            id = FIRST_KERNEL_NAME + text_slots[i];
            break;
        }
        i = (i + 1) & mask;
    }
    if (id < 0) {
        if (n_texts == cap_texts) {
            size_t nc = cap_texts ? cap_texts * 2 : 64;
            char **nt = realloc(kprof_texts, nc * sizeof *nt);
            if (!nt) return FIRST_KERNEL_NAME - 1;
            kprof_texts = nt;
            cap_texts = nc;
        }
        char *copy = strdup(p);
        if (!copy) return FIRST_KERNEL_NAME - 1;
        kprof_texts[n_texts] = copy;
        text_slots[i] = (int64_t)n_texts;
        id = FIRST_KERNEL_NAME + (int64_t)n_texts++;
    }
    pc->ptr = p;
    pc->id = id;
    return id;
}

/* ---- queues: (device, context, stream) -> index ------------------------------------------- */
static qkey_t *queues;
static size_t n_queues, cap_queues, queues_taken;
qkey_t kprof_last_q;
int64_t kprof_last_qi = -1;

int64_t kprof_intern_queue_slow(uint32_t dev, uint32_t ctx, uint32_t stream) {
    size_t i;
    for (i = 0; i < n_queues; i++) /* few queues: a scan, once per change of queue */
        if (queues[i].dev == dev && queues[i].ctx == ctx && queues[i].stream == stream) break;
    if (i == n_queues) {
        if (n_queues == cap_queues) {
            size_t nc = cap_queues ? cap_queues * 2 : 16;
            qkey_t *nq = realloc(queues, nc * sizeof *nq);
            if (!nq) return 0;
            queues = nq;
            cap_queues = nc;
        }
        queues[n_queues++] = (qkey_t){dev, ctx, stream};
    }
    kprof_last_q = (qkey_t){dev, ctx, stream};
    kprof_last_qi = (int64_t)i;
    return kprof_last_qi;
}

void kprof_queues_reset(void) {
    n_queues = queues_taken = 0;
    kprof_last_qi = -1;
}

/* ---- what take() hands over --------------------------------------------------------------- */
int kprof_intern_new(char ***texts, size_t *n_new_texts, qkey_t **new_queues,
                     size_t *n_new_queues) {
    size_t nt = n_texts - texts_taken, nq = n_queues - queues_taken;
    char **tx = nt ? malloc(nt * sizeof *tx) : NULL;
    qkey_t *qs = nq ? malloc(nq * sizeof *qs) : NULL;
    if ((nt && !tx) || (nq && !qs)) {
        free(tx);
        free(qs);
        return -1;
    }
    if (nt) memcpy(tx, kprof_texts + texts_taken, nt * sizeof *tx);
    if (nq) memcpy(qs, queues + queues_taken, nq * sizeof *qs);
    texts_taken = n_texts;
    queues_taken = n_queues;
    *texts = tx;
    *n_new_texts = nt;
    *new_queues = qs;
    *n_new_queues = nq;
    return 0;
}
