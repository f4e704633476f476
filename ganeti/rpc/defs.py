"""The node RPC procedures: the table every end reads, and its helpers.

A procedure is declared once, as its backend function decorated with
``@procedure(TIMEOUT_CLASS, fenced=..., offline=..., keepalive=...)``
(:mod:`ganeti.rpc.procedure`): its name, its arguments in wire order with
their types (the parameters after ``ctx`` and their annotations) and its
one-line doc (the docstring's first paragraph).  ``python -m
ganeti.rpc.gen`` reads those functions and writes two committed modules:
the table ``rpc/table.py`` that this module serves as :data:`CALLS` and the
flag sets (:data:`FENCED_CALLS`, :data:`OFFLINE_CALLS`,
:data:`KEEPALIVE_CALLS`, :data:`KEEPALIVE_WRITE_CALLS`), and the master's
typed ``call_<name>(node_or_nodes, *, <arguments>)`` stubs
(``rpc/stubs.py``, inherited by ``RpcRunner``).  So the master, the CLI and
the fakes read the table without importing the backend; the node daemon
dispatches through it (``server/noded.py`` -> ``backend.get_function(name)``).
Only procedures listed here are reachable on a node.

Adding a procedure (doc/design/contracts.md, "Adding a node procedure"):

1. in one of the ``backend`` domain modules (``backend.DOMAIN_MODULES``),
   ``@procedure(NORMAL, fenced=True)`` over
   ``def node_powercycle(ctx: NodeContext, hypervisor: str, hvparams: dict)``
   with a docstring whose first paragraph is the one-line doc, listed in
   the module's ``__all__``;
2. ``python -m ganeti.rpc.gen`` to regenerate ``rpc/table.py`` and ``rpc/stubs.py``.

``test/rpc/test_rpc_defs.py`` checks that the committed table is what the
decorated functions declare; ``test/rpc/test_rpc_stubs.py`` that the
committed stubs are fresh.

Timeout policy
--------------
Each row names a timeout *class*; the master waits at most that long for a
node's answer (connect, TLS, request and reply together):

========  =========  ===================================================
class     seconds    use for
========  =========  ===================================================
urgent    60         must answer at once (version, master_node_name)
fast      300        small local reads/writes (file upload, queue update)
normal    900        work that may touch disks or run scripts (hooks)
slow      3600       long local work (node verify on a big node)
4hrs      14400      e.g. disk wipes, exports
1day      86400      e.g. very long imports
========  =========  ===================================================

The numbers in :data:`TIMEOUTS` are defaults; ``RpcRunner(timeouts=...)``
overrides them per class (tests shorten them to fractions of a second).

Argument types
--------------
Arguments are positional on the wire (a JSON list, in the order of the
backend function's parameters) and named by those parameters (the stubs
take them by keyword).  A type is an annotation of the one validator
of every wire, :mod:`ganeti.wiretypes`: here ``str, int, float, bool, list,
dict``, or one of them ``| None``.  ``int`` refuses booleans, ``float``
accepts integers.  :func:`check_args` validates a decoded argument list
against a row with it; both sides use it.

Paths on the wire
-----------------
Node roots differ (a virtual cluster runs many nodes on one machine), so
file names travel in *canonical* form: the path as it would be with root
``/`` (``/var/lib/ganeti/config.data``).  :func:`to_canonical` and
:func:`from_canonical` convert; they are pure string functions.

Master epoch
------------
A master's runner sends ``POST /<procedure>?epoch=N&master=NAME``
(:func:`epoch_query`).  The node daemon checks the epoch before running a
procedure of :data:`FENCED_CALLS` (the ones that change the node's state)
and refuses one older than the newest it has accepted, with a message
starting with :data:`FENCED_PREFIX` (doc/design/failover.md, "Fencing").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ganeti import errors, wiretypes
from ganeti.rpc import table as _table

__all__ = [
    "FENCED_CALLS", "FENCED_PREFIX", "OFFLINE_CALLS", "KEEPALIVE_CALLS", "KEEPALIVE_WRITE_CALLS", "epoch_query", "parse_epoch_query",
    "URGENT", "FAST", "NORMAL", "SLOW", "TMO_4HRS", "TMO_1DAY", "TIMEOUTS",
    "scaled_timeout", "scaled_timeouts",
    "RpcCall", "CALLS", "check_args", "to_canonical", "from_canonical",
]

URGENT = "urgent"
FAST = "fast"
NORMAL = "normal"
SLOW = "slow"
TMO_4HRS = "4hrs"
TMO_1DAY = "1day"
TIMEOUTS: dict[str, float] = {
    URGENT: 60.0, FAST: 300.0, NORMAL: 900.0, SLOW: 3600.0,
    TMO_4HRS: 4 * 3600.0, TMO_1DAY: 86400.0,
}


def scaled_timeout(seconds: float, scale: float, floor: float) -> float:
    """``seconds`` under ``--rpc-timeout-scale`` ``scale``, never below ``floor``
    (doc/protocols/rpc.md, "Timeouts"): unchanged at scale 1, else
    ``max(floor, seconds * scale)`` (a floor above ``seconds`` is ``seconds``)."""
    if scale == 1.0:
        return seconds
    return max(min(floor, seconds), seconds * scale)


def scaled_timeouts(scale: float) -> dict[str, float] | None:
    """The timeout classes of :data:`TIMEOUTS` times ``scale`` (no floor), or None at 1."""
    return {k: v * scale for k, v in TIMEOUTS.items()} if scale != 1.0 else None


ArgType = Any  # an annotation of ganeti.wiretypes


@dataclass(frozen=True)
class RpcCall:
    """One node procedure: its name, named typed arguments, timeout class, doc."""

    name: str
    args: tuple[tuple[str, ArgType], ...]
    timeout: str
    doc: str

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(a[0] for a in self.args)


def _row(name: str, args: list[tuple[str, ArgType]], timeout: str, doc: str) -> RpcCall:
    if timeout not in TIMEOUTS:
        raise ValueError(f"Unknown timeout class {timeout!r} for {name}")
    return RpcCall(name, tuple(args), timeout, doc)


#: every node procedure, in the generated table's order (``rpc/table.py``,
#: written by ``python -m ganeti.rpc.gen`` from the ``@procedure`` backend functions)
CALLS: dict[str, RpcCall] = {name: _row(name, list(args), timeout, doc)
                             for name, args, timeout, doc in _table.ROWS}

#: procedures that change a node's state (``@procedure(fenced=True)``): the
#: node refuses them when they carry an older master epoch than the newest it
#: accepted
FENCED_CALLS: frozenset[str] = _table.FENCED
#: procedures sent to nodes marked offline too (``offline=True``; the runner
#: answers every other one for such a node itself): an offline node still
#: counts among the master lease's voters until it is recorded powered off
#: (doc/design/failover.md, "Lease voters")
OFFLINE_CALLS: frozenset[str] = _table.OFFLINE
#: how a node's refusal of an old epoch starts (the master recognises it)
FENCED_PREFIX = "Fenced:"
#: read-only procedures (``keepalive=True``, not fenced) that may share a
#: kept connection, and so a node daemon child, with earlier requests of this
#: set (doc/protocols/rpc.md, "Kept connections"); every other procedure runs
#: in a fresh child of its own
KEEPALIVE_CALLS: frozenset[str] = _table.KEEPALIVE
#: the job-queue replication writes (``keepalive=True, fenced=True``) that may
#: also share a kept connection (doc/protocols/rpc.md, "Kept connections"):
#: fenced per request like on a connection of their own, no after-response
#: work, and the same request sent again at once (its kept connection closed
#: before the reply) changes nothing more, as the master sends a candidate's
#: writes one at a time
KEEPALIVE_WRITE_CALLS: frozenset[str] = _table.KEEPALIVE_WRITE


def check_args(call: RpcCall, args: Any) -> str | None:
    """Why ``args`` does not fit ``call`` (a readable message), or None if it does."""
    if not isinstance(args, (list, tuple)):
        return f"{call.name}: arguments must be a JSON list, not {type(args).__name__}"
    if len(args) != len(call.args):
        return (f"{call.name}: expected {len(call.args)} argument(s)"
                f" ({', '.join(call.arg_names) or 'none'}), got {len(args)}")
    for (name, tp), value in zip(call.args, args):
        try:
            wiretypes.check_value(tp, value, name, max_items=None)
        except errors.ParameterError as exc:
            return f"{call.name}: {exc.args[0]}"
    return None


def epoch_query(epoch: int, master: str) -> str:
    """The query string a master adds to a procedure name: ``?epoch=N&master=NAME``."""
    from urllib.parse import quote
    return f"?epoch={int(epoch)}&master={quote(master, safe='')}"


def parse_epoch_query(target: str) -> tuple[int, str]:
    """``(epoch, master)`` from a request target (``(0, "")`` without one).

    A malformed epoch counts as 0 (the oldest): it can never pass a fence.
    """
    _, sep, query = target.partition("?")
    if not sep:
        return 0, ""
    from urllib.parse import parse_qs
    fields = parse_qs(query, max_num_fields=4)
    try:
        epoch = int(fields.get("epoch", ["0"])[0])
    except ValueError:
        epoch = 0
    return max(epoch, 0), fields.get("master", [""])[0][:255]


def to_canonical(root: str, path: str) -> str:
    """The canonical (root ``/``) form of ``path`` lying below ``root``.

    ``to_canonical("/tmp/n1", "/tmp/n1/var/lib/ganeti/x")`` ->
    ``"/var/lib/ganeti/x"``.  Raises ``ValueError`` when ``path`` is not
    below ``root``.
    """
    root = os.path.abspath(root)        # (normalised, like path)
    path = os.path.abspath(path)
    if root == os.sep:
        return path
    if path == root:
        return os.sep
    if not path.startswith(root + os.sep):
        raise ValueError(f"{path} is not below {root}")
    # both normalised: what follows the root is the canonical path (a job file
    # goes to every candidate's lane, so this runs for each file of each request)
    return path[len(root):]


def from_canonical(root: str, canonical: str) -> str:
    """The path of canonical ``canonical`` on a node whose root is ``root``.

    The result is normalised; ``..`` cannot climb above ``root``.
    """
    rel = os.path.normpath(os.sep + canonical).lstrip(os.sep)
    return os.path.join(os.path.abspath(root), rel) if rel not in ("", ".") else os.path.abspath(root)
