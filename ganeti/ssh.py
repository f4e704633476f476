"""SSH to cluster nodes: the cluster key, known hosts, and a paramiko client.

Only a few operations use SSH instead of node RPC (doc/design/ssh.md): adding
a node (before it has the cluster certificate), ``gnt-cluster command`` and
``copyfile``, and ``gnt-instance console`` away from the instance's
primary node.  They all go through :class:`SshRunner`.

Keys
    The cluster has one SSH key pair, ``data_dir/id_cluster`` (private, 0600)
    and ``id_cluster.pub`` (one OpenSSH ``authorized_keys`` line).  It is an
    Ed25519 key, generated with ``cryptography`` because paramiko cannot
    generate Ed25519 keys itself; paramiko reads the OpenSSH private format.

Host keys
    Trust on first use, recorded in the cluster ``known_hosts`` file
    (OpenSSH format, ``host`` or ``[host]:port`` then type and key).  The
    first connection to a host appends its key; a later connection that
    offers a different key is refused with :class:`errors.CommandError`
    naming the host, both fingerprints and the file to edit.  Without a
    known_hosts path the keys are remembered only for the runner's life.
    A runner made with ``accept_new_hosts=False`` refuses unknown hosts too.

Commands
    ``run`` sends one ``exec`` request (the remote side runs it with its
    shell), feeds ``input_data`` to stdin, and returns a
    :class:`~ganeti.utils.process.RunResult`.  ``put_file`` uses plain exec
    too (``cat`` into a temporary file, ``chmod``, ``mv``), so any server with
    a POSIX shell works and no SFTP subsystem is needed.  ``interactive``
    runs a command on a remote pty wired to the local terminal (``ssh -t``),
    and ``openssh_argv`` spells the same connection as an OpenSSH command
    line (``gnt-instance console --show-cmd``).

paramiko is imported inside the functions that use it: importing it costs
about 0.2 s, which CLIs that never SSH must not pay.
"""

from __future__ import annotations

import base64
import binascii
import concurrent.futures
import fcntl
import logging
import os
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from ganeti import errors, sshchannel
from ganeti.utils import io as uio
from ganeti.utils.process import RunResult

if TYPE_CHECKING:  # pragma: no cover
    import paramiko

__all__ = [
    "KEY_TYPES", "generate_key_pair", "generate_cluster_key", "public_key_size", "load_key",
    "load_key_data", "load_public_key",
    "parse_public_key_line", "read_authorized_keys", "key_fingerprint",
    "KnownHosts", "SshRunner", "known_hosts_name",
]

log = logging.getLogger(__name__)

_POLL_INTERVAL = 0.05

KEY_TYPES = frozenset([
    "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
])



# --- keys -----------------------------------------------------------------

def generate_key_pair(key_type: str = "ed25519", bits: int | None = None, *,
                      comment: str = "ganeti-cluster") -> tuple[bytes, str]:
    """A new key pair: ``(private key in OpenSSH format, public key line)``.

    ``key_type`` is one of :data:`ganeti.sshkeys.KEY_TYPES` (``ed25519``,
    ``rsa``, ``ecdsa``); ``bits`` defaults to the type's default.  Made with
    ``cryptography`` (paramiko cannot generate Ed25519 keys).  Raises
    :class:`errors.OpPrereqError` for a type or size that is not allowed.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    from ganeti import sshkeys

    bits = sshkeys.determine_key_bits(key_type, bits, None, None)
    key: Any
    if key_type == sshkeys.SSHK_RSA:
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    elif key_type == sshkeys.SSHK_ECDSA:
        curve: ec.EllipticCurve = {256: ec.SECP256R1(), 384: ec.SECP384R1(),
                                   521: ec.SECP521R1()}[bits]
        key = ec.generate_private_key(curve)
    else:
        key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH)
    return private, public.decode("ascii") + (f" {comment}" if comment else "")


def generate_cluster_key(path: str, *, comment: str = "ganeti-cluster",
                         key_type: str = "ed25519", bits: int | None = None) -> str:
    """Write a new key pair (Ed25519 unless ``key_type``): ``path`` (0600) and ``path.pub``.

    The private key is in OpenSSH format (unencrypted), the public file holds
    one ``<type> <base64> <comment>`` line.  Existing files are replaced
    atomically.  Returns the public key line (without newline).
    """
    private, line = generate_key_pair(key_type, bits, comment=comment)
    uio.write_file_atomic(path, private, mode=0o600)
    uio.write_file_atomic(path + ".pub", line + "\n", mode=0o644)
    return line


def public_key_size(line: str) -> tuple[str, int]:
    """``(key type, bits)`` of a public key line (``ed25519``/``rsa``/``ecdsa``/...).

    Raises :class:`errors.CommandError` for a line that is not a public key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    try:
        key = serialization.load_ssh_public_key(" ".join(line.split()[:2]).encode("ascii"))
    except (ValueError, UnicodeEncodeError, TypeError) as exc:
        raise errors.CommandError(f"Not an SSH public key: {line.strip()[:40]!r}") from exc
    if isinstance(key, rsa.RSAPublicKey):
        return "rsa", key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "ecdsa", key.curve.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "ed25519", 256
    return type(key).__name__.lower(), 0


