"""kprof's version, in one module that imports nothing: the readers that stamp it into files
(exports, traces, the HTML page, ``kprof --version``) import it from here, not from the package
(which imports them)."""

__version__ = "0.1.0"
