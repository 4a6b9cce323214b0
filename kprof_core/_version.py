"""kprof's version, written once: pyproject.toml reads it (setuptools dynamic version)."""

__version__ = "0.1.0"
