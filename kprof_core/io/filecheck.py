"""Checks on what a ``.kprof`` file holds: the loader's single gate for untrusted content.

A file is checked whole when it is loaded (``storage.load``), so that everything downstream
(reports, the trace, the exports, ``kprof merge``, ``kprof show``) can trust a loaded
``Profile``: any problem is one ``CorruptProfileError`` naming the file and the field.

What is checked, beyond lengths and checksums (``storage.py``):

- sizes before inflating: the declared rows must fit in what the file could hold
  (``MAX_INFLATION``), and a column never inflates past its declared rows;
- times (every time column, ``start_ns``/``end_ns``, clock offsets and shifts) lie within
  ``±TIME_LIMIT`` ns (73 years), so that sums of a few of them stay in int64 (the arrays'
  type) when profiles are shifted and merged; a saved profile ended (``end_ns ≥ start_ns``);
- indexes, kinds, flags and byte counts are values kprof writes;
- ``meta``: at most ``MAX_DEPTH`` levels deep, and the keys kprof reads (``host``, ``pid``,
  ``rank``, ``wall_anchor``, ``sources``, ...) of the types it reads them as.
"""

from __future__ import annotations

from array import array
from typing import Any

#: Times are within ±TIME_LIMIT ns: the sum or difference of up to four of them fits in int64.
TIME_LIMIT = 2**61
#: A column's values lie in [-TIME_LIMIT, TIME_LIMIT) exactly when the top three bits of their
#: top (last, little-endian) byte are all equal: checked on the bytes, at memory speed.
_TOP_BYTES_IN_RANGE = bytes(range(0x00, 0x20)) + bytes(range(0xE0, 0x100))
#: The columns' decoded bytes may exceed the file's size at most this many times (plus a
#: megabyte). kprof's own files inflate 8 to 11 times (measured: 100k realistic launches 8.9,
#: a recorded profile of 20k ranges and kernels 10.8; timestamps compress 4-8 fold, small
#: columns far more); only a crafted file (a "zip bomb") asks for more, and is refused before
#: anything is inflated, so loading a file never takes more than ~64 times its size in memory.
MAX_INFLATION = 64
INFLATION_SLACK = 1 << 20
#: How deep ``meta`` may nest (kprof writes three levels).
MAX_DEPTH = 32

