"""noded's kept connections: when one child may answer more than one request.

Why: a request child costs the node about 6 ms of CPU (the fork, its
copy-on-write page faults, the TLS handshake), far more than answering a
read-only query such as ``all_instances_info``; a live instance list of
200 nodes paid that 200 times (doc/scale.md).

The rules (doc/protocols/rpc.md, "Kept connections"):

* Only on request: the client sends ``Connection: keep-alive``; HTTP/1.1's
  implicit keep-alive is not enough, so every other client still gets one
  request per connection.
* Only the read-only procedures of :data:`rpc.defs.KEEPALIVE_CALLS` and
  the job-queue replication writes of :data:`rpc.defs.KEEPALIVE_WRITE_CALLS`
  (fenced per request, no after-response work), and only after a ``200``
  reply with no after-response work: once a request outside these sets
  arrives on a kept connection it is refused (400) and the connection
  closed.  So every other procedure that changes the node still runs in a
  fresh child of its own, and a kept child never ran one.
* Bounded: an idle kept connection is closed after ``keepalive_timeout``
  seconds, and after :data:`MAX_REQUESTS` requests.
* Reclaimed: a kept child holds one of the daemon's request slots; when a
  connection has to wait for a slot, the parent sends ``SIGUSR1`` to its
  request children (:data:`RECLAIM_SIGNAL`): an idle kept child closes its
  connection at once, a busy one after its current reply.

This module holds the policy and the child's signal state; the loop is
``NodedRequestHandler.handle`` in :mod:`ganeti.server.noded`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from typing import Any

from ganeti.http import framing
from ganeti.rpc import defs

__all__ = ["wants_keepalive", "may_share", "may_keep", "reply_headers", "reclaim", "Reclaim",
           "Reclaimed",
           "DEFAULT_KEEPALIVE_TIMEOUT", "MAX_REQUESTS", "RECLAIM_SIGNAL"]

#: seconds a kept connection may stay idle between two requests
DEFAULT_KEEPALIVE_TIMEOUT = 15.0
#: requests one kept connection (one child) serves at most
MAX_REQUESTS = 1000
#: sent by the parent to its request children when a connection waits for a slot
RECLAIM_SIGNAL = signal.SIGUSR1


def _procedure(head: framing.RequestHead) -> str:
    return head.target.split("?", 1)[0].lstrip("/")


def wants_keepalive(head: framing.RequestHead) -> bool:
    """True if the client asked for a kept connection, explicitly (``Connection: keep-alive``)."""
    connection = head.headers.get("connection", "")
    return "keep-alive" in {t.strip() for t in connection.lower().split(",")}


def may_share(head: framing.RequestHead) -> bool:
    """True if the request may run in a child that already answered one (a POST of
    a read-only procedure or of a job-queue replication write)."""
    procedure = _procedure(head)
    return head.method == "POST" and (procedure in defs.KEEPALIVE_CALLS
                                      or procedure in defs.KEEPALIVE_WRITE_CALLS)


def may_keep(head: framing.RequestHead, status: int, served: int, *, timeout: float,
             refusing: bool) -> bool:
    """Whether a connection stays open after the reply ``status`` to ``head``, the
    ``served``-th request before it on the connection (0 for the first).

    ``refusing`` is the child's own reason to close (it answers busy, the
    parent reclaimed its slot, the request left after-response work, or it
    is not a request child at all).
    """
    return (status == 200 and timeout > 0 and not refusing and wants_keepalive(head)
            and may_share(head) and served + 1 < MAX_REQUESTS)


def reclaim(pids: Iterable[int]) -> set[int]:
    """In the parent: send :data:`RECLAIM_SIGNAL` to the request children ``pids``; those signalled."""
    sent = set()
    for pid in pids:
        try:
            os.kill(pid, RECLAIM_SIGNAL)
        except ProcessLookupError:
            continue
        sent.add(pid)
    return sent


def reply_headers(timeout: float, left: int) -> dict[str, str]:
    """The headers of a reply after which the connection stays open
    (``Connection: keep-alive`` comes from the framing)."""
    return {"Keep-Alive": f"timeout={int(timeout)}, max={left}"}


class Reclaimed(Exception):
    """Raised by the signal handler in an idle kept child: close the connection now."""


class Reclaim:
    """A request child's view of :data:`RECLAIM_SIGNAL`: asked to give its slot back?

    :meth:`install` (in the child, at once after the fork; the parent
    ignores the signal, so a child never dies of it before) sets the
    handler.  While :attr:`idle` (waiting for the next request on a kept
    connection) the handler raises :class:`Reclaimed`; otherwise it sets
    :attr:`requested` and the child closes after its current reply.
    """

    def __init__(self) -> None:
        self.requested = False
        self.idle = False

    def install(self) -> None:
        """Handle :data:`RECLAIM_SIGNAL` in this process."""
        signal.signal(RECLAIM_SIGNAL, self._handler)

    def _handler(self, signum: int, frame: Any) -> None:
        self.requested = True
        if self.idle:
            self.idle = False
            raise Reclaimed()
