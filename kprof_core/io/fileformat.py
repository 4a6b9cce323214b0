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

Format version 5 holds every table with every column, and the header fields they index. The
header adds ``counts["memory"]`` (the device-memory events) and:
``sites`` ([file, line, function], the launch sites the tables' ``site`` columns index);
``frames`` ([file, line, function], every distinct frame of the launch stacks) and ``stacks``
(per stack, the indexes of its frames in ``frames``, outermost first); ``configs`` ([str], the
launch configurations the device table's ``config`` column indexes); and ``memory``
({"devices": [[backend, device]], "sites": [str]}). ``columns`` lists the device table's
``DeviceTable.COLUMNS`` and then ``stack``, the host table's ``HostTable.COLUMNS`` and then
``stack``, then the memory table's ``MemoryTable.COLUMNS`` (``time``, ``device``, ``kind``,
``nbytes``, ``address``, ``site``). In every index column -1 means none (no site, stack or
configuration known); in ``flops``, not said. kprof writes version 5 for a profile that holds
any of these (memory, sites, stacks, configurations, flops) and version 1 otherwise, which
kprof 0.1.0 reads. Versions 2 to 4 were written only by development versions of kprof before
version 5 folded them into one: no release reads them.

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
FORMAT_VERSION = 5  # the newest version written (1 where a profile needs no more)
#: Versions only development versions of kprof wrote (folded into version 5): not read.
PRERELEASE_VERSIONS = frozenset({2, 3, 4})
#: The most frames a stack in a file may hold: what kprof records at most (``stacks=``'s
#: limit). A deeper one is refused, not rendered (a crafted file 8,000 frames deep took 17 s).
MAX_STACK_FRAMES = 256
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
    "memory.time",
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
