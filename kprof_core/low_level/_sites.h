/* The launch-site catcher (_sites.c): what the launch path and kprof.range's exit call. */
#ifndef KPROF_SITES_H
#define KPROF_SITES_H

#include "_crecorder_unit.h"

/* Its layout is _sites.c's alone. */
typedef struct SiteCatcher SiteCatcher;

KPROF_INTERNAL extern PyObject *kprof_SiteCatcherType;

/* The raw site id of the calling thread's first user frame, or -1 (none found, or no Python
 * frame); -2 with an exception set. */
KPROF_INTERNAL Py_ssize_t kprof_site_capture(SiteCatcher *self);

/* Makes the type and adds site_catcher() to the module m; -1 with an exception set. */
KPROF_INTERNAL int kprof_sites_init(PyObject *m);

#endif /* KPROF_SITES_H */
