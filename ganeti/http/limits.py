"""The bounds a server core keeps on connections and requests: one value for every core.

The node daemon's forking HTTPS core (:mod:`ganeti.http.forking`), RAPI's
threaded core (:mod:`ganeti.http.threaded`) and the master's LUXI server
(:mod:`ganeti.server.luxiserver`, ETX framing) take the same :class:`Limits`; each reads the fields that apply to its engine
(said per field below).  The defaults are the node daemon's; the LUXI
server's are :data:`ganeti.server.luxiserver.DEFAULT_LIMITS`.  A plain
value with no I/O (doc/protocols/rpc.md, "The HTTP package";
doc/protocols/luxi.md, "Timeouts and limits").
"""

from __future__ import annotations

from dataclasses import dataclass

from ganeti import constants
from ganeti.http import handshake

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """The bounds the server core keeps on connections and requests (seconds, bytes, counts)."""

    #: requests served at once: noded's children serving a peer that
    #: completed its handshake, LUXI's and the threaded core's worker threads
    #: (more wait in order)
    max_children: int = 64
    #: seconds an established connection waits for a slot before it is answered busy (noded)
    busy_wait: float = 0.5
    #: seconds a peer may stay silent while a request is due: noded, each
    #: read (or write) of a request; LUXI, a connection that has not
    #: completed a request yet
    request_timeout: float = 5.0
    #: seconds a connection that completed a request may idle before the
    #: next (noded: 0 is one request per connection)
    keepalive_timeout: float = 15.0
    #: seconds from the accept to the end of the TLS handshake (the accept
    #: loop of both HTTPS cores)
    handshake_timeout: float = handshake.HANDSHAKE_TIMEOUT
    #: handshakes pending in the accept loop at once (beyond: the oldest is closed)
    max_handshakes: int = handshake.DEFAULT_MAX_PENDING
    #: spares that took a ClientHello and are in their handshake, at once (noded)
    max_child_handshakes: int = 4
    #: the largest request body (noded) or message (LUXI, one ETX frame)
    max_body_size: int = 128 * 1024 * 1024
    #: open connections at once; a new one beyond closes the one idle the
    #: longest (LUXI) or is closed at once (threaded); noded's caps are
    #: ``max_handshakes`` and ``max_children``
    max_connections: int = 4096
    #: bytes of partial requests buffered for all connections together;
    #: beyond, the connection with the most is closed (LUXI)
    max_buffered: int = 2 * constants.LUXI_MAX_MESSAGE

    @property
    def max_busy_children(self) -> int:
        """Short-lived children answering busy, at once."""
        return max(1, self.max_children // 4)