def load_key_data(data: bytes) -> paramiko.PKey:
    """Load a private key (OpenSSH or PEM format) held in memory.

    Raises :class:`errors.CommandError` if it is not a key paramiko can use.
    """
    import io

    import paramiko
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    try:
        try:
            loaded: Any = serialization.load_ssh_private_key(data, password=None)
        except ValueError:
            loaded = serialization.load_pem_private_key(data, password=None)
        cls: Any
        if isinstance(loaded, rsa.RSAPrivateKey):
            cls = paramiko.RSAKey
        elif isinstance(loaded, ec.EllipticCurvePrivateKey):
            cls = paramiko.ECDSAKey
        elif isinstance(loaded, ed25519.Ed25519PrivateKey):
            cls = paramiko.Ed25519Key
        else:
            raise errors.CommandError(f"Unsupported SSH key type {type(loaded).__name__}")
        pkey: paramiko.PKey = cls(file_obj=io.StringIO(data.decode("ascii")))
        return pkey
    except (ValueError, TypeError, UnicodeDecodeError, paramiko.SSHException) as exc:
        raise errors.CommandError(f"Cannot load the SSH key: {exc}") from exc


def load_key(path: str) -> paramiko.PKey:
    """Load a private key file (OpenSSH or PEM format, any supported type).

    Raises :class:`errors.CommandError` if the file is missing or unreadable.
    """
    import paramiko

    try:
        return paramiko.PKey.from_path(path)
    except (OSError, paramiko.SSHException, ValueError) as exc:
        raise errors.CommandError(f"Cannot load SSH key {path}: {exc}") from exc


def parse_public_key_line(line: str) -> tuple[str, bytes] | None:
    """Parse one ``authorized_keys``/``.pub`` line into ``(type, blob)``.

    Leading options (``from="..."`` etc.) are skipped, not interpreted.
    Returns None for blank, comment and unparsable lines.
    """
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    fields = line.split()
    for idx, field in enumerate(fields[:-1]):
        if field in KEY_TYPES:
            try:
                blob = base64.b64decode(fields[idx + 1], validate=True)
            except (binascii.Error, ValueError):
                return None
            return field, blob
    return None


def load_public_key(path: str) -> tuple[str, bytes]:
    """Read a ``.pub`` file and return ``(type, blob)``.

    Raises :class:`errors.CommandError` if it holds no valid key.
    """
    try:
        text = uio.read_file(path).decode("utf-8", "replace")
    except OSError as exc:
        raise errors.CommandError(f"Cannot read public key {path}: {exc}") from exc
    for line in text.splitlines():
        parsed = parse_public_key_line(line)
        if parsed:
            return parsed
    raise errors.CommandError(f"No public key found in {path}")


def read_authorized_keys(path: str) -> set[bytes]:
    """Return the key blobs listed in an ``authorized_keys`` file.

    A missing file means no key is authorized (empty set).
    """
    try:
        text = uio.read_file(path).decode("utf-8", "replace")
    except FileNotFoundError:
        return set()
    found = set()
    for line in text.splitlines():
        parsed = parse_public_key_line(line)
        if parsed:
            found.add(parsed[1])
    return found


