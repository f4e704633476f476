"""The guest cluster master's LUXI socket, forwarded to a socket on the host over SSH.

A ``gnt-*`` command run inside an emulated node pays for a Python start-up
under TCG (seconds on a busy host) before it sends its first byte.  Run on
the host instead, with ``GANETI_ROOTDIR`` set to :attr:`LuxiRelay.root`, the
same command finds the master's socket there: each connection to it is
carried over the kept SSH connection to the master node, where ``socat``
connects it to ``/var/run/ganeti/socket/ganeti-master`` (doc/vcluster.md,
"Guest clusters").  The master is the node found last time while its ssconf
still names itself, else it is looked up again, as :func:`guestcluster.run_gnt`
does.  Only the LUXI socket is there: commands that read the master node's
files or reach other nodes over SSH themselves run on the master.
"""

from __future__ import annotations

import os
import select
import shlex
import socket
import threading
from typing import Any, Callable

from ganeti import errors
from ganeti.pathutils import Paths
from ganeti.utils import unixsock
from tools.harness import guestcluster

__all__ = ["LuxiRelay"]

#: the byte a guarded relay command writes once it found its node the master
_READY = b"\x06"


class LuxiRelay:
    """A listening socket below :attr:`root` whose connections reach the master's LUXI."""

    def __init__(self, gc: guestcluster.GuestCluster, root: str) -> None:
        self.gc = gc
        #: the ``GANETI_ROOTDIR`` of commands that use the relay
        self.root = root
        self.path = Paths(root).master_socket
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        if os.path.exists(self.path):
            os.unlink(self.path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unixsock.bind(self._listener, self.path)   # a long root too
        self._listener.listen(16)
        self._closed = False
        threading.Thread(target=self._accept, name="luxi-relay", daemon=True).start()

    def close(self) -> None:
        """Stop listening (connections being carried end by themselves)."""
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(conn,), name="luxi-relay-conn",
                             daemon=True).start()

    def _open(self) -> tuple[Any, Callable[[], None]]:
        """A channel to ``socat`` connected to the master's socket on the master."""
        target = Paths("/").master_socket
        relay = f"exec socat - UNIX-CONNECT:{shlex.quote(target)}"
        last = guestcluster.last_master(self.gc)
        if last is not None:
            chan, close = guestcluster.exec_on(
                self.gc, last.name, guestcluster.master_guarded(
                    last, f"printf '\\006' && {relay}"))
            if chan.recv(1) == _READY:
                return chan, close
            close()
        master = guestcluster.current_master(self.gc)
        return guestcluster.exec_on(self.gc, master.name, relay)

    def _carry(self, conn: socket.socket) -> None:
        """Copy bytes both ways between ``conn`` and a channel until either side ends."""
        try:
            chan, close = self._open()
        except (errors.GanetiError, OSError):
            conn.close()
            return
        try:
            _pump(conn, chan)
        finally:
            close()
            conn.close()


def _pump(conn: socket.socket, chan: Any) -> None:
    """Copy between a socket and a paramiko channel; an end or error on either stops it."""
    ends = [conn, chan]
    while True:
        readable, _, _ = select.select(ends, [], [])
        for end in readable:
            try:
                data = end.recv(65536)
            except OSError:
                return
            if not data:
                return
            other = chan if end is conn else conn
            try:
                other.sendall(data)
            except OSError:
                return
