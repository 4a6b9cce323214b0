"""Step 4: the plugin captures launches and copies; the program only adds a range."""

import time

import workqueue

import kprof


def scale(n: int) -> None:
    time.sleep(n / 1e6)


queue = workqueue.Queue("q1")
buffer = workqueue.Buffer(1 << 20)  # 1 MiB of device memory
data, out = bytes(1 << 20), bytearray(1 << 20)

with kprof.profile(backends=["workqueue"]) as p, queue:
    for _ in range(3):
        with kprof.range("step"):
            queue.write(buffer, data)
            queue.launch(scale, 200)
            queue.read(buffer, out)
print(p)
