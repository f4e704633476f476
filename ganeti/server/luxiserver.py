"""The LUXI socket server of the master daemon: one selector loop, threads only for requests.

Why: a thread per connection let 64 idle connections (the old cap, each
kept for the 300 s idle timeout) lock every client out, ``gnt-*``
included.  Here an idle connection costs a socket and a small buffer in
the loop's selector; only a connection with a complete request in hand
takes a worker thread, for as long as its requests run (so a
``WaitForJobChange`` long poll holds one, as it must).

Limits: one :class:`ganeti.http.limits.Limits`, the bounds value the HTTP
cores take too (defaults :data:`DEFAULT_LIMITS`, set by ``ganeti-masterd``
options; doc/protocols/luxi.md).  The fields it reads:

* ``max_connections`` (``--max-clients``, default 4096) connections at
  once.  A new connection beyond that closes the connection idle the
  longest (one that never completed a request first); the LUXI client
  reconnects transparently before its next call.  Only when every
  connection has a request running is the new one refused with a
  ``LuxiError`` ("Too many concurrent LUXI connections").
* ``request_timeout`` (``--new-client-timeout``, default 10 s): a
  connection that has not yet completed a request is closed after that
  long without data.
* ``keepalive_timeout`` (``--client-timeout``, default 300 s): a
  connection that has completed a request is closed after that long idle
  between requests.
* ``max_body_size`` (``--max-message``, default
  :data:`constants.LUXI_MAX_MESSAGE`): a larger frame gets a
  ``ProtocolError`` response and the connection is closed (the stream can
  no longer be trusted).
* ``max_buffered`` (``--max-buffered``, default twice
  :data:`constants.LUXI_MAX_MESSAGE`): all connections' partial frames
  together; beyond that the connection with the most buffered input gets
  a ``ProtocolError`` and is closed.  The buffer of a connection that
  received a large frame is dropped once the frame is handled, and the C
  heap is trimmed, so memory goes back.
* ``max_children`` (default 256): requests running at once (worker
  threads); more wait for a worker in arrival order.

Requests of one connection run one after the other, in order; while one
runs nothing more is read from that connection.  :meth:`serve_forever`
runs the loop (main thread); :meth:`shutdown` stops it from any thread;
requests already running finish, and their replies are sent.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import queue
import selectors
import socket
import threading
import time
from typing import Callable, Generic, Protocol, TypeVar

from ganeti import constants, errors, luxi
from ganeti.http import sending
from ganeti.http.limits import Limits
from ganeti.server.tuning import release_memory
from ganeti.utils import unixsock

__all__ = ["MasterServer", "Dispatcher", "DEFAULT_LIMITS", "Limits", "link_socket_alias"]

logger = logging.getLogger(__name__)

#: the LUXI server's bounds unless ``ganeti-masterd``'s options say otherwise
DEFAULT_LIMITS = Limits(max_connections=4096, keepalive_timeout=300.0, request_timeout=10.0,
                        max_body_size=constants.LUXI_MAX_MESSAGE,
                        max_buffered=2 * constants.LUXI_MAX_MESSAGE, max_children=256)
#: seconds a reply may take to be written (the client reads it)
SEND_TIMEOUT = 60.0
#: frames at least this large get their buffer dropped and the heap trimmed after use
LARGE_FRAME = 1024 * 1024
_RECV_SIZE = 65536
#: seconds an idle worker thread waits for work before it exits
_WORKER_IDLE = 30.0
_T = TypeVar("_T")


class Dispatcher(Protocol):
    """What the server needs: one request frame in, one response frame out (never raises)."""

    def handle(self, frame: bytes) -> bytes: ...


class _Workers(Generic[_T]):
    """Daemon threads running ``fn(item)``: started on demand up to ``limit``, ending when idle.

    Daemon threads, so that a long poll still running does not hold up the
    process at exit.  Items beyond ``limit`` running wait in arrival order.
    """

    def __init__(self, fn: Callable[[_T], None], limit: int) -> None:
        self._fn = fn
        self._limit = max(1, limit)
        self._queue: queue.SimpleQueue[_T] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0

    def submit(self, item: _T) -> None:
        with self._lock:
            self._queued += 1
            spawn = self._queued > self._idle and self._threads < self._limit
            if spawn:
                self._threads += 1
        self._queue.put(item)
        if spawn:
            threading.Thread(target=self._run, name="luxi-worker", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            try:
                item = self._queue.get(timeout=_WORKER_IDLE)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    if not self._queued:
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            self._fn(item)


class _Conn:
    """One client connection (owned by the loop while idle, by one worker while busy)."""

    __slots__ = ("sock", "buffer", "frames", "served", "last_active", "large")

    def __init__(self, sock: socket.socket, max_message: int, now: float) -> None:
        self.sock = sock
        self.buffer = luxi.FrameBuffer(max_message)
        self.frames: collections.deque[bytes] = collections.deque()
        #: has completed a request (gets the longer idle timeout)
        self.served = False
        self.last_active = now
        #: a large frame went through: drop the buffer and trim after it
        self.large = False


def _insert_by_idle_time(idle: collections.OrderedDict[_Conn, None], conn: _Conn) -> None:
    """Add ``conn`` to ``idle`` (oldest ``last_active`` first) in its place.

    Workers hand connections back in the order they finish, which under
    load is not the order their answers went out; the few entries newer
    than ``conn`` at the tail move behind it.
    """
    idle[conn] = None
    newer = []
    for other in reversed(idle):
        if other is conn:
            continue
        if other.last_active <= conn.last_active:
            break
        newer.append(other)
    for other in reversed(newer):
        idle.move_to_end(other)


def link_socket_alias(alias: str, target: str) -> bool:
    """Make ``alias`` a symbolic link to the socket ``target`` (by its bare
    name when both are in one directory); True when done.

    Clients connect through it as to ``target`` itself.  A link already
    there is replaced atomically; anything else at ``alias`` (another
    daemon's socket, a file) is left alone and False returned, with a
    warning (doc/compat.md, "LUXI sockets").
    """
    if os.path.lexists(alias) and not os.path.islink(alias):
        logger.warning("Not linking %s to %s: something else is there", alias, target)
        return False
    same_dir = os.path.dirname(os.path.abspath(alias)) == os.path.dirname(os.path.abspath(target))
    tmp = f"{alias}.new-{os.getpid()}"
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.basename(target) if same_dir else target, tmp)
        os.replace(tmp, alias)
    except OSError as exc:
        logger.warning("Cannot link %s to %s: %s", alias, target, exc)
        return False
    return True


class MasterServer:
    """The LUXI server on the UNIX socket ``path``; see the module docstring."""

    def __init__(self, path: str, dispatcher: Dispatcher, *,
                 limits: Limits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.dispatcher = dispatcher
        self.limits = limits
        self.max_clients = max(1, limits.max_connections)
        self.client_timeout = limits.keepalive_timeout
        self.new_client_timeout = limits.request_timeout
        self.max_message = limits.max_body_size
        self.max_buffered = max(limits.max_buffered, limits.max_body_size)
        self.stopping = False
        self._clock = clock
        os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o117)
        try:
            unixsock.bind(self.socket, path)   # a path of any length
        finally:
            os.umask(old)
        os.chmod(path, 0o660)
        self.socket.listen(1024)
        self.socket.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._workers: _Workers[_Conn] = _Workers(self._work, limits.max_children)
        # idle connections by last activity, oldest first: never served / served
        self._idle_new: collections.OrderedDict[_Conn, None] = collections.OrderedDict()
        self._idle_known: collections.OrderedDict[_Conn, None] = collections.OrderedDict()
        self._busy: set[_Conn] = set()
        self._returned: collections.deque[_Conn] = collections.deque()
        self._buffered = 0
        self._accept_paused_until: float | None = None
        self._done = threading.Event()
        self._done.set()

    # --- public ---------------------------------------------------------------
    @property
    def connections(self) -> int:
        """Open client connections (idle and busy)."""
        return len(self._idle_new) + len(self._idle_known) + len(self._busy)

    @property
    def idle_connections(self) -> int:
        """Open connections with no request running."""
        return len(self._idle_new) + len(self._idle_known)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Run the loop until :meth:`shutdown` (at most ``poll_interval`` between checks)."""
        self._done.clear()
        sel = self._selector
        sel.register(self.socket, selectors.EVENT_READ, "accept")
        sel.register(self._wake_r, selectors.EVENT_READ, "wakeup")
        try:
            while not self.stopping:
                events = sel.select(timeout=self._timeout(poll_interval))
                self._take_back()
                for key, _ in events:
                    if key.data == "accept":
                        self._accept_all()
                    elif key.data == "wakeup":
                        self._drain_wakeup()
                    elif isinstance(key.data, _Conn):
                        self._read(key.data)
                self._take_back()
                self._expire()
                self._resume_accept()
        finally:
            self._done.set()

    def shutdown(self) -> None:
        """Stop the loop (from another thread) and wait until it has left."""
        self.stopping = True
        self._wake()
        self._done.wait(10)

    def server_close(self) -> None:
        """Close the idle connections and the listening socket.

        Requests still running finish in their (daemon) threads; their
        connections are closed once they have answered.
        """
        self.stopping = True
        for conn in [*self._idle_new, *self._idle_known, *self._returned]:
            self._close(conn)
        self._selector.close()
        self.socket.close()
        self._wake_r.close()
        self._wake_w.close()

    # --- loop -----------------------------------------------------------------
    def _timeout(self, poll_interval: float) -> float:
        now = self._clock()
        deadlines = [now + poll_interval]
        for idle, timeout in ((self._idle_new, self.new_client_timeout),
                              (self._idle_known, self.client_timeout)):
            for conn in idle:
                deadlines.append(conn.last_active + timeout)
                break
        if self._accept_paused_until is not None:
            deadlines.append(self._accept_paused_until)
        return max(0.0, min(deadlines) - now)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass   # already awake (full) or closing

    def _drain_wakeup(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _accept_all(self) -> None:
        for _ in range(256):
            try:
                sock, _ = self.socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE) and self._evict_idle():
                    continue
                if exc.errno in (errno.ECONNABORTED, errno.EINTR):
                    continue
                logger.error("LUXI accept failed: %s", exc)
                self._pause_accept()
                return
            self._admit(sock)

    def _pause_accept(self) -> None:
        self._selector.unregister(self.socket)
        self._accept_paused_until = self._clock() + 0.1

    def _resume_accept(self) -> None:
        if self._accept_paused_until is not None and self._clock() >= self._accept_paused_until:
            self._accept_paused_until = None
            self._selector.register(self.socket, selectors.EVENT_READ, "accept")

    def _admit(self, sock: socket.socket) -> None:
        if self.connections >= self.max_clients and not self._evict_idle():
            try:
                sock.setblocking(False)
                sock.send(luxi.encode_response(False, errors.LuxiError(
                    "Too many concurrent LUXI connections, try again later")))
            except OSError:
                pass
            sock.close()
            return
        sock.setblocking(False)
        conn = _Conn(sock, self.max_message, self._clock())
        self._idle_new[conn] = None
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _evict_idle(self) -> bool:
        """Make room: close the connection idle the longest; False if none is idle.

        A candidate that has input waiting is not idle: its request is read
        (and dispatched) instead, or it is closed if the peer has gone (which
        makes room too).
        """
        self._take_back()
        for _ in range(64):
            heads = [next(iter(idle)) for idle in (self._idle_new, self._idle_known) if idle]
            if not heads:
                return False
            conn = min(heads, key=lambda c: c.last_active)
            try:
                waiting = conn.sock.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                logger.info("LUXI connection limit (%d) reached; closing the connection idle"
                            " the longest", self.max_clients)
                self._close(conn)
                return True
            except OSError:
                waiting = b""
            if not waiting:
                self._close(conn)
                return True
            self._read(conn)
            if conn.sock.fileno() < 0:
                return True
        return False

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        conn.last_active = self._clock()
        idle = self._idle_known if conn.served else self._idle_new
        idle.move_to_end(conn)
        before = conn.buffer.pending
        try:
            frames = conn.buffer.feed(data)
        except errors.ProtocolError as exc:
            self._buffered += conn.buffer.pending - before   # _close takes it off again
            self._refuse(conn, exc)
            return
        self._buffered += conn.buffer.pending - before
        if frames:
            conn.frames.extend(frames)
            if max(len(f) for f in frames) >= LARGE_FRAME:
                conn.large = True
            self._dispatch(conn)
        elif self._buffered > self.max_buffered:
            largest = max([*self._idle_new, *self._idle_known], key=lambda c: c.buffer.pending)
            self._refuse(largest, errors.ProtocolError(
                f"LUXI input buffers full ({self.max_buffered} bytes across all connections);"
                " closing the connection with the most"))

    def _refuse(self, conn: _Conn, exc: errors.GanetiError) -> None:
        try:
            conn.sock.send(luxi.encode_response(False, exc))
        except OSError:
            pass
        self._close(conn)

    def _forget_idle(self, conn: _Conn) -> None:
        self._idle_new.pop(conn, None)
        self._idle_known.pop(conn, None)

    def _close(self, conn: _Conn) -> None:
        self._forget_idle(conn)
        self._busy.discard(conn)
        pending = conn.buffer.pending
        self._buffered -= pending
        conn.buffer = luxi.FrameBuffer(self.max_message)
        if pending >= LARGE_FRAME:
            release_memory()
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass

    def _dispatch(self, conn: _Conn) -> None:
        """Give a connection with complete frames to a worker (it is busy until it comes back)."""
        self._forget_idle(conn)
        self._selector.unregister(conn.sock)
        self._busy.add(conn)
        self._workers.submit(conn)

    def _take_back(self) -> None:
        """Connections whose requests are done: idle again, or closed."""
        while self._returned:
            conn = self._returned.popleft()
            self._busy.discard(conn)
            if conn.sock.fileno() < 0 or self.stopping:
                self._close(conn)
                continue
            conn.served = True
            if conn.large and not conn.buffer.pending:
                conn.buffer = luxi.FrameBuffer(self.max_message)
            conn.large = False
            conn.sock.setblocking(False)
            _insert_by_idle_time(self._idle_known, conn)
            self._selector.register(conn.sock, selectors.EVENT_READ, conn)

    def _expire(self) -> None:
        now = self._clock()
        for idle, timeout in ((self._idle_new, self.new_client_timeout),
                              (self._idle_known, self.client_timeout)):
            while idle:
                conn = next(iter(idle))
                if conn.last_active + timeout > now:
                    break
                logger.debug("Closing LUXI connection idle for %.0f s", timeout)
                self._close(conn)

    # --- worker side ------------------------------------------------------------
    def _work(self, conn: _Conn) -> None:
        """Answer every frame the connection has, in order; then hand it back to the loop."""
        large = conn.large
        try:
            conn.sock.settimeout(SEND_TIMEOUT)
            while conn.frames and not self.stopping:
                reply = self.dispatcher.handle(conn.frames.popleft())
                # idle from its answer on: stamped before the client can see
                # it, so a connection the client used later is always newer
                # even when this worker hands it back after the later one's
                conn.last_active = self._clock()
                sending.send_all(conn.sock, reply)   # SEND_TIMEOUT for each piece
                # a big answer (10,000 instances) leaves megabytes of freed heap
                large = large or len(reply) >= LARGE_FRAME
                del reply
        except OSError:
            conn.frames.clear()
            try:
                conn.sock.close()
            except OSError:
                pass
        except Exception:
            logger.exception("LUXI request failed unexpectedly")
            conn.frames.clear()
            conn.sock.close()
        finally:
            if large:
                release_memory()
            self._returned.append(conn)
            self._wake()
