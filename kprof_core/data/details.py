"""``Details``: what a backend said about device rows (``Profile.details``), kept as text or,
for rows delivered column-wise, as columns and a format until a view reads a row."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, MutableMapping, Sequence


class Details(MutableMapping[int, str]):
    """Row -> what a backend said about a device row, formatted only when read.

    Texts set one by one (``details[row] = text``) are kept as they are; rows that arrived
    column-wise (``kprof.plugin.ActivityColumns``) keep their columns and a format string
    (``"grid ({0}, {1}, {2}) block ({3}, {4}, {5})"``) until a view asks for a row."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = {}
        # (first row, row count, format, columns): sorted by first row, never overlapping.
        self._blocks: list[tuple[int, int, str, tuple[Sequence[int], ...]]] = []
        self._firsts: list[int] = []

    def add_block(self, first: int, n: int, fmt: str, columns: tuple[Sequence[int], ...]) -> None:
        """Rows ``first .. first + n - 1`` are described by ``fmt`` over ``columns[k][i]``."""
        if n:
            self._blocks.append((first, n, fmt, columns))
            self._firsts.append(first)

    def _block(self, row: int) -> tuple[int, int, str, tuple[Sequence[int], ...]] | None:
        j = bisect_right(self._firsts, row) - 1
        if j >= 0:
            b = self._blocks[j]
            if row < b[0] + b[1]:
                return b
        return None

    def __getitem__(self, row: int) -> str:
        text = self._texts.get(row)
        if text is not None:
            return text
        b = self._block(row) if type(row) is int else None
        if b is None:
            raise KeyError(row)
        i = row - b[0]
        return b[2].format(*(c[i] for c in b[3]))

    def __contains__(self, row: object) -> bool:
        return row in self._texts or (type(row) is int and self._block(row) is not None)

    def __setitem__(self, row: int, text: str) -> None:
        self._texts[row] = text

    def __delitem__(self, row: int) -> None:
        del self._texts[row]  # rows of blocks are not deleted one by one

    def __iter__(self) -> Iterator[int]:
        rows = set(self._texts)
        for first, n, _f, _c in self._blocks:
            rows.update(range(first, first + n))
        return iter(sorted(rows))

    def __len__(self) -> int:
        return len(self._texts) + sum(b[1] for b in self._blocks if b[0] not in self._texts)

    def renumber(
        self, a: int, b: int, new_row: Callable[[int], int | None], shift: int = 0
    ) -> None:
        """After rows were taken out of the table (``recording/bounds.py``): rows ``a`` to
        ``b - 1`` become ``new_row(i)`` (None: gone), rows from ``b`` on move by ``shift``.
        Blocks wholly outside ``a .. b - 1`` move as blocks; rows of the others become texts."""
        texts: dict[int, str] = {}
        for i, v in self._texts.items():
            j = i if i < a else (new_row(i) if i < b else i + shift)
            if j is not None:
                texts[j] = v
        blocks = []
        for first, n, fmt, cols in self._blocks:
            if first + n <= a:
                blocks.append((first, n, fmt, cols))
            elif first >= b:
                blocks.append((first + shift, n, fmt, cols))
            else:
                for i in range(first, first + n):
                    j = i if i < a else (new_row(i) if i < b else i + shift)
                    if j is not None and i not in self._texts:
                        texts[j] = fmt.format(*(c[i - first] for c in cols))
        self._texts, self._blocks = texts, blocks
        self._firsts = [blk[0] for blk in blocks]
