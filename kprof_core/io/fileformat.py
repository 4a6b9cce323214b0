"""The ``.kprof`` file format: its constants, its errors, and the byte shuffle both ways use.

A ``.kprof`` file is a small JSON header followed by the record columns as raw 64-bit
integers. Loading parses JSON and copies integers; nothing in a file is ever executed (no
pickle), and every length, checksum and index is checked before a ``Profile`` is built.

Format version 1 (all integers little-endian)::

    offset  size  field
    0       8     magic b"\\x89KPROF\\r\\n" (the \\x89 and \\r\\n catch text-mode mangling)
    8       4     format version (uint32) = 1
    12      4     header length H (uint32)
    16      4     CRC-32 of the header bytes (uint32)
    20      H     header: JSON, ASCII (non-ASCII characters are \\u-escaped)
    20+H    ...   the columns, back to back, in the order the header lists them

The header holds ``meta``, ``trace``, ``backends``, ``start_ns``, ``end_ns``, the interned
``names``, ``queues`` ([backend, device, label, device_key]), ``threads`` ([ident, name,
task]), ``errors`` ([row, message]), ``clocks`` ([key, backend, device, method, error_ns,
shift_ns]), ``counts`` ({"device": rows, "host": rows}) and ``columns``: for each column its
``table`` ("device" or "host"), ``name``, ``encoding``, stored ``size`` in bytes and ``crc32``
of the stored bytes. Encodings: ``raw`` (int64 little-endian), or ``shuffle8+zlib`` (byte
``k`` of every value grouped together for k = 0..7, then zlib-compressed: timestamps share
their high bytes, so this compresses them about eight-fold, and decodes at memory speed).

Format version 2 is version 1 followed by the device-memory table (``Profile.memory``): the
header adds ``counts["memory"]`` (events) and ``memory`` ({"devices": [[backend, device]],
"sites": [str]}), and ``columns`` ends with the table ``"memory"``'s columns ``time``,
``device``, ``kind``, ``nbytes``, ``address``, ``site`` (``MemoryTable.COLUMNS``). It is written
only for profiles that hold memory events (others are version 1, as before), and read by
``read_v2.py``, which hands the version 1 part to ``read_v1``.

Format version 3 is version 2 (or 1, without memory) with launch sites: the header adds
``sites`` ([file, line, function], the ``Site``s the columns index), and the device and host
tables each a ``site`` column (-1: none known). It is written only for profiles that hold
sites (``profile(sites=True)``), and read by ``read_v3.py``, which takes the sites off and
hands the rest to the reader of version 2 or 1.

Format version 4 is version 3 with launch stacks: the header adds ``frames`` ([file, line,
function], every distinct frame of the stacks) and ``stacks`` (per stack, the indexes of its
frames in ``frames``, outermost first), and the device and host tables each a ``stack``
column (indexes into ``stacks``, -1: none). It is written only for profiles that hold stacks
(``profile(stacks=True)``), and read by ``read_v4.py``, which takes the stacks off and hands
the rest to ``read_v3``.

Version 4 also holds launch configurations and throughput, where a profile has them: the
header adds ``configs`` ([str], the texts the column indexes) and the device table a ``config``
column (-1: none) and a ``flops`` column (the floating-point operations the user said a row
does, -1: not said). A version 4 file holds stacks, configurations or both; ``read_v4.py`` takes off what it
holds and hands the rest to the reader of version 3, 2 or 1.

The file ends right after the last column. Readers are kept per format version, so files of
older versions stay readable when the format changes; a newer version is refused with a
message saying to upgrade kprof.
"""

from __future__ import annotations

import os
import struct
from typing import IO, Union

from kprof_core.data.records import HostTable
from kprof_core.host.backend import KprofError

MAGIC = b"\x89KPROF\r\n"
FORMAT_VERSION = 4  # the newest version written (1 to 3 where a profile needs no more)
#: The device columns version 4 added (read_v4.py takes them off, older readers never see them).
V4_DEVICE_COLUMNS = ("config", "flops")
PREFIX = struct.Struct("<8sI")  # magic, version
V1_FRAME = struct.Struct("<II")  # header length, header crc32
RAW, SHUFFLED = "raw", "shuffle8+zlib"
# Every kind of host row (RANGE, MARK, ...): the upper-case int attributes of HostTable.
#: Columns of host-clock times and durations (checked to lie within ±2**61 ns).
TIME_COLUMNS = {
    "device.launch_start",
    "device.launch_end",
    "device.start",
    "device.duration",
    "host.start",
    "host.end",
}
HOST_KINDS = {v for k, v in vars(HostTable).items() if k.isupper() and isinstance(v, int)}

PathOrFile = Union[str, "os.PathLike[str]", IO[bytes]]


class ProfileFileError(KprofError, ValueError):
    """A file could not be read as a kprof profile (the message names the file and why)."""


class NotAProfileError(ProfileFileError):
    """The file is not a kprof profile at all."""


class UnsupportedVersionError(ProfileFileError):
    """The file is a kprof profile of a format version this kprof cannot read."""


class CorruptProfileError(ProfileFileError):
    """The file is a kprof profile, but truncated or damaged."""


# -- the shuffle8 encoding (see above) --------------------------------------------------------


def shuffle(raw: bytes) -> bytes:
    return b"".join(raw[k::8] for k in range(8))


def unshuffle(data: bytes) -> bytearray:
    n = len(data) // 8
    out = bytearray(len(data))
    for k in range(8):
        out[k::8] = data[k * n : (k + 1) * n]
    return out