def key_fingerprint(blob: bytes) -> str:
    """OpenSSH-style ``SHA256:...`` fingerprint of a public key blob."""
    import hashlib

    digest = hashlib.sha256(blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


# --- known hosts ------------------------------------------------------------

def known_hosts_name(host: str, port: int) -> str:
    """The host token of a known_hosts line: ``host`` or ``[host]:port``."""
    return host if port == 22 else f"[{host}]:{port}"


class KnownHosts:
    """Trust-on-first-use host key store, optionally backed by a file.

    ``check(host, port, key_type, blob)`` accepts a known key, records an
    unknown host, and raises :class:`errors.CommandError` for a host whose
    recorded keys do not include the offered one.  Safe for threads of one
    process; the file is also ``flock``-ed while it is read and appended.
    """

    def __init__(self, path: str | None = None, *, accept_new: bool = True) -> None:
        self.path = path
        #: False: an unknown host is refused too (``gnt-instance console``)
        self.accept_new = accept_new
        self._lock = threading.Lock()
        self._memory: dict[str, list[tuple[str, bytes]]] = {}

    @staticmethod
    def _parse(text: str) -> dict[str, list[tuple[str, bytes]]]:
        table: dict[str, list[tuple[str, bytes]]] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "|", "@")):
                continue
            fields = line.split()
            if len(fields) < 3 or fields[1] not in KEY_TYPES:
                continue
            try:
                blob = base64.b64decode(fields[2], validate=True)
            except (binascii.Error, ValueError):
                continue
            for name in fields[0].split(","):
                table.setdefault(name, []).append((fields[1], blob))
        return table

    def check(self, host: str, port: int, key_type: str, blob: bytes) -> bool:
        """Verify a server's host key; returns True if it was newly recorded."""
        name = known_hosts_name(host, port)
        with self._lock:
            if self.path is None:
                return self._check_in(self._memory, name, key_type, blob, None)
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            with os.fdopen(fd, "r+", encoding="utf-8") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                handle.seek(0)
                table = self._parse(handle.read())
                return self._check_in(table, name, key_type, blob, handle)

    def _check_in(self, table: dict[str, list[tuple[str, bytes]]], name: str,
                  key_type: str, blob: bytes, handle: IO[str] | None) -> bool:
        known = table.get(name)
        if known:
            if any(b == blob for _, b in known):
                return False
            old = ", ".join(f"{t} {key_fingerprint(b)}" for t, b in known)
            where = f"; remove the line for {name} from {self.path}" if self.path else ""
            raise errors.CommandError(
                f"Host key of {name} has changed: it offered {key_type} "
                f"{key_fingerprint(blob)} but {old} is recorded; refusing to "
                f"connect (possible man-in-the-middle){where}")
        if not self.accept_new:
            raise errors.CommandError(
                f"Host key of {name} is unknown ({key_type} {key_fingerprint(blob)}"
                f" is not in {self.path or 'the known hosts'}); refusing to connect")
        if handle is not None:
            line = f"{name} {key_type} {base64.b64encode(blob).decode('ascii')}\n"
            handle.write(line)
            handle.flush()
        table.setdefault(name, []).append((key_type, blob))
        log.info("Recorded new host key for %s (%s %s)", name, key_type,
                 key_fingerprint(blob))
        return True


# --- client -----------------------------------------------------------------

def _command_text(command: str | Sequence[str]) -> str:
    if isinstance(command, str):
        return command
    return shlex.join(list(command))


