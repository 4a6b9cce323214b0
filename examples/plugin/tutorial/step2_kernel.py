"""Step 2: time work on the device with kprof.kernel."""

import time

import workqueue

import kprof


def scale(n: int) -> None:  # a "kernel": it runs on the queue's worker thread
    time.sleep(n / 1e6)


queue = workqueue.Queue("q1")


@kprof.kernel
def run_scale(n: int) -> None:
    queue.launch(scale, n)  # kprof puts a timestamp before and after this


with kprof.profile(backends=["workqueue"]) as p, queue:
    for n in (100, 200, 300):
        run_scale(n)
print(p)
