"""A one-shot Unix socket rendezvous with another local process.

:func:`wait_for_peer` creates a listening socket in a new private
temporary directory, hands its path out (``announce``), waits for one
process to connect and then for it to send a byte or close the
connection.  ``OP_TEST_JQUEUE`` uses it to let ``gnt-debug
test-jobqueue`` see the job in a given state (doc/compat.md).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable

from ganeti.utils import unixsock

__all__ = ["wait_for_peer"]


def wait_for_peer(announce: Callable[[str], None], *, connect_timeout: float,
                  confirm_timeout: float) -> None:
    """Announce a fresh socket path, wait for a peer to connect, then to confirm.

    Raises :class:`TimeoutError` naming the step that took too long, or
    another :class:`OSError`; the socket and its directory are removed in
    every case.
    """
    tmpdir = tempfile.mkdtemp(prefix="ganeti-jqtest-")
    path = os.path.join(tmpdir, "sock")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            unixsock.bind(sock, path)   # a long TMPDIR too
            sock.listen(1)
            announce(path)
            sock.settimeout(connect_timeout)
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                raise TimeoutError(f"no client connected within {connect_timeout:g}s") \
                    from None
        with conn:
            conn.settimeout(confirm_timeout)
            try:
                conn.recv(1)
            except TimeoutError:
                raise TimeoutError(f"the client did not confirm within {confirm_timeout:g}s") \
                    from None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
