"""Sending a large message on a socket that has a timeout: the timeout bounds each piece.

A socket's timeout bounds a whole ``sendall`` (Python >= 3.5), and on a TLS
socket a whole ``write`` too (one deadline for the call).  So with the
node daemon's 5 s request timeout, a 5.6 MB reply (a 4 MiB disk chunk in
base64) fails unless the peer reads more than a megabyte a second, which a
busy master (or a virtual node) does not always do; the peer then sees the
connection close in the middle of the body.

:func:`send_all` sends the message in :data:`PIECE`-byte pieces, each with
the socket's full timeout: the peer must keep reading (a piece per
timeout), not read everything within one.  :class:`PieceWriter` is the
same as a file (the threaded server's ``wfile``).  See doc/protocols/rpc.md,
"The HTTP package".
"""

from __future__ import annotations

import io
import socket
from typing import Any

__all__ = ["send_all", "PieceWriter", "PIECE"]

#: bytes sent with one timeout: a peer reading 52 KB/s keeps up with a 5 s timeout
PIECE = 256 * 1024


def send_all(sock: socket.socket, data: bytes | bytearray | memoryview, piece: int = PIECE) -> None:
    """Send all of ``data`` on ``sock``, the socket's timeout applying to each ``piece`` bytes.

    Raises what ``sendall`` raises (:class:`TimeoutError` when the peer read
    nothing of a piece within the timeout).
    """
    if len(data) <= piece:
        sock.sendall(data)
        return
    with memoryview(data) as view, view.cast("B") as octets:
        for start in range(0, len(octets), piece):
            sock.sendall(octets[start:start + piece])


class PieceWriter(io.BufferedIOBase):
    """A write-only file on a socket that sends through :func:`send_all` (unbuffered)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        """Send ``data`` whole; its length."""
        send_all(self._sock, data)
        with memoryview(data) as view:
            return view.nbytes

    def fileno(self) -> int:
        return self._sock.fileno()
