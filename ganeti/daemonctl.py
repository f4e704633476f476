"""Start, stop, find and probe the daemons of one node root (pid files, probes).

The one place that turns "start the node daemon of this root" into a
command line, and "is it up?" into a probe: bootstrap (``gnt-cluster
init``, ``gnt-node add``), the CLI (``gnt-cluster destroy``, renew-crypto,
master failover), the watcher and the virtual cluster harness all use it.

* :func:`start_noded` / :func:`start_masterd` / :func:`start_rapi` run the
  daemon (it daemonizes itself) and wait until it answers:
  :func:`wait_for_noded` (a ``version`` call over node RPC),
  :func:`wait_for_masterd` (a LUXI query), :func:`wait_for_rapi` (a TLS
  handshake); a daemon that does not start or answer in time is an
  :class:`~ganeti.errors.OpExecError`; :func:`start_master_daemons` starts
  the master daemon and RAPI side by side (``gnt-cluster init``).
* :func:`start_metad` runs the instance metadata service of a node (it
  listens when the call returns);
* :func:`daemon_pid` reads a running daemon's pid file; :func:`stop_daemon`
  sends SIGTERM (SIGKILL after a timeout) and waits until it is gone.

The daemons run with ``$GANETI_ROOTDIR`` set to the root they serve.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from ganeti import constants, errors
from ganeti.pathutils import Paths
from ganeti.utils import pidfile

__all__ = [
    "DAEMONS_DIR", "ENV_RAPI_BIND", "START_TIMEOUT", "noded_argv", "start_noded", "start_masterd", "start_rapi",
    "start_metad",
    "start_master_daemons",
    "wait_for_rapi", "wait_for_noded", "wait_for_masterd", "daemon_pid", "stop_daemon",
]

#: seconds a daemon may take to start and answer: a daemon that fails exits at once,
#: only one that hangs waits this long, and a loaded node (an emulated guest, a node
#: under I/O) can take tens of seconds of imports
START_TIMEOUT = 90.0
#: the address ganeti-rapi listens on when started by :func:`start_rapi` (default: all)
ENV_RAPI_BIND = constants.ENV_RAPI_BIND
#: where ``ganeti-noded``/``ganeti-masterd`` live (next to the package)
DAEMONS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "daemons")


def _daemon_env(paths: Paths, env: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(os.environ if env is None else env)
    out[constants.ENV_ROOTDIR] = paths.root
    return out


def noded_argv(bind: str, port: int, *, python: str | None = None) -> list[str]:
    """The command line that starts (and daemonizes) a node daemon."""
    return [python or sys.executable, os.path.join(DAEMONS_DIR, constants.NODED),
            "-b", bind, "-p", str(port)]


def _run_starter(argv: list[str], env: dict[str, str], what: str, timeout: float) -> None:
    try:
        res = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise errors.OpExecError(f"Starting {what} took more than {timeout}s") from exc
    if res.returncode != 0:
        text = (res.stderr or res.stdout).decode("utf-8", "replace").strip()
        raise errors.OpExecError(f"Cannot start {what} (exit {res.returncode}): {text}")


def start_noded(paths: Paths, bind: str, port: int, *, env: Mapping[str, str] | None = None,
                timeout: float = START_TIMEOUT) -> None:
    """Start ``ganeti-noded`` for ``paths`` on ``bind:port`` and wait until it answers."""
    _run_starter(noded_argv(bind, port), _daemon_env(paths, env), "the node daemon", timeout)
    wait_for_noded(bind, port, paths.server_pem, timeout=timeout)


def start_masterd(paths: Paths, *, env: Mapping[str, str] | None = None,
                  extra_args: Sequence[str] = (), timeout: float = START_TIMEOUT) -> None:
    """Start ``ganeti-masterd`` for ``paths`` and wait until LUXI answers."""
    argv = [sys.executable, os.path.join(DAEMONS_DIR, constants.MASTERD), *extra_args]
    _run_starter(argv, _daemon_env(paths, env), "the master daemon", timeout)
    wait_for_masterd(paths, timeout=timeout)


def start_rapi(paths: Paths, *, env: Mapping[str, str] | None = None,
               timeout: float = START_TIMEOUT) -> None:
    """Start ``ganeti-rapi`` for ``paths`` (the master) and wait until it accepts TLS.

    The port comes from ``$GANETI_RAPI_PORT`` (default 5080) and the address
    from ``$GANETI_RAPI_BIND`` (default: all addresses).
    """
    full = _daemon_env(paths, env)
    port = int(full.get(constants.ENV_RAPI_PORT) or constants.DEFAULT_RAPI_PORT)
    bind = full.get(ENV_RAPI_BIND) or ""
    argv = [sys.executable, os.path.join(DAEMONS_DIR, constants.RAPI), "-p", str(port)]
    if bind:
        argv += ["-b", bind]
    _run_starter(argv, full, "the RAPI daemon", timeout)
    wait_for_rapi(bind or "127.0.0.1", port, timeout=timeout)


def start_metad(paths: Paths, bind: str | None = None, port: int | None = None, *,
                env: Mapping[str, str] | None = None, timeout: float = START_TIMEOUT) -> None:
    """Start ``ganeti-metad`` for ``paths`` on ``bind:port`` (doc/images.md, "The
    metadata service"); it listens when this returns (the starter waits for its bind).

    Without ``bind``/``port`` the daemon takes ``$GANETI_METAD_BIND`` and
    ``$GANETI_METAD_PORT`` of ``env``, else 169.254.169.254 and 80.
    """
    argv = [sys.executable, os.path.join(DAEMONS_DIR, constants.METAD)]
    if bind:
        argv += ["-b", bind]
    if port:
        argv += ["-p", str(port)]
    _run_starter(argv, _daemon_env(paths, env), "the metadata daemon", timeout)


def start_master_daemons(paths: Paths, *, env: Mapping[str, str] | None = None,
                         extra_args: Sequence[str] = (), timeout: float = START_TIMEOUT) -> None:
    """Start the master daemon and RAPI side by side; wait until both answer.

    RAPI needs nothing from the master daemon to start (it asks it per
    request), so their start-ups overlap: on a slow node each takes seconds
    of imports.  When either cannot start, the other is stopped again and
    the first error is raised.
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        masterd = pool.submit(start_masterd, paths, env=env, extra_args=extra_args,
                              timeout=timeout)
        rapi = pool.submit(start_rapi, paths, env=env, timeout=timeout)
        failures = [exc for exc in (masterd.exception(), rapi.exception()) if exc]
    if failures:
        for daemon in (constants.RAPI, constants.MASTERD):
            stop_daemon(paths, daemon)
        raise failures[0]


def wait_for_rapi(address: str, port: int, *, timeout: float = START_TIMEOUT,
                  clock: Callable[[], float] = time.monotonic) -> None:
    """Wait until a TLS handshake with ``address:port`` succeeds."""
    from ganeti.http import client, tls
    ctx = tls.probe_context()
    deadline = clock() + timeout
    last: Exception | None = None
    while clock() < deadline:
        try:
            client.probe(address, port, ctx, 2.0)
            return
        except OSError as exc:
            last = exc
            time.sleep(0.05)
    raise errors.OpExecError(f"RAPI daemon at {address}:{port} not answering after"
                             f" {timeout}s: {last}")


def wait_for_noded(address: str, port: int, cert_file: str, *, timeout: float = START_TIMEOUT,
                   clock: Callable[[], float] = time.monotonic) -> None:
    """Wait until the node daemon at ``address:port`` answers ``version``."""
    from ganeti.rpc.client import probe_version
    from ganeti.rpc.transport import HttpsTransport
    transport = HttpsTransport(cert_file)
    deadline = clock() + timeout
    last: Exception | None = None
    while clock() < deadline:
        try:
            probe_version(transport, address, port, 2.0)
            return
        except errors.GanetiError as exc:
            last = exc
            time.sleep(0.05)
    raise errors.OpExecError(f"Node daemon at {address}:{port} not answering after"
                             f" {timeout}s: {last}")


def wait_for_masterd(paths: Paths, *, timeout: float = START_TIMEOUT,
                     clock: Callable[[], float] = time.monotonic) -> None:
    """Wait until the master daemon of ``paths`` answers a LUXI query."""
    from ganeti import luxi
    deadline = clock() + timeout
    last: Exception | None = None
    while clock() < deadline:
        try:
            luxi.Client(paths.master_socket, connect_timeout=2.0,
                        rw_timeout=5.0).QueryConfigValues(["cluster_name"])
            return
        except errors.GanetiError as exc:
            last = exc
            time.sleep(0.05)
    raise errors.OpExecError(f"Master daemon not answering after {timeout}s: {last}")


def daemon_pid(paths: Paths, daemon: str) -> int | None:
    """The pid of a running ``daemon`` (from its pid file), or None."""
    return pidfile.running_pid(paths.pid_file(daemon))


def stop_daemon(paths: Paths, daemon: str, *, timeout: float = 15.0,
                clock: Callable[[], float] = time.monotonic) -> bool:
    """SIGTERM a running ``daemon`` and wait (SIGKILL after ``timeout``).

    Returns True if a process was stopped, False if none was running.
    """
    pid = daemon_pid(paths, daemon)
    if pid is None:
        return False
    _signal_and_wait(pid, timeout, clock)
    return True


def _signal_and_wait(pid: int, timeout: float, clock: Callable[[], float]) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = clock() + timeout
    while clock() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = clock() + 5.0
    while clock() < deadline and _alive(pid):
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not pidfile.is_zombie(pid)   # a zombie is as good as dead
