"""Sending a large message on a socket that has a timeout: the timeout bounds each piece.

A socket's timeout bounds a whole ``sendall`` (Python >= 3.5), and on a TLS
socket a whole ``write`` too (one deadline for the call).  So with the
node daemon's 5 s request timeout, a 5.6 MB reply (a 4 MiB disk chunk in
base64) fails unless the peer reads more than a megabyte a second, which a
busy master (or a virtual node) does not always do; the peer then sees the
connection close in the middle of the body.

:func:`send_all` sends the message in :data:`PIECE`-byte pieces, each with
the socket's full timeout: the peer must keep up a piece per timeout, not
read everything within one.  The whole message still has a deadline, the
timeout plus its size at :data:`MIN_RATE`, so a peer that reads a trickle
cannot hold a server's worker for hours.  :class:`PieceWriter` is the same
as a file (the threaded server's ``wfile``).  See doc/protocols/rpc.md,
"The HTTP package".
"""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable
from typing import Any

__all__ = ["send_all", "PieceWriter", "PIECE", "MIN_RATE"]

#: bytes sent with one timeout: a peer reading 52 KB/s keeps up with a 5 s timeout
PIECE = 256 * 1024
#: bytes per second below which a whole message is given up (after the timeout itself)
MIN_RATE = 128 * 1024


def send_all(sock: socket.socket, data: bytes | bytearray | memoryview, piece: int = PIECE, *,
             clock: Callable[[], float] = time.monotonic) -> None:
    """Send all of ``data`` on ``sock``, the socket's timeout applying to each ``piece`` bytes.

    Raises what ``sendall`` raises: :class:`TimeoutError` when a piece was not
    all sent within the timeout, or when the whole message took longer than
    the timeout plus its size at :data:`MIN_RATE`.
    """
    with memoryview(data) as view, view.cast("B") as octets:
        size = octets.nbytes
        if size <= piece:
            sock.sendall(octets)
            return
        timeout = sock.gettimeout()
        deadline = None if timeout is None else clock() + timeout + size / MIN_RATE
        for start in range(0, size, piece):
            if deadline is not None and start and clock() > deadline:
                raise TimeoutError(f"Sending {size} bytes: {start} sent in the time allowed"
                                   f" (the peer reads slower than {MIN_RATE} bytes/s)")
            sock.sendall(octets[start:start + piece])


class PieceWriter(io.BufferedIOBase):
    """A write-only file on a socket that sends through :func:`send_all` (unbuffered)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        """Send ``data`` whole; its length in bytes."""
        if self.closed:
            raise ValueError("write to a closed PieceWriter")
        with memoryview(data) as view:
            send_all(self._sock, view)
            return view.nbytes

    def fileno(self) -> int:
        return self._sock.fileno()
