"""A simulated device for kprof's tests: queues run work asynchronously on worker threads."""
