# The compiled Perfetto encoder (_perfetto.c). Its Python twin is protowire.track_events, with
# the same signature and the same bytes; protowire.encoder() picks one, checking SIGNATURE.
from collections.abc import Callable
from typing import Any

#: The perfetto_fields.SIGNATURE this module was built with (from _perfetto_fields.h).
SIGNATURE: str

def track_events(
    write: Callable[[bytes], Any],
    items: bytes,
    table: tuple[bytes, ...],
    host: tuple[bytes, ...],
    extras: dict[int, bytes],
    track_uuid: int,
    shift: int,
    flow_base: int,
    sequence: int,
) -> int: ...
