"""Layer 10, several ranks' profiles: combining them on one timeline, the merged report, and ``kprof.mpi``."""
