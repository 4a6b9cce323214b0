"""The clock every kprof deadline reads (resolving at a profile's end, back-pressure).

One module attribute, looked up at each use, so that tests replace it (``monkeypatch``) with a
clock they drive and assert on what it says rather than on wall time, which a loaded machine
stretches. ``sleep`` is the pause between polls of a device, replaced with it.
"""

from __future__ import annotations

import time

#: Seconds, for deadlines only (never a record's time: that is ``time.perf_counter_ns``).
monotonic = time.monotonic
#: The pause between two polls of a device that has not reached a timestamp yet.
sleep = time.sleep
