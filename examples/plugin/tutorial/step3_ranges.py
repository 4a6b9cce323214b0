"""Step 3: ranges, named queues and a device clock on the host's timeline."""

import time

import workqueue

import kprof


def scale(n: int) -> None:
    time.sleep(n / 1e6)


queue = workqueue.Queue("q1")
run_scale = kprof.kernel(lambda n: queue.launch(scale, n), "scale")

with kprof.profile(backends=["workqueue"]) as p, queue:
    for _ in range(4):
        with kprof.range("step"):
            run_scale(100)
            with kprof.range("update"):
                run_scale(300)
print(p)
for clock in p.clocks.values():
    print(f"{clock.device}: {clock.method}, within {clock.error_ns} ns")
