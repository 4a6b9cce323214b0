import os
import sys

# ``python -m kprof`` puts the working directory first on sys.path. kprof loads backend plugins
# only from installed distributions, so a file there that shares a plugin's module name (say a
# ``kprof_opencl.py``) must not be imported in its place: take that entry out before any
# plugin loads. (``kprof run`` gives the profiled script its own sys.path[0] again.)
_cwd = os.getcwd()
if (
    sys.path
    and os.path.abspath(sys.path[0] or ".") == _cwd
    and not any(p and os.path.abspath(p) == _cwd for p in sys.path[1:])
):
    del sys.path[0]

from kprof_core.cli.main import main  # noqa: E402

raise SystemExit(main())
