"""Write the C headers generated from Python tables (beside this module): ``_layout.h`` from
``layout.py`` and ``_perfetto_fields.h`` from ``perfetto_fields.py``.

    python -m kprof_core.low_level.gen_header          # rewrite them
    python -m kprof_core.low_level.gen_header --check  # exit 1 when one is out of date

Then rebuild the compiled parts (``pip install -e .`` or ``python setup.py build_ext
--inplace``): until then ``kprof backends`` shows the recorder refused and kprof runs pure
Python (and the Perfetto export its Python encoder).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from kprof_core.low_level import layout, perfetto_fields

HEADER = Path(__file__).with_name("_layout.h")
PERFETTO_HEADER = Path(__file__).with_name("_perfetto_fields.h")
#: Each generated header and the function that writes its text.
HEADERS: dict[Path, Callable[[], str]] = {
    HEADER: layout.c_header,
    PERFETTO_HEADER: perfetto_fields.c_header,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    stale = 0
    for path, make in HEADERS.items():
        text = make()
        if "--check" in args:
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != text:
                print(f"{path} is out of date: run python -m kprof_core.low_level.gen_header")
                stale = 1
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return stale


if __name__ == "__main__":
    raise SystemExit(main())
