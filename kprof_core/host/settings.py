"""Settings read from the environment and from ``profile()``'s arguments: each checked in one
place, with an error or warning that says what was given and what is allowed."""

from __future__ import annotations

import os
import warnings

from kprof_core import envvars
from kprof_core.host.backend import KprofError

ENV_TIMEOUT = envvars.RESOLVE_TIMEOUT
#: Seconds a profile's end waits for the device's timestamps (``timeout=``).
DEFAULT_TIMEOUT = 60.0

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def env_flag(name: str) -> bool:
    """Read a boolean kprof environment variable; a value we can't read is a clear error."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise KprofError(
        f"{name}={raw!r} is not understood: use 1, true, yes or on to enable it, "
        f"or 0, false, no, off or an empty value to disable it"
    )


#: The longest wait a timeout may ask for (a week). Far past any device's answer, and far
#: below what the waits accept: KPROF_RESOLVE_TIMEOUT=1e10 overflowed them, and every record
#: ended unresolved.
MAX_SECONDS = 7 * 86_400.0


def env_seconds(name: str, default: float, zero: str | None = None, stacklevel: int = 3) -> float:
    """A number of seconds from the environment variable ``name``: positive and at most
    ``MAX_SECONDS`` (``0`` too where ``zero`` says what it means). Unset or empty: ``default``.
    Anything else (``soon``, ``-1``, ``inf``, ``nan``, ``1e10``) is warned about in one line
    and ``default`` is used: a typo in a variable must not stop a run or lose its files."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if (0 < value <= MAX_SECONDS) or (value == 0 and zero is not None):
        return value
    allowed = f"a number of seconds above 0 and at most {MAX_SECONDS:g}" + (
        f", or 0 {zero}" if zero else ""
    )
    warnings.warn(
        f"kprof: {name}={raw!r} is not {allowed}; using the default ({default:g} s)",
        RuntimeWarning,
        stacklevel=stacklevel,
    )
    return default


def resolve_timeout(value: float | None) -> float:
    """The resolve timeout in seconds: ``value``, or for None ``KPROF_RESOLVE_TIMEOUT``, or
    the default (60 s); a value that is not a positive number raises ``KprofError``."""
    if value is None:
        # Warned at the line that made the profile: env_seconds, here, profile(), its caller.
        return env_seconds(ENV_TIMEOUT, DEFAULT_TIMEOUT, stacklevel=4)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"profile(timeout=...) must be a number of seconds, not {type(value).__name__}"
        )
    if not 0 < value <= MAX_SECONDS:
        raise ValueError(
            f"profile(timeout=...) must be a positive number of seconds, at most "
            f"{MAX_SECONDS:g}, not {value!r}"
        )
    return float(value)
