/* Reading the commands' events (events.c): the Event token a recorded command carries, and the
 * driver's callbacks for commands without profiling (Stamp). */
#ifndef KPROF_CLHOOK_EVENTS_H
#define KPROF_CLHOOK_EVENTS_H

#include "clhook.h"
#include "../../kprof_core/low_level/_layout.h" /* KprofRawOps */

/* Makes the Event and Stamp types; -1 with an exception. */
KPROF_INTERNAL int kprof_events_init(void);

/* The Event type (a borrowed reference), for the module's attribute. */
KPROF_INTERNAL PyObject *kprof_event_type(void);

/* info(handle, param): an Event's get_info values other than its status (bind()). */
KPROF_INTERNAL void kprof_events_bind(PyObject *info);

/* A new Event token owning one reference to `ev`: kprof's own when `own`, else retained here.
 * NULL with an exception on failure; an `own` event is then released. Under the GIL. */
KPROF_INTERNAL PyObject *kprof_event_token(cl_event ev, int own);

/* How the recorder's C batches read, give back and make tokens of the raw cl_events the hook
 * hands them (one reference each); kprof_event_raw_taken counts one handed over. */
KPROF_INTERNAL extern const KprofRawOps kprof_event_ops;
KPROF_INTERNAL void kprof_event_raw_taken(void);

/* The cl_event an Event token holds, as a raw reference (counted as the batches'): moved out
 * of the token where the caller holds the only reference to it, else a new one; NULL where
 * `token` is not an Event holding one (KprofRawStamp.raw). */
KPROF_INTERNAL void *kprof_event_raw(PyObject *token);

/* How many Event tokens and raw references are alive (for stats()). */
KPROF_INTERNAL long long kprof_events_live(void);

/* stamp(event_handle) -> Stamp, or None where the driver refuses the callbacks. */
KPROF_INTERNAL PyObject *kprof_py_stamp(PyObject *module, PyObject *arg);

#endif /* KPROF_CLHOOK_EVENTS_H */
