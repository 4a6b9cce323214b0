"""The conformance checks of ``kprof.testing``: a backend plugin held to the hookspecs' contract.

Each check drives the plugin's hooks (through the ``kprof.plugin.Backend``, as kprof calls them) and a
small workload of the plugin author's, and raises :class:`ConformanceError` naming the hook and
the rule it broke. ``kprof_core/testing.py`` runs them as pytest tests; they need no pytest.

What a check needs from the author (a :class:`Subject`): the backend, a workload step that
enqueues launches without waiting, a context that makes a queue current on the calling thread,
and optionally a way to hold that queue (``stall``), without which the checks that need the
device to be behind (``record_timestamp`` does not block, tokens are not reused before the
device reached them) are skipped.
"""

from __future__ import annotations

from kprof_core.conformance.checks import Conformance
from kprof_core.conformance.rules import (
    RULES,
    ClockReport,
    ConformanceError,
    Skipped,
    Subject,
    fail,
)
from kprof_core.conformance.watch import Ledger

__all__ = [
    "RULES",
    "ClockReport",
    "Conformance",
    "ConformanceError",
    "Ledger",
    "Skipped",
    "Subject",
    "fail",
]
