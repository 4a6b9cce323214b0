"""Human units for times, sizes and rates, three significant digits (as KernelAbstractions)."""

from __future__ import annotations

import math


def format_time(ns: float) -> str:
    """Format nanoseconds with three significant digits and the unit that keeps them.

    The unit switches early where three digits would round up to 1000: ``999.7`` ns prints
    as ``1 µs`` and ``1.234e6`` ns as ``1.23 ms``.
    """
    if isinstance(ns, bool) or not isinstance(ns, (int, float)):
        raise TypeError(f"format_time takes a number of nanoseconds, not {type(ns).__name__}")
    if math.isnan(ns):
        return "nan"
    sign = "-" if ns < 0 else ""
    a = abs(ns)
    if math.isinf(a):
        return f"{sign}inf"
    if a < 999.5:
        return f"{sign}{a:.0f} ns"
    for scale, unit in ((1e3, "µs"), (1e6, "ms")):
        # Decide on the rounded text, not the value: 999.5 µs must not print as '1e+03 µs'.
        text = f"{a / scale:.3g}"
        if "e" not in text and float(text) < 1000:
            return f"{sign}{text} {unit}"
    text = f"{a / 1e9:.3g}"
    # Past 999.5 s, whole seconds: more digits rather than an exponent.
    return f"{sign}{text if 'e' not in text and float(text) < 1000 else f'{a / 1e9:.0f}'} s"


def format_bytes(n: float) -> str:
    """Bytes in binary units with three significant digits: ``4.00 MiB``."""
    if n < 0:
        raise ValueError("a size cannot be negative")
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1023.5 or unit == "TiB":
            text = f"{n:.3g}"
            # 1000 to 1023 of a unit: four digits rather than an exponent ('1e+03').
            return f"{n:.0f} {unit}" if unit == "B" or "e" in text else f"{text} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def format_rate(nbytes: float, ns: float) -> str:
    """Throughput of ``nbytes`` moved in ``ns`` nanoseconds, or '' when the time is zero."""
    if ns <= 0:
        return ""
    return format_bytes(nbytes * 1e9 / ns) + "/s"
