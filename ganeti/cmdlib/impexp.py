"""Master side of disk transfers: start, follow and clean up (doc/exports.md).

A :class:`Transfer` sends one disk image from one node to another node's
daemon (``impexp_send`` on the sending node).  :func:`run_transfers` runs
them one after the other, polls ``impexp_status`` every ``poll`` seconds
and writes typed progress entries to the job log (op ``export``,
``import`` or ``disk-copy``; throttled, and always a final one, with the
error when it failed: doc/progress.md, "Progress entries"), shows the
transfer in the instance's ``jobs`` runtime field while it runs, ends
each transfer with a text line (size, rate, checksum), and raises
:class:`errors.OpExecError` at the first failure.  Whatever happens, a
started transfer is aborted if it still runs and its state is removed on
the sending node; the receiving side drops its partial data by itself.
A sending node that does not answer for ``lost_after`` seconds counts as
dead; a transfer that moves no byte for ``stall_after`` seconds
(:data:`STALL_TIMEOUT`) before all its bytes are sent is stopped and fails
(after that, the sender's own I/O timeout bounds the wait for the
receiver's answer); before its first byte a transfer gets
:data:`START_TIMEOUT` (the sending process starts, connects within its own
connect timeout, and the receiver opens its side); and a job killed while a
transfer runs (``gnt-job cancel --kill``) stops it at the next poll, so
the job ends ``canceled`` instead of waiting for the copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ganeti import errors
from ganeti.impexp import stream as diskstream
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit

__all__ = ["Transfer", "run_transfers", "node_address", "POLL_INTERVAL", "LOST_AFTER",
           "STALL_TIMEOUT", "START_TIMEOUT", "Stall"]

POLL_INTERVAL = 0.25
LOST_AFTER = 10.0
#: seconds a transfer may go without moving a byte before it is stopped
STALL_TIMEOUT = 60.0
#: seconds a transfer may take to move its first byte (a loaded sending node
#: takes a while to start the sending process and the receiver to open its side)
START_TIMEOUT = 120.0
#: ``sleep(seconds)``: True when the job was interrupted (killed) meanwhile
Sleep = Callable[[float], "bool | None"]


@dataclass
class Transfer:
    """One image to move: ``source`` on ``src_node`` to ``dest`` on ``dst_node``."""

    label: str
    src_node: str
    source: dict[str, Any]
    dst_node: str
    dest: dict[str, Any]
    result: dict[str, Any] | None = None
    #: the progress entries' ``op``, and the instance whose ``jobs``
    #: runtime field shows the transfer (None: none)
    op: str = "disk-copy"
    instance: str | None = None
    #: ``(host, port)`` of the receiver when it is not ``dst_node``'s daemon (a
    #: listener of another cluster; ``dst_node`` then only names it in messages)
    address: tuple[str, int] | None = None


def node_address(lu: LogicalUnit[Any], node_name: str) -> tuple[str, int]:
    """The ``(address, port)`` of a node daemon, as node RPC reaches it."""
    (entry,) = lu.require_rpc().resolver([node_name])
    _, address, port, offline = entry
    if offline:
        raise errors.OpExecError(f"Node {node_name} is offline")
    return address, port


def _status(lu: LogicalUnit[Any], node: str, transfer_id: str) -> dict[str, Any] | None:
    res = lu.require_rpc().call_impexp_status([node], ids=[transfer_id]).get(node)
    if res is None or res.failed or not isinstance(res.payload, list) or not res.payload:
        raise errors.RpcError(res.fail_msg if res is not None and res.fail_msg else "no answer")
    status = res.payload[0]
    return status if isinstance(status, dict) else None


@dataclass
class Stall:
    """Pure progress watch: :meth:`seen` reports bytes done at a time; True when no byte
    moved for ``after`` seconds (for ``first`` seconds, when larger, while none has
    moved yet)."""

    after: float
    started: float
    done: int = -1
    first: float = 0.0

    def seen(self, done: int, now: float) -> bool:
        if done != self.done:
            self.done, self.started = done, now
            return False
        limit = max(self.after, self.first) if done <= 0 else self.after
        return now - self.started >= limit


def _run_one(lu: LogicalUnit[Any], xfer: Transfer, feedback_fn: FeedbackFn, *,
             clock: Callable[[], float], sleep: Sleep, poll: float,
             lost_after: float, stall_after: float, start_after: float) -> dict[str, Any]:
    address, port = xfer.address or node_address(lu, xfer.dst_node)
    transfer_id = lu.require_rpc().call_impexp_send(
        xfer.src_node, source=xfer.source, dest=xfer.dest, host=address, port=port,
    ).one(xfer.src_node, f"{xfer.label}: cannot start the transfer on"
                          f" {xfer.src_node}")
    finished = False
    try:
        with lu.progress_reporter(xfer.op, clock=clock, instance=xfer.instance,
                                  device=xfer.label) as reporter:
            last_answer = clock()
            stall = Stall(stall_after, last_answer, first=start_after)

            def pause() -> None:
                if sleep(poll):
                    raise errors.OpExecError(f"{xfer.label}: transfer interrupted: the job"
                                             " was killed")
            while True:
                try:
                    status = _status(lu, xfer.src_node, transfer_id)
                except errors.RpcError as exc:
                    if clock() - last_answer >= lost_after:
                        raise errors.OpExecError(f"{xfer.label}: node {xfer.src_node} stopped"
                                                 f" answering during the transfer: {exc}"
                                                 ) from None
                    pause()
                    continue
                last_answer = clock()
                if status is None:
                    raise errors.OpExecError(f"{xfer.label}: the transfer vanished on node"
                                             f" {xfer.src_node}")
                state = status.get("state")
                done, total = int(status.get("done") or 0), status.get("total")
                elapsed = float(status.get("elapsed") or 0.0)
                reporter.update(done, int(total or 0),
                                rate=done / elapsed if elapsed > 0 else None)
                if state == "done":
                    finished = True
                    break
                if state == "failed":
                    finished = True
                    raise errors.OpExecError(f"{xfer.label}: {status.get('error')}")
                # once all is sent, the sender's own I/O timeout bounds the wait for the
                # receiver's answer (its OS script may still be writing)
                sending = not total or done < int(total)
                if stall.seen(done, clock()) and sending:
                    waited = stall_after if done > 0 else max(stall_after, start_after)
                    raise errors.OpExecError(f"{xfer.label}: no data moved for"
                                             f" {waited:.0f} s (after {done} bytes);"
                                             " the transfer was stopped")
                pause()
        feedback_fn(f"{xfer.label}: {diskstream.format_progress(done, total, elapsed)}"
                    f" in {elapsed:.1f} s, SHA-256 {str(status.get('sha256'))[:16]}..."
                    " checked on arrival")
        return status
    finally:
        rpc = lu.require_rpc()
        if not finished:
            rpc.call_impexp_abort([xfer.src_node], transfer_id=transfer_id)
        res = rpc.call_impexp_cleanup([xfer.src_node], transfer_id=transfer_id).get(xfer.src_node)
        if res is None or res.failed:
            lu.LogWarning(f"Could not remove the state of transfer {transfer_id} on"
                          f" {xfer.src_node}: {res.fail_msg if res else 'no answer'}")


def run_transfers(lu: LogicalUnit[Any], transfers: list[Transfer], feedback_fn: FeedbackFn, *,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Sleep | None = None, poll: float = POLL_INTERVAL,
                  lost_after: float = LOST_AFTER, stall_after: float = STALL_TIMEOUT,
                  start_after: float = START_TIMEOUT) -> None:
    """Run ``transfers`` in order, filling each one's ``result``; see the module docstring.

    ``sleep`` waits between polls and answers True when the job was
    killed meanwhile (default: the job's ``wait_interrupt``).
    """
    wait: Sleep = sleep if sleep is not None else lu.proc.wait_interrupt
    for xfer in transfers:
        feedback_fn(f"{xfer.label}: sending from {xfer.src_node} to {xfer.dst_node}")
        xfer.result = _run_one(lu, xfer, feedback_fn, clock=clock, sleep=wait, poll=poll,
                               lost_after=lost_after, stall_after=stall_after,
                               start_after=start_after)
