"""Replacing library attributes for capture, and putting back the very same objects."""

from __future__ import annotations

from typing import Any


class Patcher:
    """Remembers every attribute it replaced, to restore them exactly (identity, not equality).

    Restoring is idempotent and tolerant: an attribute someone else replaced after us is left
    alone (we would otherwise undo their patch), and reported.
    """

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, Any, bool]] = []

    def patch(self, owner: Any, attr: str, replacement: Any) -> Any:
        """Set ``owner.attr = replacement``; returns the original."""
        had = attr in vars(owner) if isinstance(owner, type) else hasattr(owner, attr)
        original = getattr(owner, attr)
        setattr(owner, attr, replacement)
        self._saved.append((owner, attr, original, replacement, had))
        return original

    @property
    def active(self) -> bool:
        return bool(self._saved)

    def restore(self) -> list[str]:
        """Undo every patch, last first; returns the attributes that had been replaced again."""
        conflicts = []
        while self._saved:
            owner, attr, original, replacement, had = self._saved.pop()
            current = getattr(owner, attr, None)
            if current is not replacement:
                conflicts.append(f"{getattr(owner, '__name__', owner)}.{attr}")
                continue
            if had:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)
        return conflicts
