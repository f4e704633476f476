"""The common daemon runner: options, pid file, daemonizing, signals, logging.

Every daemon main is a few lines around :func:`run_daemon`::

    def main() -> int:
        return run_daemon(constants.NODED, add_options=_add_options,
                          check_fn=_check, prepare_fn=_prepare, exec_fn=_serve)

The sequence is:

1. parse ``-f/--foreground``, ``-d/--debug`` and the daemon's own options
   (``add_options(parser)``);
2. ``check_fn(options, paths)``: cheap checks, still attached to the
   terminal; raise :class:`errors.GanetiError` to refuse to start;
3. lock the pid file ``<run_dir>/<name>.pid`` (``flock``): a second copy
   fails here with "already running (pid N)" and exit status 1;
4. unless ``--foreground``, daemonize with python-daemon's
   ``DaemonContext``.  The starting process waits until step 5 finished and
   exits 0 on success, or prints the error and exits 1, so that
   ``ganeti-noded && echo started`` means what it says;
5. set up logging (``<log_dir>/<DAEMON_LOG_NAMES[name]>``), install the
   signal handlers and call ``state = prepare_fn(runtime)`` (bind sockets,
   open the config...), with the daemon's process tuning
   (:mod:`ganeti.server.tuning`) applied before and after it;
6. ``exec_fn(runtime, state)`` runs the daemon; it should return soon after
   ``runtime.stop_event`` is set.

Signals: SIGTERM and SIGINT set ``runtime.stop_event`` and run the stop
callbacks (``runtime.add_stop_callback``) in a helper thread, so a callback
such as ``server.shutdown`` may block.  SIGHUP reopens the log files and
runs the reopen callbacks (keep those short: they run in the signal
handler).  SIGUSR2 (or ``runtime.request_restart()``) stops the daemon like
SIGTERM and then starts it again with the same command line (``exec`` of
``sys.orig_argv``, so a foreground daemon keeps its pid and a detached one
detaches again); the node daemon uses it after a simulated power cycle.
On exit the pid file is removed.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import resource
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import daemon as pydaemon

from ganeti import constants, errors
from ganeti.pathutils import Paths, get_paths
from ganeti.redact import Redactor
from ganeti.server.logsetup import LogHandle, setup_logging
from ganeti.server.tuning import Tuning, after_prepare, before_prepare
from ganeti.utils import localfile

__all__ = ["PidFile", "DaemonRuntime", "build_parser", "run_daemon", "raise_fd_limit"]

logger = logging.getLogger(__name__)

_READY = b"OK"
#: seconds a stopping daemon waits for its stop callbacks (closing servers, saving state)
STOP_CALLBACKS_TIMEOUT = 30.0


class PidFile:
    """A pid file held with an exclusive ``flock`` for the daemon's lifetime.

    The lock belongs to the open file description, so it survives the
    daemonizing forks and disappears when the daemon dies, even without
    cleanup.  Every descriptor of that description holds it, so the
    processes the daemon itself forks (noded's request and spare children)
    must not keep one: :meth:`keep_out_of_children` closes the descriptor
    in every child forked afterwards (``os.register_at_fork``; closing, not
    ``LOCK_UN``, which would drop the daemon's own lock), and exec'd
    programs never get it (``O_CLOEXEC``).  A child still running when the
    daemon is killed then cannot keep a new copy from starting.

    The path is opened without following a symbolic link
    (:mod:`ganeti.utils.localfile`); something other than a regular file
    there is moved aside with a warning.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._hooked = False

    def acquire(self) -> None:
        """Lock the pid file; raises :class:`errors.LockError` if another copy runs."""
        fd = localfile.open_local(self.path, os.O_RDWR | os.O_CREAT, 0o644, what="pid file",
                                  replace=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                other = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise errors.LockError(
                f"Another copy is already running (pid {other}, pid file {self.path})") from None
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def fileno(self) -> int:
        """The locked file descriptor (must be kept open across daemonizing)."""
        if self._fd is None:
            raise errors.ProgrammerError("Pid file is not locked")
        return self._fd

    def keep_out_of_children(self) -> None:
        """From now on, close the pid file in every process this one forks.

        Call it in the daemon's final process (after daemonizing): the
        daemonizing forks themselves must carry the lock over.
        """
        if not self._hooked:
            self._hooked = True
            os.register_at_fork(after_in_child=self._close_in_child)

    def _close_in_child(self) -> None:
        """In a freshly forked child: drop our descriptor (the parent keeps the lock)."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def write_pid(self, pid: int | None = None) -> None:
        """Store ``pid`` (default: ours) in the locked file."""
        fd = self.fileno()
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{pid if pid is not None else os.getpid()}\n".encode("ascii"), 0)

    def close(self) -> None:
        """Close our descriptor without removing the file (other holders keep the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def release(self) -> None:
        """Remove the pid file and drop the lock."""
        if self._fd is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.close()


@dataclass
class DaemonRuntime:
    """What a running daemon gets from :func:`run_daemon`."""

    name: str
    options: argparse.Namespace
    paths: Paths
    logs: LogHandle | None = None
    #: the secret values this daemon scrubs from its log lines (ganeti.redact);
    #: the daemon adds what it learns (the master: its config and jobs)
    redactor: Redactor = field(default_factory=Redactor)
    stop_event: threading.Event = field(default_factory=threading.Event)
    restart_requested: bool = False
    _stop_callbacks: list[Callable[[], None]] = field(default_factory=list)
    _reopen_callbacks: list[Callable[[], None]] = field(default_factory=list)
    _stop_thread: threading.Thread | None = None

    def add_stop_callback(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` (in a helper thread) when a stop is requested."""
        self._stop_callbacks.append(fn)

    def add_reopen_callback(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on SIGHUP, after the log files were reopened."""
        self._reopen_callbacks.append(fn)

    def request_stop(self) -> None:
        """Set ``stop_event`` and run the stop callbacks in a helper thread."""
        if self.stop_event.is_set():
            return
        self.stop_event.set()

        def _run_callbacks() -> None:
            for fn in self._stop_callbacks:
                try:
                    fn()
                except Exception:   # a failing callback must not block the others
                    logger.exception("Stop callback %r failed", fn)

        self._stop_thread = threading.Thread(target=_run_callbacks, name="daemon-stop",
                                             daemon=True)
        self._stop_thread.start()

    def wait_stop_callbacks(self, timeout: float = STOP_CALLBACKS_TIMEOUT) -> None:
        """Wait (at most ``timeout`` seconds) until the stop callbacks ran: the main loop
        may end as soon as the stop is requested, before the helper thread did its work."""
        thread = self._stop_thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                logger.warning("The stop callbacks did not end within %.0fs", timeout)

    def request_restart(self) -> None:
        """Stop as :meth:`request_stop` does, then start again (see the module docstring)."""
        self.restart_requested = True
        self.request_stop()

    def reopen(self) -> None:
        """Reopen log files and run the reopen callbacks."""
        if self.logs is not None:
            self.logs.reopen()
        for fn in self._reopen_callbacks:
            fn()


def raise_fd_limit() -> int:
    """Raise this process's soft descriptor limit to its hard limit; the soft limit now.

    Idle connections each hold a descriptor (noded's pending handshakes,
    masterd's LUXI clients); the usual soft limit of 1024 would otherwise
    cap them below ``--max-handshakes`` / ``--max-clients``.  Failures are
    logged.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 65536)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            logger.warning("Cannot raise the descriptor limit to %d: %s", hard, exc)
    return soft


def build_parser(name: str, description: str = "",
                 add_options: Callable[[argparse.ArgumentParser], None] | None = None,
                 ) -> argparse.ArgumentParser:
    """The option parser every daemon shares, plus its own options."""
    parser = argparse.ArgumentParser(prog=name, description=description or f"Ganeti daemon {name}")
    parser.add_argument("-f", "--foreground", action="store_true",
                        help="do not daemonize; also log to standard error")
    parser.add_argument("-d", "--debug", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=constants.VERSION_LINE,
                        help="print the version and exit (starts nothing)")
    if add_options is not None:
        add_options(parser)
    return parser


def run_daemon(name: str, *, exec_fn: Callable[[DaemonRuntime, Any], None] | None = None,
               prepare_fn: Callable[[DaemonRuntime], Any] | None = None,
               check_fn: Callable[[argparse.Namespace, Paths], None] | None = None,
               add_options: Callable[[argparse.ArgumentParser], None] | None = None,
               description: str = "", argv: list[str] | None = None,
               paths: Paths | None = None, tuning: Tuning | None = None) -> int:
    """Run a daemon as described in the module docstring; returns the exit status.

    ``exec_fn`` defaults to waiting for a stop request.  ``paths`` defaults
    to ``get_paths()`` (``$GANETI_ROOTDIR``).  ``tuning`` (heap and garbage
    collector, :mod:`ganeti.server.tuning`) is applied around ``prepare_fn``.
    """
    options = build_parser(name, description, add_options).parse_args(argv)
    paths = paths or get_paths()
    pidfile = PidFile(paths.pid_file(name))
    try:
        if check_fn is not None:
            check_fn(options, paths)
        os.makedirs(paths.run_dir, exist_ok=True)
        os.makedirs(paths.log_dir, exist_ok=True)
        pidfile.acquire()
    except (errors.GanetiError, OSError) as exc:
        sys.stderr.write(f"{name}: cannot start: {exc}\n")
        return 1
    if options.foreground:
        code, restart = _run(name, options, paths, pidfile, prepare_fn, exec_fn, None,
                             tuning)
        if restart:
            _restart(name, argv)
        return code

    for stream in (sys.stdout, sys.stderr):
        if stream is not None:   # None when started with a closed descriptor
            stream.flush()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid:
        os.close(wfd)
        pidfile.close()   # the daemon keeps the lock
        return _wait_for_startup(name, pid, rfd)
    code = 1
    try:
        os.close(rfd)
        context = pydaemon.DaemonContext(
            detach_process=True, files_preserve=[pidfile.fileno(), wfd],
            signal_map={}, umask=0o022, working_directory="/", prevent_core=False)
        context.open()
        code, restart = _run(name, options, paths, pidfile, prepare_fn, exec_fn, wfd,
                             tuning)
        if restart:
            _restart(name, argv)
    except BaseException:   # never return into the caller's stack from a fork
        logger.exception("Daemon %s failed", name)
    finally:
        os._exit(code)


def _restart(name: str, argv: list[str] | None) -> None:
    """Replace this process by a new start of the same command line.

    Only for a daemon started from its own command line (``argv`` None): a
    daemon embedded in another program (``run_daemon(argv=...)``) just stops.
    """
    if argv is not None:
        logger.warning("%s: restart requested inside another program; stopping only", name)
        return
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    # a detached daemon's standard descriptors may be closed (and their numbers
    # reused by close-on-exec files); the new start needs them open across exec
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        try:
            keep = os.get_inheritable(fd)
        except OSError:
            keep = False
        if not keep:
            os.dup2(null, fd)
    if null > 2:
        os.close(null)
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def _wait_for_startup(name: str, pid: int, rfd: int) -> int:
    chunks = []
    with os.fdopen(rfd, "rb") as pipe:
        while True:
            chunk = pipe.read(4096)
            if not chunk:
                break
            chunks.append(chunk)
    os.waitpid(pid, 0)
    message = b"".join(chunks)
    if message == _READY:
        return 0
    text = message.decode("utf-8", "replace").strip() or "the daemon exited during startup"
    sys.stderr.write(f"{name}: cannot start: {text}\n")
    return 1


def _notify(fd: int | None, message: bytes) -> None:
    """Tell the starting process how the start went.  A starter that gave up waiting
    (its timeout passed: a master vote can wait long for a majority of nodes) has
    closed its end; the daemon runs on all the same."""
    if fd is None:
        return
    try:
        os.write(fd, message)
    except OSError as exc:
        logger.warning("The process that started this daemon stopped waiting (%s);"
                       " running on", exc.strerror or exc)
    finally:
        os.close(fd)


def _run(name: str, options: argparse.Namespace, paths: Paths, pidfile: PidFile,
         prepare_fn: Callable[[DaemonRuntime], Any] | None,
         exec_fn: Callable[[DaemonRuntime, Any], None] | None,
         notify_fd: int | None, tuning: Tuning | None = None) -> tuple[int, bool]:
    """Run the daemon; its exit status, and whether it asked to be restarted."""
    pidfile.write_pid()
    pidfile.keep_out_of_children()
    redactor = Redactor()
    logs = setup_logging(paths.daemon_log_file(name), debug=options.debug,
                         stderr=options.foreground, program=name, redactor=redactor)
    runtime = DaemonRuntime(name=name, options=options, paths=paths, logs=logs,
                            redactor=redactor)
    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, lambda *_: runtime.request_stop()),
        signal.SIGINT: signal.signal(signal.SIGINT, lambda *_: runtime.request_stop()),
        signal.SIGHUP: signal.signal(signal.SIGHUP, lambda *_: runtime.reopen()),
        signal.SIGUSR2: signal.signal(signal.SIGUSR2, lambda *_: runtime.request_restart()),
    }
    try:
        try:
            if tuning is not None:
                before_prepare(tuning)
            state = prepare_fn(runtime) if prepare_fn is not None else None
            if tuning is not None:
                after_prepare(tuning)
        except Exception as exc:
            logger.exception("%s failed to start", name)
            # the pid file goes first: the starting process returns as soon as it hears
            pidfile.release()
            _notify(notify_fd, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
            return 1, False
        _notify(notify_fd, _READY)
        logger.info("%s started (pid %d)", name, os.getpid())
        if exec_fn is None:
            while not runtime.stop_event.wait(1.0):
                pass
        else:
            exec_fn(runtime, state)
        runtime.wait_stop_callbacks()
        if runtime.restart_requested:
            logger.info("%s stopped; restarting", name)
            return 0, True
        logger.info("%s stopped", name)
        return 0, False
    except Exception:
        logger.exception("%s died on an unexpected error", name)
        return 1, False
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        pidfile.release()
        logs.close()
