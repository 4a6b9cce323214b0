"""The pluggy markers of kprof's hooks: ``hookspec`` for the specifications, ``hookimpl`` for
plugins' implementations (``kprof.plugin.hookimpl``)."""

from __future__ import annotations

import pluggy

PROJECT = "kprof"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
