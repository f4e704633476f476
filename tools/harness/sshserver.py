"""A small SSH server for the nodes of a virtual cluster (built on paramiko).

``tools/vcluster`` runs one per virtual node, bound to the node's loopback
address, so ``gnt-node add``, ``gnt-cluster command`` and ``copyfile`` talk
real SSH without root and without a system sshd.  What it does:

* public-key authentication only, against an OpenSSH ``authorized_keys``
  file that is re-read on every attempt (options are ignored); the user
  name is ignored: commands run as the user who started the server;
* ``exec`` requests only (no shell, port forwarding or subsystems): the
  command runs as ``shell -c COMMAND`` in its own session, with exactly the
  configured environment (plus HOME/USER/LOGNAME and a default PATH if not
  given), stdin/stdout/stderr streamed, and the exit status returned
  (``128 + signal`` when killed by a signal);
* ``pty-req`` before the ``exec`` (``ssh -t``, ``gnt-instance console``):
  the command then runs on a new pseudo-terminal of the requested size (its
  controlling terminal, ``TERM`` set), its output (stdout and stderr alike)
  streamed from the pty; ``window-change`` resizes it;
* a client that disconnects gets its command's process group killed; an
  optional per-command timeout does the same; connections that do not
  authenticate within ``auth_timeout`` are dropped.  Every child is waited
  for by the thread that started it.

File copies (:meth:`ganeti.ssh.SshRunner.put_file`) use plain exec with
``cat``, so no SFTP subsystem is needed.

Run as a process::

    python -m tools.harness.sshserver --bind 127.0.1.2 --port 2222 \\
        --host-key F --authorized-keys F --env-file F --pidfile F [--daemonize]

``--port 0`` picks a free port; in the foreground the server prints
``LISTENING <address> <port>`` on stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

import paramiko

from ganeti import errors, ssh
from ganeti.utils import io as uio

__all__ = ["SshServer", "read_env_file", "main"]

log = logging.getLogger(__name__)

_CHUNK = 32768
_POLL = 0.1
_PIPE_GRACE = 2.0  # how long to wait for output after the command exited
#: how long a finished exec request waits for the client's EOF before closing
_CLIENT_EOF_WAIT = 2.0
#: paramiko's per-connection messages (resets by clients that hang up early
#: are normal); quiet unless --debug
TRANSPORT_LOGGER = f"{__name__}.transport"


def read_env_file(path: str) -> dict[str, str]:
    """Parse ``KEY=VALUE`` lines (no quoting; ``#`` comments, blank lines).

    Raises :class:`errors.CommandError` for a missing file or a bad line.
    """
    try:
        text = uio.read_file(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.CommandError(f"Cannot read environment file {path}: {exc}") from exc
    env: dict[str, str] = {}
    for num, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise errors.CommandError(f"{path}:{num}: expected KEY=VALUE, got {line!r}")
        env[key] = value
    return env


def _load_or_create_host_key(path: str) -> paramiko.PKey:
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        ssh.generate_cluster_key(path, comment="ganeti-sshserver")
        log.info("Generated SSH host key %s", path)
    return ssh.load_key(path)


class _PtyRequest:
    """A channel's ``pty-req``: terminal type and size; ``fd`` once the pty exists."""

    def __init__(self, term: str, width: int, height: int) -> None:
        self.term = term
        self.width = width
        self.height = height
        self.fd: int | None = None


def _set_winsize(fd: int, width: int, height: int) -> None:
    import fcntl
    import struct
    import termios
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    except OSError:
        pass


class _Interface(paramiko.ServerInterface):
    """paramiko callbacks of one connection: who may log in, what may run."""

    def __init__(self, server: SshServer, transport: paramiko.Transport) -> None:
        self._server = server
        self._transport = transport
        self._ptys: dict[int, _PtyRequest] = {}

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        if key.asbytes() in ssh.read_authorized_keys(self._server.authorized_keys_path):
            return paramiko.common.AUTH_SUCCESSFUL
        log.info("Refused key %s for %s", ssh.key_fingerprint(key.asbytes()), username)
        return paramiko.common.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.common.OPEN_SUCCEEDED
        return paramiko.common.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_pty_request(self, channel: paramiko.Channel, term: bytes, width: int,
                                  height: int, pixelwidth: int, pixelheight: int,
                                  modes: bytes) -> bool:
        name = term.decode("ascii", "replace") if isinstance(term, bytes) else str(term)
        self._ptys[channel.get_id()] = _PtyRequest(name or "vt100", width, height)
        return True

    def check_channel_window_change_request(self, channel: paramiko.Channel, width: int,
                                            height: int, pixelwidth: int,
                                            pixelheight: int) -> bool:
        req = self._ptys.get(channel.get_id())
        if req is None:
            return False
        req.width, req.height = width, height
        if req.fd is not None:
            _set_winsize(req.fd, width, height)
        return True

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        text = command.decode("utf-8", "replace") if isinstance(command, bytes) else command
        req = self._ptys.get(channel.get_id())
        target = self._server._run_exec if req is None else self._server._run_pty
        args = (channel, self._transport, text) + (() if req is None else (req,))
        thread = threading.Thread(target=target, args=args, name="sshd-exec", daemon=True)
        thread.start()
        return True


class SshServer:
    """A threaded SSH server: ``start()`` it, ``stop()`` it.

    ``port`` may be 0; the real port is in :attr:`port` after ``start()``.
    ``env`` is the whole environment of the commands it runs.
    """

    def __init__(self, bind_address: str, port: int, host_key_path: str,
                 authorized_keys_path: str, env: dict[str, str], shell: str = "/bin/sh", *,
                 command_timeout: float | None = None, auth_timeout: float = 30.0,
                 max_connections: int = 64) -> None:
        self.bind_address = bind_address
        self.port = port
        self.host_key_path = host_key_path
        self.authorized_keys_path = authorized_keys_path
        self.env = dict(env)
        self.shell = shell
        self.command_timeout = command_timeout
        self.auth_timeout = auth_timeout
        self.max_connections = max_connections
        self._host_key: paramiko.PKey | None = None
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._transports: dict[paramiko.Transport, float] = {}
        self._procs: set[subprocess.Popen[bytes]] = set()

    # --- life cycle -------------------------------------------------------

    def start(self) -> None:
        """Bind, listen and serve in a background thread.

        Raises :class:`errors.CommandError` if the address cannot be bound
        or the host key cannot be loaded.
        """
        if self._thread is not None:
            raise errors.ProgrammerError("SshServer already started")
        self._host_key = _load_or_create_host_key(self.host_key_path)
        try:
            sock = socket.socket(socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.bind_address, self.port))
            sock.listen(32)
        except OSError as exc:
            sock.close()
            raise errors.CommandError(
                f"Cannot listen on {self.bind_address}:{self.port}: {exc}") from exc
        sock.settimeout(_POLL)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="sshd-accept", daemon=True)
        self._thread.start()
        log.info("SSH server listening on %s:%s", self.bind_address, self.port)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection and kill running commands."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            transports = list(self._transports)
            procs = list(self._procs)
        for transport in transports:
            transport.close()
        for proc in procs:
            _kill_group(proc)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("Command pid %s did not exit after SIGKILL", proc.pid)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def wait(self, stop_event: threading.Event) -> None:
        """Serve until ``stop_event`` is set, then :meth:`stop`."""
        while not stop_event.wait(1.0):
            pass
        self.stop()

    # --- connections -------------------------------------------------------

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            self._reap_transports()
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if self._stopping.is_set():
                    break
                log.warning("accept failed: %s", exc)
                time.sleep(_POLL)
                continue
            with self._lock:
                busy = len(self._transports) >= self.max_connections
            if busy:
                log.warning("Too many connections, dropping %s", peer)
                conn.close()
                continue
            self._start_transport(conn, peer)

    def _start_transport(self, conn: socket.socket, peer: object) -> None:
        assert self._host_key is not None  # start() loads it before serving
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            transport = paramiko.Transport(conn)
            transport.set_log_channel(TRANSPORT_LOGGER)
            transport.add_server_key(self._host_key)
            transport.banner_timeout = self.auth_timeout
            transport.handshake_timeout = self.auth_timeout
            transport.set_keepalive(15)
            with self._lock:
                self._transports[transport] = time.monotonic()
            transport.start_server(event=threading.Event(),
                                   server=_Interface(self, transport))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            log.info("SSH negotiation with %s failed: %s", peer, exc)
            conn.close()

    def _reap_transports(self) -> None:
        """Forget closed connections; drop those not authenticated in time."""
        now = time.monotonic()
        with self._lock:
            items = list(self._transports.items())
        for transport, started in items:
            if not transport.is_active():
                with self._lock:
                    self._transports.pop(transport, None)
            elif not transport.is_authenticated() and now - started > self.auth_timeout:
                log.info("Dropping connection that did not authenticate in time")
                transport.close()

    # --- commands ---------------------------------------------------------

    def _command_env(self) -> dict[str, str]:
        env = dict(self.env)
        for name in ("HOME", "USER", "LOGNAME"):
            if name not in env and name in os.environ:
                env[name] = os.environ[name]
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        return env

    def _run_exec(self, chan: paramiko.Channel, transport: paramiko.Transport,
                  command: str) -> None:
        """Run one exec request to completion (in its own thread)."""
        env = self._command_env()
        cwd = env.get("HOME") or "/"
        if not os.path.isdir(cwd):
            cwd = "/"
        try:
            proc = subprocess.Popen([self.shell, "-c", command], env=env, cwd=cwd,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            _finish(chan, 127, f"cannot run {self.shell}: {exc}\n".encode(), wait_eof=True)
            return
        with self._lock:
            self._procs.add(proc)
        log.debug("Running %r as pid %s", command, proc.pid)
        pumps = [
            threading.Thread(target=_pump_in, args=(chan, proc), daemon=True),
            threading.Thread(target=_pump_out, args=(proc.stdout, chan.sendall), daemon=True),
            threading.Thread(target=_pump_out, args=(proc.stderr, chan.sendall_stderr),
                             daemon=True),
        ]
        for pump in pumps:
            pump.start()
        exited = threading.Event()

        def waiter() -> None:
            proc.wait()
            exited.set()

        threading.Thread(target=waiter, name="sshd-wait", daemon=True).start()
        started = time.monotonic()
        try:
            while not exited.wait(_POLL):
                if chan.closed or not transport.is_active() or self._stopping.is_set():
                    log.info("Client went away, killing pid %s", proc.pid)
                    _kill_group(proc)
                elif self.command_timeout is not None and \
                        time.monotonic() - started > self.command_timeout:
                    log.warning("Command timed out, killing pid %s", proc.pid)
                    _kill_group(proc)
            # output still in the pipes (or held open by a background child)
            grace_end = time.monotonic() + _PIPE_GRACE
            for pump in pumps[1:]:
                pump.join(max(0.0, grace_end - time.monotonic()))
        finally:
            with self._lock:
                self._procs.discard(proc)
        code = proc.returncode
        _finish(chan, code if code >= 0 else 128 - code, b"", wait_eof=True)


    def _run_pty(self, chan: paramiko.Channel, transport: paramiko.Transport,
                 command: str, req: _PtyRequest) -> None:
        """Run one exec request on a new pty (after ``pty-req``), in its own thread."""
        import pty
        env = {**self._command_env(), "TERM": req.term}
        cwd = env.get("HOME") or "/"
        if not os.path.isdir(cwd):
            cwd = "/"
        master, slave = pty.openpty()
        _set_winsize(slave, req.width, req.height)
        try:
            # start_new_session: setsid, so the pty (opened after it) becomes
            # the controlling terminal of the command's session
            proc = subprocess.Popen([self.shell, "-c", command], env=env, cwd=cwd,
                                    stdin=slave, stdout=slave, stderr=slave,
                                    start_new_session=True,
                                    preexec_fn=lambda: _take_tty(0))
        except OSError as exc:
            os.close(master)
            os.close(slave)
            _finish(chan, 127, f"cannot run {self.shell}: {exc}\n".encode())
            return
        os.close(slave)
        req.fd = master
        with self._lock:
            self._procs.add(proc)
        log.debug("Running %r on a pty as pid %s", command, proc.pid)
        out = threading.Thread(target=_pump_pty_out, args=(master, chan), daemon=True)
        threading.Thread(target=_pump_pty_in, args=(chan, master), daemon=True).start()
        out.start()
        try:
            while proc.poll() is None:
                if chan.closed or not transport.is_active() or self._stopping.is_set():
                    log.info("Client went away, killing pid %s", proc.pid)
                    _kill_group(proc)
                    proc.wait()
                    break
                out.join(_POLL)
            out.join(_PIPE_GRACE)
        finally:
            with self._lock:
                self._procs.discard(proc)
            req.fd = None
            os.close(master)
        code = proc.returncode
        _finish(chan, code if code >= 0 else 128 - code, b"")


def _take_tty(fd: int) -> None:
    """In the child: make the terminal on ``fd`` the controlling one."""
    import fcntl
    import termios
    fcntl.ioctl(fd, termios.TIOCSCTTY, 0)


def _pump_pty_in(chan: paramiko.Channel, master: int) -> None:
    """Copy the client's keys to the pty until EOF or close."""
    try:
        while True:
            data = chan.recv(_CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(master, view):]
    except (OSError, EOFError, ValueError, paramiko.SSHException):
        pass


def _pump_pty_out(master: int, chan: paramiko.Channel) -> None:
    """Copy the pty's output to the channel until the terminal hangs up (EIO)."""
    try:
        while True:
            data = os.read(master, _CHUNK)
            if not data:
                break
            chan.sendall(data)
    except (OSError, EOFError, paramiko.SSHException):
        pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _pump_in(chan: paramiko.Channel, proc: subprocess.Popen[bytes]) -> None:
    """Copy the client's stdin to the command until EOF or close."""
    assert proc.stdin is not None
    try:
        while True:
            data = chan.recv(_CHUNK)
            if not data:
                break
            proc.stdin.write(data)
            proc.stdin.flush()
    except (OSError, EOFError, ValueError, paramiko.SSHException):
        pass
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _pump_out(pipe: object, send: Callable[[bytes], None]) -> None:
    """Copy one output pipe of the command to the channel until EOF."""
    try:
        while True:
            data = pipe.read1(_CHUNK)  # type: ignore[attr-defined]
            if not data:
                break
            send(data)
    except (OSError, EOFError, ValueError, paramiko.SSHException):
        pass
    finally:
        try:
            pipe.close()  # type: ignore[attr-defined]
        except OSError:
            pass


def _wait_for_client_eof(chan: paramiko.Channel) -> None:
    """Wait (bounded) until the client has sent its EOF on the channel.

    paramiko answers an exec request (SUCCESS) only after
    ``check_channel_exec_request`` returned, in the transport's thread, while
    the command already runs in ours: a quick command could otherwise close
    the channel before that answer is sent, and the client's ``exec_command``
    then fails with "Channel closed" although the command ran.  A client sends
    its EOF only after it got the answer (``ganeti.ssh`` always sends one), so
    waiting for it orders the close after the answer; a client that never
    sends one costs :data:`_CLIENT_EOF_WAIT` at most."""
    deadline = time.monotonic() + _CLIENT_EOF_WAIT
    while not (chan.eof_received or chan.closed) and time.monotonic() < deadline:
        time.sleep(0.005)


def _finish(chan: paramiko.Channel, status: int, stderr: bytes, *,
            wait_eof: bool = False) -> None:
    if wait_eof:
        _wait_for_client_eof(chan)
    try:
        if stderr:
            chan.sendall_stderr(stderr)
        chan.send_exit_status(status)
        chan.shutdown_write()
    except (OSError, EOFError, paramiko.SSHException):
        pass
    finally:
        chan.close()


# --- process entry point ----------------------------------------------------

def _daemonize() -> int:
    """Detach; the first parent exits once the daemon reports readiness.

    Returns the write end of a pipe: write ``b"ok"`` (or an error message)
    to it and close it.  The original process exits 0 on ``ok``, else 1.
    """
    rfd, wfd = os.pipe()
    if os.fork():
        os.close(wfd)
        with os.fdopen(rfd, "rb") as reader:
            answer = reader.read()
        if answer != b"ok":
            sys.stderr.write(answer.decode("utf-8", "replace") or "sshserver: daemon died\n")
            os._exit(1)
        os._exit(0)
    os.close(rfd)
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    return wfd


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.harness.sshserver",
                                     description="SSH server for a virtual cluster node")
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=22, help="port (0: any free port)")
    parser.add_argument("--host-key", required=True, help="host key (created if missing)")
    parser.add_argument("--authorized-keys", required=True, help="authorized_keys file")
    parser.add_argument("--env-file", help="KEY=VALUE lines: the commands' environment")
    parser.add_argument("--shell", default="/bin/sh")
    parser.add_argument("--pidfile", help="write the server's pid here")
    parser.add_argument("--command-timeout", type=float, default=None)
    parser.add_argument("--log-file", help="log here (default: stderr)")
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--daemonize", action="store_true", help="detach into the background")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM/SIGINT; returns the exit code."""
    opts = _parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(filename=opts.log_file,
                        level=logging.DEBUG if opts.debug else logging.WARNING,
                        format="%(asctime)s sshserver[%(process)d] %(levelname)s %(message)s")
    if not opts.debug:
        logging.getLogger(TRANSPORT_LOGGER).setLevel(logging.CRITICAL)
    ready_fd = None
    try:
        env = read_env_file(opts.env_file) if opts.env_file else {}
        server = SshServer(opts.bind, opts.port, opts.host_key, opts.authorized_keys, env,
                           opts.shell, command_timeout=opts.command_timeout)
        if opts.daemonize:
            ready_fd = _daemonize()
        server.start()
    except errors.GanetiError as exc:
        if ready_fd is not None:
            os.write(ready_fd, f"sshserver: {exc}\n".encode())
            os.close(ready_fd)
        print(f"sshserver: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if opts.pidfile:
        uio.write_file_atomic(opts.pidfile, f"{os.getpid()}\n", fsync=False)
    if ready_fd is not None:
        os.write(ready_fd, b"ok")
        os.close(ready_fd)
    else:
        print(f"LISTENING {opts.bind} {server.port}", flush=True)
    try:
        server.wait(stop)
    finally:
        if opts.pidfile:
            try:
                os.unlink(opts.pidfile)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