_INT = "int"
_STR = "str"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class Checker:
    """Checks on untrusted header values; ``fail`` makes the error that names the file."""

    def __init__(self, name: str, error: type[Exception], saving: bool = False) -> None:
        self.name = name
        self.error = error
        self.saving = saving  # checking a profile about to be saved: what load would refuse

    def fail(self, why: str) -> Exception:
        if self.saving:
            return self.error(f"cannot save: {why}; it could not be loaded back")
        return self.error(f"{self.name}: corrupt kprof file ({why})")

    # -- header fields --------------------------------------------------------------------------

    def get(self, obj: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
        value = obj.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(f"header field {key!r} is missing or of the wrong type")
        return value

    def time(self, value: Any, what: str) -> int:
        """An int within ±TIME_LIMIT."""
        if not _is_int(value) or not -TIME_LIMIT <= value < TIME_LIMIT:
            raise self.fail(f"{what} is not a time in ns within ±2**61: {value!r:.40}")
        return int(value)

    def rows(self, value: Any, key: str, types: tuple[Any, ...]) -> list[list[Any]]:
        """A list of fixed-length rows, each item checked against its type (None: any)."""
        if not isinstance(value, list):
            raise self.fail(f"header field {key!r} is not a list")
        for row in value:
            if not isinstance(row, list) or len(row) != len(types):
                raise self.fail(f"header field {key!r} has a malformed entry {row!r:.80}")
            for item, t in zip(row, types):
                ok = isinstance(item, t) if t is not None else True
                if isinstance(item, bool) and t is not bool:
                    ok = False
                if not ok:
                    raise self.fail(f"header field {key!r} has a malformed entry {row!r:.80}")
        return value

    # -- columns --------------------------------------------------------------------------------

    def inflation(self, decoded: int, file_size: int) -> None:
        if decoded > MAX_INFLATION * file_size + INFLATION_SLACK:
            raise self.fail(
                f"its row counts need {decoded} bytes of columns, more than {MAX_INFLATION} times "
                f"the file's {file_size} bytes: kprof never writes such a file (a decompression "
                f"bomb?), so nothing was inflated"
            )

    def times_in_range(self, raw: bytes | bytearray, what: str) -> None:
        """Every little-endian int64 of ``raw`` lies within ±TIME_LIMIT."""
        if raw[7::8].translate(None, _TOP_BYTES_IN_RANGE):
            raise self.fail(f"column {what} holds a time beyond ±2**61 ns")

    def index(self, col: array[int], limit: int, what: str) -> None:
        if col and (min(col) < 0 or max(col) >= limit):
            raise self.fail(f"a {what} index is out of range")

    def between(self, col: array[int], lo: int, hi: int, what: str) -> None:
        if col and (min(col) < lo or max(col) > hi):
            raise self.fail(f"column {what} holds a value outside {lo}..{hi}")

    # -- meta -----------------------------------------------------------------------------------

    def depth(self, value: Any, what: str) -> None:
        """At most MAX_DEPTH levels of lists and dicts (checked without recursion)."""
        stack = [(value, 0)]
        while stack:
            v, d = stack.pop()
            if isinstance(v, (list, dict)):
                if d >= MAX_DEPTH:
                    raise self.fail(f"{what} nests deeper than {MAX_DEPTH} levels")
                stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))

    def meta(self, meta: Any, nqueues: int, nthreads: int, what: str = "meta") -> None:
        """The keys of ``meta`` that kprof reads have the types it reads them as."""
        if not isinstance(meta, dict):
            raise self.fail(f"{what} is not an object")
        self.depth(meta, what)
        types: dict[str, tuple[str, bool]] = {
            # key: (type, None allowed)
            "host": (_STR, False),
            "pid": (_INT, False),
            "rank": (_INT, True),
            "world_size": (_INT, True),
            "rank_source": (_STR, False),
            "host_clock": (_STR, False),
            "clock_domain": (_STR, False),
            "clock_error_ns": (_INT, True),
        }
        for key, (kind, optional) in types.items():
            if key not in meta:
                continue
            v = meta[key]
            if v is None and optional:
                continue
            if kind == _STR and not isinstance(v, str):
                raise self.fail(f"{what}[{key!r}] is not a string: {v!r:.40}")
            if kind == _INT and (not _is_int(v) or not -TIME_LIMIT <= v < TIME_LIMIT):
                raise self.fail(f"{what}[{key!r}] is not an integer within ±2**61: {v!r:.40}")
        for key in ("rank", "world_size", "clock_error_ns"):
            if _is_int(meta.get(key)) and meta[key] < 0:
                raise self.fail(f"{what}[{key!r}] is negative")
        for key in ("clock_offset_ns", "test_clock_skew_ns"):
            if key in meta:
                self.time(meta[key], f"{what}[{key!r}]")
        if "clock_drift" in meta and (
            isinstance(meta["clock_drift"], bool)
            or not isinstance(meta["clock_drift"], (int, float))
        ):
            raise self.fail(f"{what}['clock_drift'] is not a number")
        if "clock_reference" in meta and not isinstance(meta["clock_reference"], bool):
            raise self.fail(f"{what}['clock_reference'] is not true or false")
        if "wall_anchor" in meta:
            anchor = meta["wall_anchor"]
            if not isinstance(anchor, dict):
                raise self.fail(f"{what}['wall_anchor'] is not an object")
            for key in ("wall_ns", "perf_ns", "bracket_ns"):
                if key in anchor:
                    # Wall-clock times are ns since 1970: 2**62 lasts until 2116.
                    v = anchor[key]
                    if not _is_int(v) or not -2 * TIME_LIMIT <= v < 2 * TIME_LIMIT:
                        raise self.fail(
                            f"{what}['wall_anchor'][{key!r}] is not an integer "
                            f"within ±2**62: {v!r:.40}"
                        )
        if "sources" in meta:
            self._sources(meta, nqueues, nthreads, what)

    def _sources(self, meta: dict[str, Any], nqueues: int, nthreads: int, what: str) -> None:
        """A merged profile: who each source was, and which source owns each queue and thread."""
        sources = meta["sources"]
        if not isinstance(sources, list) or not sources:
            raise self.fail(f"{what}['sources'] is not a non-empty list")
        for k, s in enumerate(sources):
            where = f"{what}['sources'][{k}]"
            if not isinstance(s, dict):
                raise self.fail(f"{where} is not an object")
            if not isinstance(s.get("label"), str) or not isinstance(s.get("method"), str):
                raise self.fail(f"{where} lacks its label or method")
            self.time(s.get("offset_ns"), f"{where}['offset_ns']")
            err = s.get("error_ns")
            if err is not None and self.time(err, f"{where}['error_ns']") < 0:
                raise self.fail(f"{where}['error_ns'] is negative")
            m = s.get("meta")
            if isinstance(m, dict) and "sources" in m:
                raise self.fail(f"{where} is itself merged (kprof flattens merged sources)")
            self.meta(m, nqueues, nthreads, f"{where}['meta']")
        for key, n in (("queue_source", nqueues), ("thread_source", nthreads)):
            owners = meta.get(key)
            if (
                not isinstance(owners, list)
                or len(owners) != n
                or not all(_is_int(o) and 0 <= o < len(sources) for o in owners)
            ):
                raise self.fail(
                    f"{what}[{key!r}] does not give a source for each of the {n} "
                    f"{key.split('_')[0]}s"
                )
