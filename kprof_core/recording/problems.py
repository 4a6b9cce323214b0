"""What went wrong while a profile's entries became rows: the counts the profile reports and
the warnings said once each (a misbehaving hook, a malformed entry)."""

from __future__ import annotations

import warnings

from kprof_core.host.backend import Backend, BadReturn


class Problems:
    """One profile's counts of what was dropped or not given back, and the keys of the
    warnings already said (each is said once per profile)."""

    def __init__(self) -> None:
        self.warned: set[str] = set()
        self.late_dropped = 0  # entries that came after the profile ended
        self.dropped_bad = 0  # entries kprof could not read (a plugin's bug)
        self.unreleased = 0  # tokens not given back: the deadline had passed

    def hook_failed(
        self, backend: Backend, hook: str, exc: BaseException, disable: bool = True
    ) -> str:
        """Warn once about a misbehaving hook (and stop using the backend); returns why."""
        if isinstance(exc, BadReturn):
            reason = str(exc)
        else:
            reason = f"{hook} raised {type(exc).__name__}: {exc}"
        if disable:
            backend.disable(reason)
        elif (key := f"{backend.slot} {hook} {type(exc).__name__}") not in self.warned:
            # One warning per backend, hook and kind of failure: device errors differ per
            # record (an event's address in the message) and would warn once each.
            self.warned.add(key)
            warnings.warn(
                f"kprof: backend {backend.name!r} ({backend.plugin_label}): {reason}",
                RuntimeWarning,
                stacklevel=3,
            )
        return reason
