"""Write ``_cupti_layout.h`` (beside this module) from ``cupti_layout.py``.

    python -m kprof_cuda.gen_cupti_header          # rewrite it
    python -m kprof_cuda.gen_cupti_header --check  # exit 1 when it is out of date

Then rebuild the compiled CUPTI reader (``pip install -e .``): until then it is refused and
the pure-Python reader runs (``kprof backends`` says which reader is active).
"""

from __future__ import annotations

import sys
from pathlib import Path

from kprof_cuda.cupti_layout import c_header

HEADER = Path(__file__).with_name("_cupti_layout.h")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = c_header()
    if "--check" in args:
        current = HEADER.read_text(encoding="utf-8") if HEADER.exists() else ""
        if current != text:
            print(f"{HEADER} is out of date: run python -m kprof_cuda.gen_cupti_header")
            return 1
        return 0
    HEADER.write_text(text, encoding="utf-8")
    print(f"wrote {HEADER}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
