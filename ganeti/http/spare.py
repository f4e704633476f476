"""Spare children of the forking server (noded): forked ahead of time, each serves one connection.

Why: to take the fork and the child's warm-up (copy-on-write page faults)
off a request's critical path (``--spare-children N``, default 1; 0 forks
only on demand).

How: the parent keeps ``count`` idle children, each holding one end of a
UNIX socketpair (its *channel*).  An accepted connection is passed to a
spare over its channel (``SCM_RIGHTS``); the spare serves exactly that one
request like any other request child and exits.  The parent forks
replacements without waiting for them; a spare that dies unexpectedly is
reaped and replaced after a short back-off.  On shutdown the parent closes
the channels, sends SIGTERM and reaps the spares (a bounded wait, SIGKILL
as a last resort); if the parent dies abruptly the spares see end-of-file
on their channel and exit.

Interface (parent side: :class:`SparePool`, used from the accepting thread
only, never blocking except in :meth:`SparePool.stop`)::

    pool = SparePool(count, run_spare)   # run_spare(channel) runs in each forked spare
    pool.refill()                        # fork until `count` spares are idle
    pid = pool.hand_over(connection)     # the spare that took it (now a request child), or None
    pool.reap()                          # collect dead spares; call on SIGCHLD
    pool.refill_delay()                  # None when full, else seconds until refill() may fork
    pool.stop()                          # shutdown
    pool.detach()                        # in any child the parent forks: forget the spares

Spare side: ``run_spare(channel)`` gets its end of the channel and must
not return (it ends with ``os._exit``; a return or an exception exits 1).
It waits with :func:`receive_connection`; :func:`set_comm` names the
process (``noded-spare`` while idle or in its handshake, ``noded-child``
once its handshake is done and it holds a request slot; the children the
parent forks for established connections are ``noded-child`` too), which
is how tests and operators tell them apart.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from typing import Callable

__all__ = ["SparePool", "receive_connection", "set_comm", "reaped", "SPARE_COMM", "CHILD_COMM",
           "SPARE_RETRY_DELAY"]

logger = logging.getLogger(__name__)

#: ``/proc/<pid>/comm`` of an idle spare
SPARE_COMM = "noded-spare"
#: ``/proc/<pid>/comm`` of a child serving a request (its handshake done)
CHILD_COMM = "noded-child"
#: seconds before forking again after a failed fork or a spare's death
SPARE_RETRY_DELAY = 0.2


def reaped(pid: int) -> bool:
    """Reap child ``pid`` if it has exited; True if it is gone (never waits)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return bool(done)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def set_comm(name: str) -> None:
    """Set this process's name in ``/proc/self/comm`` (ignored where unsupported)."""
    try:
        with open("/proc/self/comm", "w") as fh:
            fh.write(name)
    except OSError:
        pass


def receive_connection(channel: socket.socket) -> socket.socket | None:
    """In a spare: wait for the connection the parent hands over, and close ``channel``.

    Returns None when the parent closed the channel (shutting down or gone).
    """
    try:
        _, fds, _, _ = socket.recv_fds(channel, 16, 1)
    except OSError:
        fds = []
    channel.close()
    if not fds:
        return None
    for fd in fds[1:]:
        os.close(fd)
    return socket.socket(fileno=fds[0])


class SparePool:
    """The parent's idle spares: pid -> the parent's end of the spare's channel.

    ``clock`` (monotonic seconds) times the back-off after a failed fork or
    a spare's death.  Spares do not count as request children; once
    :meth:`hand_over` gave one a connection it is the caller's to track
    (and to reap) like any other request child.
    """

    def __init__(self, count: int, run_spare: Callable[[socket.socket], None], *,
                 clock: Callable[[], float] = time.monotonic,
                 retry_delay: float = SPARE_RETRY_DELAY) -> None:
        #: how many idle spares to keep
        self.count = max(0, count)
        self._run_spare = run_spare
        self._clock = clock
        self._retry_delay = retry_delay
        self._idle: dict[int, socket.socket] = {}
        self._retired: set[int] = set()      # killed, not yet reaped
        self._retry_at = 0.0

    def __len__(self) -> int:
        """The number of idle spares."""
        return len(self._idle)

    @property
    def pids(self) -> list[int]:
        """The idle spares' pids."""
        return list(self._idle)

    def refill(self) -> None:
        """Fork spares until ``count`` are idle (never waits for them; backs off after a failed fork)."""
        while len(self._idle) < self.count and self._clock() >= self._retry_at:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                pid = os.fork()
            except OSError as exc:
                logger.error("Cannot fork a spare child: %s", exc)
                ours.close()
                theirs.close()
                self._retry_at = self._clock() + self._retry_delay
                return
            if pid == 0:
                try:
                    ours.close()
                    self._run_spare(theirs)   # ends with os._exit
                finally:
                    os._exit(1)
            theirs.close()
            self._idle[pid] = ours

    def refill_delay(self) -> float | None:
        """None when no spare is missing, else the seconds until :meth:`refill` may fork (>= 0)."""
        if len(self._idle) >= self.count:
            return None
        return max(0.0, self._retry_at - self._clock())

    def hand_over(self, connection: socket.socket) -> int | None:
        """Pass ``connection`` to an idle spare; its pid, or None (nothing done) if none took it.

        A spare whose channel fails is killed (and reaped later by
        :meth:`reap`).  The caller still owns and closes its copy of
        ``connection``.
        """
        while self._idle:
            pid = next(iter(self._idle))
            channel = self._idle.pop(pid)
            try:
                socket.send_fds(channel, [b"R"], [connection.fileno()])
            except OSError as exc:
                logger.warning("Spare child %d unusable (%s); killing it", pid, exc)
                _kill(pid, signal.SIGKILL)
                self._retired.add(pid)
                continue
            finally:
                channel.close()
            return pid
        return None

    def reap(self) -> None:
        """Reap killed spares, and idle spares that died (replaced after the back-off)."""
        for pid in list(self._retired):
            if reaped(pid):
                self._retired.discard(pid)
        for pid in list(self._idle):
            if reaped(pid):
                self._idle.pop(pid).close()
                logger.warning("Spare child %d died unexpectedly; replacing it", pid)
                self._retry_at = self._clock() + self._retry_delay

    def stop(self, timeout: float = 2.0) -> None:
        """Close the channels, SIGTERM the spares and reap them (bounded wait, then SIGKILL).

        Forks no more afterwards (``count`` stays; :meth:`refill` would).
        """
        pids = set(self._idle) | self._retired
        for pid, channel in self._idle.items():
            channel.close()
            _kill(pid, signal.SIGTERM)
        self._idle = {}
        self._retired = set()
        deadline = time.monotonic() + timeout
        killed = False
        while pids:
            pids = {pid for pid in pids if not reaped(pid)}
            if not pids:
                break
            if time.monotonic() >= deadline:
                if killed:
                    logger.warning("Spare children %s not reaped", sorted(pids))
                    break
                for pid in pids:
                    _kill(pid, signal.SIGKILL)
                killed = True
                deadline = time.monotonic() + timeout
            time.sleep(0.005)

    def detach(self) -> None:
        """In a child the parent forked: close the parent's channel ends, forget every spare, fork none."""
        for channel in self._idle.values():
            channel.close()
        self._idle = {}
        self._retired = set()
        self.count = 0
