"""Layer 11, the ``kprof`` command: ``main`` and one module per command."""