class SshRunner:
    """Runs commands and copies files on nodes over SSH with the cluster key.

    One TCP connection per call, or with ``reuse`` one kept per host (each
    call opens its own session on it, and a connection that is gone is
    made again); calls are independent and thread-safe.
    Connection, host key and authentication failures raise
    :class:`errors.CommandError` naming ``host:port``; a command that runs
    and fails is a normal :class:`RunResult` with its exit code.
    A loaded ``key`` (a key being tried out, ``gnt-cluster renew-crypto
    --new-ssh-keys``) is used instead of reading ``key_path``.
    """

    def __init__(self, key_path: str, *, known_hosts_path: str | None = None,
                 port: int = 22, user: str = "root", connect_timeout: float = 10.0,
                 accept_new_hosts: bool = True, reuse: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 key: paramiko.PKey | None = None) -> None:
        #: where the key is read from; with ``key`` given, only named in errors
        self.key_path = key_path
        self.reuse = reuse
        self._kept: dict[tuple[str, int], paramiko.Transport] = {}
        self._kept_lock = threading.Lock()
        self.port = port
        self.user = user
        self.connect_timeout = connect_timeout
        self.known_hosts = KnownHosts(known_hosts_path, accept_new=accept_new_hosts)
        self._clock = clock
        self._key: paramiko.PKey | None = key
        self._key_lock = threading.Lock()

    def _get_key(self) -> paramiko.PKey:
        with self._key_lock:
            if self._key is None:
                self._key = load_key(self.key_path)
            return self._key

    def _connect(self, host: str, port: int) -> paramiko.Transport:
        """Open an authenticated transport to ``host:port``."""
        import paramiko

        key = self._get_key()
        where = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=self.connect_timeout)
        except OSError as exc:
            raise errors.CommandError(f"SSH to {where} failed: cannot connect: {exc}") from exc
        # many small packets (exec, EOF, exit-status): no Nagle/delayed-ACK stalls
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = paramiko.Transport(sock)
        transport.banner_timeout = self.connect_timeout
        transport.handshake_timeout = self.connect_timeout
        transport.auth_timeout = self.connect_timeout
        try:
            try:
                transport.start_client(timeout=self.connect_timeout)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise errors.CommandError(
                    f"SSH to {where} failed: handshake error: {exc}") from exc
            try:
                # start_client may return with no session when the banner never came
                server_key = transport.get_remote_server_key()
            except paramiko.SSHException as exc:
                raise errors.CommandError(
                    f"SSH to {where} failed: handshake error: {exc}") from exc
            self.known_hosts.check(host, port, server_key.get_name(), server_key.asbytes())
            try:
                transport.auth_publickey(self.user, key)
            except paramiko.AuthenticationException as exc:
                raise errors.CommandError(
                    f"SSH to {where} failed: the server refused the key "
                    f"{self.key_path} for user {self.user}") from exc
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise errors.CommandError(
                    f"SSH to {where} failed: authentication error: {exc}") from exc
            if not transport.is_authenticated():
                raise errors.CommandError(f"SSH to {where} failed: not authenticated")
        except BaseException:
            transport.close()
            raise
        return transport

    def _open_session(self, host: str, port: int
                      ) -> tuple[paramiko.Transport, paramiko.Channel]:
        """A new session channel to ``host:port`` and its transport (with ``reuse``,
        on the kept connection while it still works)."""
        import paramiko

        if self.reuse:
            with self._kept_lock:
                kept = self._kept.pop((host, port), None)
            if kept is not None and kept.is_active():
                try:
                    return kept, kept.open_session(timeout=self.connect_timeout)
                except (paramiko.SSHException, OSError, EOFError):
                    pass        # gone (the host rebooted): connect again
            if kept is not None:
                kept.close()
        transport = self._connect(host, port)
        try:
            return transport, transport.open_session(timeout=self.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            transport.close()
            raise errors.CommandError(
                f"SSH to {host}:{port}: cannot open a session: {exc}") from exc

    def _done(self, host: str, port: int, transport: paramiko.Transport, keep: bool) -> None:
        """Keep ``transport`` for the next call (``reuse``, ``keep``) or close it."""
        if self.reuse and keep and transport.is_active():
            with self._kept_lock:
                if self._kept.setdefault((host, port), transport) is transport:
                    return
        transport.close()

    def close(self) -> None:
        """Close the connections kept by ``reuse``."""
        with self._kept_lock:
            kept, self._kept = list(self._kept.values()), {}
        for transport in kept:
            transport.close()

    def exec_channel(self, host: str, command: str | Sequence[str], *, port: int | None = None
                     ) -> tuple[paramiko.Channel, Callable[[], None]]:
        """Start ``command`` on ``host``; its channel (a byte stream both ways) and the
        function that closes it (giving a kept connection back, with ``reuse``)."""
        import paramiko

        port = self.port if port is None else port
        transport, chan = self._open_session(host, port)
        try:
            chan.exec_command(_command_text(command))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            chan.close()
            self._done(host, port, transport, False)
            raise errors.CommandError(f"SSH to {host}:{port}: cannot start command: {exc}"
                                      ) from exc

        def close() -> None:
            chan.close()
            self._done(host, port, transport, True)
        return chan, close

    def run(self, host: str, command: str | Sequence[str], *, port: int | None = None,
            timeout: float | None = 60.0, input_data: bytes | str | None = None) -> RunResult:
        """Run ``command`` on ``host`` and wait at most ``timeout`` seconds.

        A list command is quoted with :func:`shlex.join`; a string is passed
        to the remote shell as is.  On timeout the channel is closed (the
        server kills the command) and ``timed_out`` is set.
        """
        import paramiko

        port = self.port if port is None else port
        text = _command_text(command)
        argv = (f"ssh://{self.user}@{host}:{port}", text)
        if isinstance(input_data, str):
            input_data = input_data.encode("utf-8")
        where = f"{host}:{port}"
        transport, chan = self._open_session(host, port)
        keep = False
        try:
            try:
                chan.exec_command(text)
                # bounded: a command that never reads its stdin cannot hang us
                chan.settimeout(timeout)
                if input_data:
                    chan.sendall(input_data)
                chan.shutdown_write()
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise errors.CommandError(
                    f"SSH to {where}: cannot start command or send its input: {exc}") from exc
            out, err, timed_out = sshchannel.collect(chan, timeout, self._clock)
            code: int | None = None
            if not timed_out:
                # let the server's EOF/close arrive, so that closing our end
                # does not reset a connection with unread data
                self._wait_closed(chan, 1.0)
                code = chan.exit_status if chan.exit_status_ready() else -1
                if code < 0:
                    raise errors.CommandError(
                        f"SSH to {where}: connection lost before {text!r} finished")
                keep = True
            return RunResult(argv, code, None, out.decode("utf-8", "replace"),
                             err.decode("utf-8", "replace"), timed_out)
        finally:
            chan.close()
            self._done(host, port, transport, keep)

    def interactive(self, host: str, command: str | Sequence[str], *, port: int | None = None,
                    stdin_fd: int = 0, stdout_fd: int = 1, term: str | None = None) -> int:
        """Run ``command`` on ``host`` on a remote terminal (pty) wired to ours.

        Like ``ssh -t``: the remote side gets a pty of our terminal's type
        (``term``, default ``$TERM``) and size; our terminal, when
        ``stdin_fd`` is one, is put in raw mode (every key, Ctrl-C included,
        goes to the remote command) and restored afterwards.  Returns the
        command's exit status.  Raises :class:`errors.CommandError` when
        the host cannot be reached, its key is refused or unknown (see
        ``accept_new_hosts``), or no pty is granted.
        """
        import paramiko

        port = self.port if port is None else port
        text = _command_text(command)
        where = f"{host}:{port}"
        transport = self._connect(host, port)
        try:
            cols, rows = sshchannel.terminal_size(stdout_fd)
            try:
                chan = transport.open_session(timeout=self.connect_timeout)
                chan.get_pty(term=term or os.environ.get("TERM") or "vt100",
                             width=cols, height=rows)
                chan.exec_command(text)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise errors.CommandError(
                    f"SSH to {where}: cannot start {text!r} on a terminal: {exc}") from exc
            with sshchannel.raw_terminal(stdin_fd), sshchannel.forward_resizes(chan, stdout_fd):
                sshchannel.pump_terminal(chan, stdin_fd, stdout_fd)
            self._wait_closed(chan, 1.0)
            if not chan.exit_status_ready():
                raise errors.CommandError(
                    f"SSH to {where}: connection lost before {text!r} finished")
            return chan.exit_status
        finally:
            transport.close()

    def _wait_closed(self, chan: paramiko.Channel, seconds: float) -> None:
        deadline = self._clock() + seconds
        transport = chan.get_transport()
        while not chan.closed and transport is not None and transport.is_active():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            select.select([chan.fileno()], [], [], min(remaining, _POLL_INTERVAL))

    def openssh_argv(self, host: str, command: str | Sequence[str], *,
                     port: int | None = None, tty: bool = True) -> list[str]:
        """The OpenSSH ``ssh`` command line doing what this runner does.

        Same key, same known hosts file (no other, and no new hosts
        accepted), same user and port; ``tty`` adds ``-t`` and turns the
        escape character off, as :meth:`interactive` does.
        """
        port = self.port if port is None else port
        argv = ["ssh", "-oBatchMode=yes", "-oStrictHostKeyChecking=yes",
                f"-oUserKnownHostsFile={self.known_hosts.path or '/dev/null'}",
                "-oGlobalKnownHostsFile=/dev/null", "-oCheckHostIP=no",
                "-oIdentitiesOnly=yes", "-i", self.key_path, f"-l{self.user}",
                f"-p{port}"]
        if tty:
            argv += ["-oEscapeChar=none", "-t"]
        return argv + [host, _command_text(command)]

    def put_file(self, host: str, local_path: str, remote_path: str, *, mode: int = 0o644,
                 port: int | None = None, timeout: float | None = 60.0) -> None:
        """Copy ``local_path`` to ``remote_path`` on ``host`` with ``mode``.

        The remote file is written next to its target and renamed into place,
        so readers never see half a file; missing parent directories are
        created.  Raises :class:`errors.CommandError` on any failure.
        """
        try:
            with open(local_path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise errors.CommandError(f"Cannot read {local_path}: {exc}") from exc
        self.put_data(host, data, remote_path, mode=mode, port=port, timeout=timeout)

    def put_data(self, host: str, data: bytes, remote_path: str, *, mode: int = 0o644,
                 port: int | None = None, timeout: float | None = 60.0) -> None:
        """Write ``data`` to ``remote_path`` on ``host``; see :meth:`put_file`."""
        qpath = shlex.quote(remote_path)
        qtmp = shlex.quote(remote_path + ".ssh-tmp")
        qdir = shlex.quote(os.path.dirname(remote_path) or ".")
        script = (f"umask 077 && mkdir -p {qdir} && cat > {qtmp} && "
                  f"chmod {mode:o} {qtmp} && mv -f {qtmp} {qpath} || "
                  f"{{ rc=$?; rm -f {qtmp}; exit $rc; }}")
        result = self.run(host, script, port=port, timeout=timeout, input_data=data)
        if result.failed:
            port = self.port if port is None else port
            raise errors.CommandError(
                f"Copying to {host}:{port}:{remote_path} failed: "
                f"{result.fail_reason or 'error'}: {result.stderr.strip()}")

    def run_many(self, hosts: Iterable[str], command: str | Sequence[str], *,
                 ports: Mapping[str, int] | None = None, timeout: float | None = 60.0,
                 input_data: bytes | str | None = None,
                 max_workers: int = 16) -> dict[str, RunResult | errors.CommandError]:
        """Run ``command`` on every host in parallel threads.

        Returns ``{host: RunResult}``, or the :class:`errors.CommandError`
        instance for hosts that could not be reached or authenticated.
        ``ports`` overrides the port per host.
        """
        hosts = list(dict.fromkeys(hosts))
        results: dict[str, RunResult | errors.CommandError] = {}
        if not hosts:
            return results
        ports = ports or {}

        def one(host: str) -> RunResult | errors.CommandError:
            try:
                return self.run(host, command, port=ports.get(host), timeout=timeout,
                                input_data=input_data)
            except errors.CommandError as exc:
                return exc

        workers = max(1, min(max_workers, len(hosts)))
        with concurrent.futures.ThreadPoolExecutor(workers, "ssh-run") as pool:
            futures = {host: pool.submit(one, host) for host in hosts}
            for host, future in futures.items():
                results[host] = future.result()
        return results
