"""Launch configurations (CUDA's grid and block, OpenCL's global and local sizes): interned
per profile, one id per distinct value, an int ``config`` column per row.

A plugin hands its launch's configuration as it has it (``rec.launch(..., config=(gsize,
lsize))``: any hashable, no text made per launch). The harvest interns it here, per backend
(two backends may hand equal tuples that mean different things); at the profile's end each
distinct value is turned into text once, by the backend's ``launch_config`` hook (``str()``
when it has none), and the columns then index ``Profile.configs``, one text per distinct text.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend

#: The key of configurations that are text already (a nested profile's, merged ranks').
TEXT = None


class Configs:
    """The distinct launch configurations of one profile, per backend slot.

    ``ids_for(slot)`` is the dict the harvest looks configurations up in (``None`` maps to -1:
    no configuration); ``intern`` adds one. ``values[i]`` is ``(slot, config)``.
    """

    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.values: list[tuple[Any, Any]] = []
        self.ids: dict[Any, dict[Any, int]] = {}

    def ids_for(self, slot: Any) -> dict[Any, int]:
        d = self.ids.get(slot)
        if d is None:
            d = self.ids[slot] = {None: -1}
        return d

    def intern(self, slot: Any, config: Any) -> int:
        """The id of ``config`` handed by the backend of ``slot`` (-1 for None). A value that
        cannot be hashed (a plugin's list) is kept under its ``repr``."""
        d = self.ids_for(slot)
        try:
            i = d.get(config)
        except TypeError:
            config = repr(config)
            i = d.get(config)
        if i is None:
            i = d[config] = len(self.values)
            self.values.append((slot, config))
        return i

    def __len__(self) -> int:
        return len(self.values)


def text_of(
    backend: Backend | None, config: Any, failed: Callable[[BaseException], None] | None
) -> str:
    """A configuration's text: the backend's ``launch_config``, else ``str(config)``
    (``failed`` is told when the hook raises)."""
    if backend is not None and failed is not None and not isinstance(config, str):
        try:
            text = backend.launch_config(backend, config)
        except Exception as exc:
            failed(exc)
            text = None
        if isinstance(text, str):
            return text
    return config if isinstance(config, str) else str(config)


def resolve(
    configs: Configs,
    column: array[int],
    by_slot: dict[Any, Backend],
    failed: Callable[[Backend, BaseException], None],
) -> tuple[list[str], array[int]]:
    """At the end: every distinct configuration as text once, distinct texts once; returns
    the texts and ``column`` rewritten to index them (-1 stays -1)."""
    texts: list[str] = []
    index: dict[str, int] = {}
    remap: list[int] = []
    for slot, config in configs.values:
        b = by_slot.get(slot) if slot is not TEXT else None
        text = text_of(b, config, partial(failed, b) if b is not None else None)
        j = index.get(text)
        if j is None:
            j = index[text] = len(texts)
            texts.append(text)
        remap.append(j)
    if not texts or remap == list(range(len(remap))):
        return texts, column
    remap.append(-1)  # column value -1 indexes the last entry
    return texts, array("q", map(remap.__getitem__, column))
