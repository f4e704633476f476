"""Bounded reads that allocate what a file holds, not what it may hold.

Imports nothing but :mod:`os` (already loaded by the interpreter), so that
the CLI's start-up set may hold it (``ganeti.ssconfstore``; doc/cli-startup.md).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import IO

__all__ = ["READ_CHUNK", "read_limited"]

#: bytes asked for per read once a file's size is used up (or unknown: /proc says 0)
READ_CHUNK = 64 * 1024


def read_limited(fh: IO[bytes], max_size: int) -> bytes:
    """What ``fh`` holds up to its end, but at most ``max_size + 1`` bytes (so that
    the caller can tell a file over ``max_size``).

    Asks for the file's size plus one byte (``fstat``), then for
    :data:`READ_CHUNK` pieces while it grows; a read that returns less than it
    asked for found the end (a buffered binary file reads until its end or the
    size asked), so a regular file takes one call.  Never one ``read(max_size +
    1)``: that allocates a buffer of the limit first, a mapping made and dropped
    on every call (64 MiB for :func:`ganeti.utils.io.read_file`), which inside an
    emulated guest cost 0.4 ms a read (doc/vcluster.md, "Where a guest cluster's
    CPU goes").
    """
    try:
        size = os.fstat(fh.fileno()).st_size
    except (OSError, ValueError):
        size = 0
    parts: list[bytes] = []
    got, want = 0, size + 1 if size else READ_CHUNK
    while got <= max_size:
        asked = min(want, max_size + 1 - got)
        chunk = fh.read(asked)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
        if len(chunk) < asked:
            break
        want = READ_CHUNK
    return parts[0] if len(parts) == 1 else b"".join(parts)
