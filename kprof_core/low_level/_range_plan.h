/* A range plan's items and the backend hooks a compiled range calls through them
 * (_range_plan.c, a unit of _crecorder): recorder.py `_range_plan` makes the plan. */
#ifndef KPROF_RANGE_PLAN_H
#define KPROF_RANGE_PLAN_H

#include "_crecorder_unit.h"

/* A plan item: (backend, current_queue, record_timestamp or None, slot, raw stamp capsule or
 * None, range_push or None, range_pop or None, by_work: True where the backend's work times
 * its ranges). _stamp.c reads RG_RAW_STAMP. */
enum { RG_B, RG_CQ, RG_RT, RG_SLOT, RG_RAW_STAMP, RG_PUSH, RG_POP, RG_BY_WORK, RG_ITEM_LEN };

/* The item of `plan` for backend `b` (borrowed), or NULL. */
KPROF_INTERNAL PyObject *kprof_plan_item(PyObject *plan, PyObject *b);

/* A hook that raised an Exception: rec._hook_failed(backend, hook, exc), as the Python path
 * reports it (0; the caller goes on). Anything else (KeyboardInterrupt, SystemExit) goes up,
 * as it does from the Python path: -1. */
KPROF_INTERNAL int kprof_plan_hook_failed(PyObject *rec, PyObject *backend, PyObject *hook);

/* The vendor tool told of the range's start where the item's backend mirrors ranges (NVTX):
 * 1; 0 where its range_push failed (reported: the backend is left out of the range); -1 with
 * an exception that goes up. */
KPROF_INTERNAL int kprof_plan_push(PyObject *rec, PyObject *item, PyObject *name);

/* The vendor tool's range popped where the backend mirrors ranges (Recorder._range_pop): 0,
 * or -1 where the hook raised something other than an Exception. */
KPROF_INTERNAL int kprof_plan_pop(PyObject *rec, PyObject *item);

/* Interns the hook names; -1 with an exception set. */
KPROF_INTERNAL int kprof_range_plan_init(void);

#endif /* KPROF_RANGE_PLAN_H */
