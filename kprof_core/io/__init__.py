"""Layer 5, io: the ``.kprof`` file format, the checks every loaded file passes, and the JSON/CSV/DataFrame exports."""
