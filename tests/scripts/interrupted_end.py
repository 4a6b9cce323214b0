"""A script whose profile's end is interrupted by Ctrl-C: one kernel done, one that never
finishes; SIGINT arrives the first time kprof, at the end, finds work not done
(deterministic: no timer), as a user's Ctrl-C during the end's wait would."""

import signal
import threading

from kprof_testbackend import device

ended = False
_done = device.Marker.done


def _done_or_interrupt(marker: device.Marker) -> bool:
    global ended
    done = _done.fget(marker)  # type: ignore[attr-defined]
    if ended and not done and threading.current_thread() is threading.main_thread():
        ended = False  # once
        signal.raise_signal(signal.SIGINT)
    return done


device.Marker.done = property(_done_or_interrupt)  # type: ignore[method-assign, assignment]

q = device.Queue()
q.hang.clear()
with q:
    q.launch("done", 10)
    q.finish()
    q.launch("hang")
    q.launch("after")
print("script ended")
ended = True
