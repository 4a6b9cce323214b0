"""Launch sites: the line of the user's code behind a record, as reports and files show it."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Site:
    """Where in the user's code a record was launched: the innermost Python frame that was
    not kprof's, a plugin's, or a library's the user does not own (``profile(sites=...)``).

    ``file``: the code's file name as Python knows it (``co_filename``); ``line``: the line
    number; ``function``: the function's (qualified) name.
    """

    file: str
    line: int
    function: str

    @property
    def label(self) -> str:
        """``"train.py:42 step"``: the file's base name, the line and the function."""
        return f"{os.path.basename(self.file)}:{self.line} {self.function}"

    @property
    def location(self) -> str:
        """``"/path/to/train.py:42"``: the whole file name and the line."""
        return f"{self.file}:{self.line}"
