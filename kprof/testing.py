"""``kprof.testing``: the conformance kit for backend plugins (see ``kprof_core.testing``).

Imported by a plugin's tests only: it needs pytest, which ``import kprof`` never imports.
"""

from kprof_core.testing import *  # noqa: F403
from kprof_core.testing import __all__  # noqa: F401
