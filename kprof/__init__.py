"""kprof: time GPU kernels on the device, without synchronizing the host.

    with kprof.profile() as p:
        run_my_kernels()
    print(p)

The implementation lives in ``kprof_core``; this package is its public face.
"""

from kprof_core import *  # noqa: F403
from kprof_core import (  # noqa: F401
    __all__,
    __version__,
)
from kprof_core.recording import capture  # noqa: F401


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext kprof``: the ``%kprof`` and ``%%kprof`` magics (IPython is imported here,
    never by ``import kprof``)."""
    from kprof_core.ipython import load_ipython_extension as load

    load(ipython)
