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

This module holds the policy; the child's signal state (:class:`Reclaim`,
re-exported here) belongs to the server core :mod:`ganeti.http.forking`;
the loop is ``NodedRequestHandler.handle`` in :mod:`ganeti.server.noded`.
"""

from __future__ import annotations

from ganeti.http import framing
from ganeti.http.forking import RECLAIM_SIGNAL, Reclaim, Reclaimed, reclaim
from ganeti.rpc import defs

__all__ = ["wants_keepalive", "may_share", "may_keep", "reply_headers", "reclaim", "Reclaim",
           "Reclaimed",
           "DEFAULT_KEEPALIVE_TIMEOUT", "MAX_REQUESTS", "RECLAIM_SIGNAL"]

#: seconds a kept connection may stay idle between two requests
DEFAULT_KEEPALIVE_TIMEOUT = 15.0
#: requests one kept connection (one child) serves at most
MAX_REQUESTS = 1000


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


def reply_headers(timeout: float, left: int) -> dict[str, str]:
    """The headers of a reply after which the connection stays open
    (``Connection: keep-alive`` comes from the framing)."""
    return {"Keep-Alive": f"timeout={int(timeout)}, max={left}"}
