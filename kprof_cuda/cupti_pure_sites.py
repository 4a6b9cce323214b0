"""The pure-Python reader's part of CUPTI's callback API (launch sites): the twin of
``_cupti_src/sites.c``'s ``on_callback`` (see ``cupti_sites``). A ctypes callback: CUPTI's call takes
the GIL for it, so a thread without a site scope entered pays that and returns."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from . import cupti_abi as abi
from .cupti_lib import CALLBACK, Cupti

__all__ = ["PureSites"]


class PureSites:
    """Subscribing, the callback, and the (correlation id, raw site id) pairs it keeps until
    the reader's ``take`` joins them (``take_sites``)."""

    cupti: Cupti

    def __init__(self) -> None:
        # ctypes keeps no reference to the callback: the reader does, for the process's life.
        self._callback_cb = CALLBACK(self._callback)
        self._site_fn: Any = None
        self._site_tls = threading.local()
        self._sites: list[tuple[int, int]] = []
        self._cb_counts = {"callbacks": 0, "site_calls": 0, "sites": 0}

    def subscribe(self) -> tuple[int, int]:
        """``cuptiSubscribe`` with this reader's callback: (CUptiResult, handle)."""
        handle = ctypes.c_void_p()
        fn = self.cupti.Subscribe
        if fn is None:
            return -1, 0
        code = fn(ctypes.byref(handle), self._callback_cb, None)
        return int(code), int(handle.value or 0)

    def set_sites(self, fn: Any) -> None:
        self._site_fn = fn

    def site_scope(self, delta: int) -> int:
        depth = max(0, getattr(self._site_tls, "depth", 0) + delta)
        self._site_tls.depth = depth
        return depth

    def callback_stats(self) -> dict[str, int]:
        return dict(self._cb_counts)

    def _callback(self, userdata: Any, domain: int, cbid: int, data: Any) -> None:
        # ctypes took the GIL to get here: a thread without a site scope returns at once.
        counts = self._cb_counts
        counts["callbacks"] += 1
        try:
            fn = self._site_fn
            if fn is None or not data or domain not in (abi.DOMAIN_DRIVER, abi.DOMAIN_RUNTIME):
                return
            if getattr(self._site_tls, "depth", 0) <= 0:
                return
            cb = abi.CALLBACK
            if ctypes.c_uint32.from_address(data + cb["callbackSite"]).value != abi.API_ENTER:
                return
            corr = ctypes.c_uint32.from_address(data + cb["correlationId"]).value
            counts["site_calls"] += 1
            site = fn()  # launch_site(): its walk skips this frame (kprof's)
            if type(site) is int and site >= 0:
                self._sites.append((corr, site))
                counts["sites"] += 1
        except BaseException:  # never raise into CUPTI
            pass

    def take_sites(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The pairs kept since the last call, as (correlation ids, raw site ids)."""
        sites, self._sites = self._sites, []
        if not sites:
            return None, None
        pairs = np.array(sites, np.int64).reshape(-1, 2)
        return pairs[:, 0].astype(np.uint64), pairs[:, 1]
