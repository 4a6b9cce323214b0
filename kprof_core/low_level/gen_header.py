"""Write ``_layout.h`` (beside this module) from ``layout.py``.

    python -m kprof_core.low_level.gen_header          # rewrite it
    python -m kprof_core.low_level.gen_header --check  # exit 1 when it is out of date

Then rebuild the compiled recorder (``pip install -e .`` or ``python setup.py build_ext
--inplace``): until then ``kprof backends`` shows it refused and kprof runs pure Python.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kprof_core.low_level.layout import c_header

HEADER = Path(__file__).with_name("_layout.h")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = c_header()
    if "--check" in args:
        current = HEADER.read_text(encoding="utf-8") if HEADER.exists() else ""
        if current != text:
            print(f"{HEADER} is out of date: run python -m kprof_core.low_level.gen_header")
            return 1
        return 0
    HEADER.write_text(text, encoding="utf-8")
    print(f"wrote {HEADER}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
