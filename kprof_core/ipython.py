"""IPython magics, loaded by ``%load_ext kprof`` (never by ``import kprof``)::

    %kprof [options] statement        profile one statement
    %%kprof [options]                 profile the whole cell

Options (as ``kprof run``): ``-t``/``--print-trace`` (the trace after the summary),
``--backends A,B``, ``--no-device`` (host records only), ``-o``/``--output FILE.kprof``
(save), ``--html FILE.html``, ``--trace FILE.json`` (Chrome/Perfetto); and ``-v NAME``/
``--var NAME``: the variable the profile is kept in (default ``_kprof``), ``-q``/``--quiet``:
keep it without displaying it. The profile is displayed as ``Profile._repr_html_`` renders
it (timeline and tables) where the front end shows HTML, else as ``print(p)``.
"""

from __future__ import annotations

import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from kprof_core.cli.run import INTERRUPTED
from kprof_core.host.backend import KprofError
from kprof_core.profiler import profile

DEFAULT_VAR = "_kprof"
_LONG = ("print-trace", "no-device", "quiet", "backends=", "output=", "html=", "trace=", "var=")


@magics_class
class KprofMagics(Magics):
    """``%kprof`` and ``%%kprof``."""

    @line_cell_magic
    def kprof(self, line: str, cell: str | None = None) -> None:
        """Profile a statement (``%kprof stmt``) or a cell (``%%kprof``) with kprof.

        Options: -t/--print-trace, --backends A,B, --no-device, -o/--output FILE.kprof,
        --html FILE.html, --trace FILE.json, -v/--var NAME (default _kprof), -q/--quiet.
        """
        opts, stmt = self.parse_options(line, "tqo:v:", *_LONG, posix=False, strict=False)

        def opt(short: str | None, long: str) -> Any:
            if short and short in opts:
                return opts[short]
            return opts.get(long)

        code = stmt if cell is None else cell
        if cell is not None and stmt.strip():
            raise UsageError(f"%%kprof takes options only on its line, not {stmt.strip()!r}")
        if not code.strip():
            raise UsageError(
                "%kprof needs a statement to profile: %kprof f(x), or %%kprof "
                "as the first line of a cell"
            )
        var = opt("v", "var") or DEFAULT_VAR
        if not str(var).isidentifier():
            raise UsageError(f"-v/--var takes a variable name, not {var!r}")
        backends = opt(None, "backends")
        shell = self.shell
        assert shell is not None
        source = shell.transform_cell(code)  # IPython syntax (magics, !cmd) works inside
        try:
            compiled = compile(source, "<kprof cell>" if cell is not None else "<kprof>", "exec")
        except SyntaxError as exc:
            raise UsageError(f"%kprof: the code does not compile: {exc}") from None
        try:
            prof = profile(
                device="no-device" not in opts,
                trace="t" in opts or "print-trace" in opts,
                backends=[b for b in backends.split(",") if b] if backends else None,
            )
            p = prof.__enter__()
        except (KprofError, TypeError, ValueError) as exc:
            raise UsageError(f"%kprof: {exc}") from None
        interrupted = None
        try:
            exec(compiled, shell.user_ns)
        finally:
            try:
                prof.__exit__(*sys.exc_info())
            except KeyboardInterrupt as exc:  # while waiting for the device: p keeps the rest
                p.meta["interrupted"] = INTERRUPTED
                interrupted = exc
            finally:
                shell.user_ns[var] = p  # kept also when the code raised: what ran is recorded
        for path, write in (
            (opt("o", "output"), p.save),
            (opt(None, "html"), p.export_html),
            (opt(None, "trace"), p.export_chrome_trace),
        ):
            if path:
                write(path)
        if interrupted is not None:
            raise interrupted  # the files hold what was resolved; the cell was interrupted
        if "q" not in opts and "quiet" not in opts:
            from IPython.display import display

            display(p)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(KprofMagics)
