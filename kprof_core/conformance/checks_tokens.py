"""The checks of tokens: read as ordered ints, recorded without blocking, released exactly
once, never reused before the device reached them."""

from __future__ import annotations

import threading

from kprof_core.conformance.driver import Driver
from kprof_core.conformance.rules import Skipped, fail
from kprof_core.conformance.watch import Once


class TokenChecks(Driver):
    """The token checks, one method each; each raises ``ConformanceError`` or ``Skipped``."""

    def check_tokens_read(self) -> str:
        """Three tokens in order around two workload steps: their times are ints, ordered,
        additive, and the two reading hooks agree."""
        self.require_timestamps()
        tol = self.s.tolerance_ns
        with self.s.queue_context():
            self._current()
            t1 = self._record()
            self.workload()
            t2 = self._record()
            self.workload()
            t3 = self._record()
            try:
                self._wait_done(t3)
                e12, d12 = self._read(t1, t2)
                e23, d23 = self._read(t2, t3)
                e13, d13 = self._read(t1, t3)
            finally:
                self._release(t1, t2, t3)
        if e12 is not None and e23 is not None and e13 is not None:
            for name, el in (("t1→t2", e12), ("t2→t3", e23), ("t1→t3", e13)):
                if el < 0:
                    raise fail(
                        "elapsed_time",
                        "is non-negative for ordered tokens on one queue",
                        f"{name} gave {el} ns",
                    )
            if abs(e12 + e23 - e13) > tol:
                raise fail(
                    "elapsed_time",
                    "adds up for ordered tokens on one queue",
                    f"t1→t2 {e12} ns + t2→t3 {e23} ns != t1→t3 {e13} ns (tolerance {tol} ns)",
                )
        if d12 is not None and d23 is not None and d13 is not None:
            for name, (b, e) in (("t1→t2", d12), ("t2→t3", d23), ("t1→t3", d13)):
                if e < b:
                    raise fail(
                        "device_times",
                        "begins before it ends for ordered tokens",
                        f"{name} gave begin {b} > end {e}",
                    )
            if d12[0] != d13[0] or d23[1] != d13[1]:
                raise fail(
                    "device_times",
                    "is consistent with elapsed_time",
                    f"one token gave two times: t1 began at {d12[0]} and {d13[0]}, "
                    f"t3 ended at {d23[1]} and {d13[1]}",
                )
            if e13 is not None:
                for name, et, (b, en) in (("t1→t2", e12, d12), ("t1→t3", e13, d13)):
                    if et is not None and abs((en - b) - et) > tol:
                        raise fail(
                            "device_times",
                            "is consistent with elapsed_time",
                            f"{name}: device_times gives {en - b} ns, elapsed_time "
                            f"{et} ns (tolerance {tol} ns)",
                        )
        return f"elapsed over two steps: {e13 if e13 is not None else d13} ns"

    def check_record_does_not_block(self) -> str:
        """With the queue held, ``record_timestamp`` returns and its token is not done; once
        the queue goes, the token completes."""
        self.require_timestamps()
        if self.s.stall is None:
            raise Skipped(
                "no stall(): give the kit a way to hold the queue to check that "
                "record_timestamp does not block"
            )
        with self.s.queue_context():
            self._current()
            release = Once(self.s.stall())
            watchdog = threading.Timer(self.s.blocking_timeout_s, release)
            watchdog.daemon = True
            watchdog.start()
            try:
                tok = self._record()
            finally:
                watchdog.cancel()
            try:
                if release.called_by_watchdog(watchdog):
                    raise fail(
                        "record_timestamp",
                        "does not block",
                        f"it had not returned after {self.s.blocking_timeout_s:g} s "
                        f"with the queue held (it returned once the queue was let go): "
                        f"the timestamp must be taken when the device reaches it",
                    )
                done = self._done(tok)
                if done:
                    raise fail(
                        "timestamp_done",
                        "is not done before the device reached it",
                        "it said True for a token recorded behind work that cannot "
                        "run yet (the queue was held)",
                    )
            finally:
                release()
            try:
                self._wait_done(tok)
            finally:
                self._release(tok)
        return "record_timestamp returned with the queue held; the token completed after"

    def check_tokens_released_once(self) -> str:
        self.require_available()
        with self._ledger() as ledger:
            self._profile(self.s.steps)
        self._drain()
        ledger.raise_violations()
        ledger.check_all_released()
        return f"{ledger.count} tokens, each released once"

    def check_tokens_not_reused_early(self) -> str:
        """Two profiles on a held queue: the first gives up its tokens (its timeout passes);
        the second must not get any of them back before the device reached them."""
        self.require_timestamps()
        if self.s.stall is None:
            raise Skipped(
                "no stall(): give the kit a way to hold the queue to check that "
                "tokens given up are not reused before the device reached them"
            )
        with self._ledger() as ledger:
            with self.s.queue_context():
                release = Once(self.s.stall())
            # A plugin that waits for the device would wait forever on a held queue.
            watchdog = threading.Timer(self.s.blocking_timeout_s + 4 * self.s.give_up_s, release)
            watchdog.daemon = True
            watchdog.start()
            left = 0
            try:
                for _ in range(2):
                    p = self._profile(2, timeout=self.s.give_up_s)
                    left += p.meta.get("tokens_left", 0)
            finally:
                watchdog.cancel()
                release()
        self._drain()
        if release.called_by_watchdog(watchdog):
            raise fail(
                "record_timestamp",
                "does not block",
                "a profile on a held queue did not end until the queue was let go: "
                "record_timestamp or a capture wrapper waited for the device",
            )
        ledger.raise_violations()
        if (
            "timestamp_done" in self.b.implemented
        ):  # else reads abandoned at the timeout keep theirs
            ledger.check_all_released(left)
        return f"{ledger.undone_releases} tokens released before the device reached them; none reused early"
