"""kprof_workqueue: a kprof backend plugin for workqueue, a toy device library."""

import workqueue

from kprof import plugin as kp


# Step 1: name the backend. `kprof backends` shows what this returns.
@kp.hookimpl
def describe_backend(backend: kp.Backend) -> kp.BackendInfo:
    return kp.BackendInfo(
        library="workqueue",
        library_version=workqueue.__version__,
        devices=("workqueue worker",),
    )
