"""Tests for ganeti.server.daemon and ganeti.server.logsetup (real processes)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ganeti import errors
from ganeti.pathutils import Paths
from ganeti.server import daemon, logsetup

NAME = "ganeti-testd"

SCRIPT = textwrap.dedent("""
    import logging, os, sys
    from ganeti.server import daemon

    MODE = sys.argv[1]
    log = logging.getLogger("testd")

    def add_options(parser):
        parser.add_argument("--marker", default="")

    def prepare(rt):
        if MODE == "fail":
            raise RuntimeError("cannot bind port 4242")
        rt.add_reopen_callback(lambda: log.info("reopened"))
        def stopped():
            if MODE == "slowstop":    # the main loop ends before this callback is done
                import time
                time.sleep(0.5)
            with open(rt.options.marker, "w") as fh:
                fh.write("stopped")
        rt.add_stop_callback(stopped)
        return "state"

    def exec_fn(rt, state):
        assert state == "state"
        if MODE == "fork":   # a child that outlives a killed daemon (as noded's may)
            child = os.fork()
            if child == 0:
                import time
                time.sleep(60)
                os._exit(0)
            open(rt.options.marker + ".child", "w").write(str(child))
        log.info("serving")
        rt.stop_event.wait(120)   # bounded: a stuck test daemon dies by itself

    sys.exit(daemon.run_daemon("ganeti-testd", add_options=add_options,
                               prepare_fn=prepare, exec_fn=exec_fn,
                               argv=sys.argv[2:]))
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie nobody reaped yet counts as dead
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _read_or_empty(path: str) -> str:
    """The file's text, or "" while it does not exist yet (a loaded machine
    may show the pid file before the log file)."""
    try:
        with open(path) as fh:
            return fh.read()
    except FileNotFoundError:
        return ""


def _wait_for(cond, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def env(tmp_path):
    script = tmp_path / "testd.py"
    script.write_text(SCRIPT)
    root = tmp_path / "root"
    root.mkdir()
    environ = dict(os.environ, GANETI_ROOTDIR=str(root))
    started: list[int] = []
    yield script, Paths(root=str(root)), environ, started
    for pid in started:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _start(script, environ, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], env=environ,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.integration  # starts a daemon
def test_daemon_start_refuses_second_copy_and_stops_on_sigterm(env, tmp_path) -> None:
    script, paths, environ, started = env
    marker = str(tmp_path / "marker")
    first = _start(script, environ, "ok", "--marker", marker)
    assert first.returncode == 0, first.stderr
    pid = int(open(paths.pid_file(NAME)).read())
    started.append(pid)
    assert pid != os.getpid() and _alive(pid)
    log_file = paths.daemon_log_file(NAME)
    assert _wait_for(lambda: os.path.exists(log_file) and "serving" in open(log_file).read())

    second = _start(script, environ, "ok", "--marker", marker)
    assert second.returncode == 1
    assert "already running" in second.stderr and str(pid) in second.stderr
    assert int(open(paths.pid_file(NAME)).read()) == pid   # untouched

    # SIGHUP reopens the log after rotation
    os.rename(log_file, log_file + ".1")
    os.kill(pid, signal.SIGHUP)
    assert _wait_for(lambda: os.path.exists(log_file) and "reopened" in open(log_file).read())

    os.kill(pid, signal.SIGTERM)
    assert _wait_for(lambda: not _alive(pid)), "daemon ignored SIGTERM"
    assert not os.path.exists(paths.pid_file(NAME))
    assert open(marker).read() == "stopped"
    assert "stopped" in open(log_file).read()

    # and it can be started again
    third = _start(script, environ, "ok", "--marker", marker)
    assert third.returncode == 0, third.stderr
    pid3 = int(open(paths.pid_file(NAME)).read())
    started.append(pid3)
    os.kill(pid3, signal.SIGTERM)
    assert _wait_for(lambda: not _alive(pid3))


@pytest.mark.integration  # starts a daemon
def test_startup_failure_is_reported_by_the_starting_process(env) -> None:
    script, paths, environ, _ = env
    result = _start(script, environ, "fail")
    assert result.returncode == 1
    assert "cannot bind port 4242" in result.stderr
    assert not os.path.exists(paths.pid_file(NAME))


@pytest.mark.integration  # starts a daemon
def test_foreground_mode(env, tmp_path) -> None:
    script, paths, environ, started = env
    marker = str(tmp_path / "marker")
    proc = subprocess.Popen([sys.executable, str(script), "ok", "-f", "-d", "--marker", marker],
                            env=environ, stderr=subprocess.PIPE, text=True)
    started.append(proc.pid)
    try:
        assert _wait_for(lambda: os.path.exists(paths.pid_file(NAME))
                         and open(paths.pid_file(NAME)).read().strip() == str(proc.pid))
        assert _wait_for(lambda: "serving" in _read_or_empty(paths.daemon_log_file(NAME)))
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0
    assert "serving" in err
    assert not os.path.exists(paths.pid_file(NAME))


@pytest.mark.integration  # starts a daemon
def test_a_child_of_a_killed_daemon_does_not_keep_a_new_copy_from_starting(env,
                                                                            tmp_path) -> None:
    script, paths, environ, started = env
    marker = str(tmp_path / "marker")
    first = _start(script, environ, "fork", "--marker", marker)
    assert first.returncode == 0, first.stderr
    pid = int(open(paths.pid_file(NAME)).read())
    started.append(pid)
    assert _wait_for(lambda: os.path.exists(marker + ".child")
                     and open(marker + ".child").read().strip() != "")
    child = int(open(marker + ".child").read())
    started.append(child)
    os.kill(pid, signal.SIGKILL)
    assert _wait_for(lambda: not _alive(pid))
    assert _alive(child)                     # the child still runs ...
    second = _start(script, environ, "ok", "--marker", marker)
    assert second.returncode == 0, second.stderr   # ... and holds no lock
    pid2 = int(open(paths.pid_file(NAME)).read())
    started.append(pid2)
    assert pid2 not in (pid, child) and _alive(pid2)


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_a_non_file_at_the_pid_file_path_is_moved_aside(tmp_path, kind: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "x.pid"
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    pidfile = daemon.PidFile(str(path))
    with caplog.at_level(logging.WARNING):
        pidfile.acquire()
    try:
        pidfile.write_pid(4242)
        assert path.is_file() and not path.is_symlink()
        assert path.read_text() == "4242\n"
        assert target.read_text() == "keep me\n"   # never written through the link
        assert os.path.lexists(str(path) + ".invalid-1")
        assert "moved it aside" in caplog.text
    finally:
        pidfile.release()


def test_pid_file_lock_in_process(tmp_path) -> None:
    path = str(tmp_path / "x.pid")
    first = daemon.PidFile(path)
    first.acquire()
    first.write_pid(4242)
    second = daemon.PidFile(path)
    with pytest.raises(errors.LockError, match="4242"):
        second.acquire()
    first.release()
    assert not os.path.exists(path)
    second.acquire()
    second.release()


def test_common_options() -> None:
    parser = daemon.build_parser("x", add_options=lambda p: p.add_argument("--port", type=int))
    opts = parser.parse_args(["-f", "--debug", "--port", "5"])
    assert opts.foreground and opts.debug and opts.port == 5
    assert not parser.parse_args([]).foreground


def test_log_reopen(tmp_path) -> None:
    logfile = str(tmp_path / "log" / "node-daemon.log")
    logger = logging.getLogger("test.logsetup.reopen")
    logger.propagate = False
    handle = logsetup.setup_logging(logfile, program="ganeti-noded", logger=logger)
    try:
        logger.info("first")
        os.rename(logfile, logfile + ".1")
        handle.reopen()
        logger.info("second")
        logger.debug("hidden")
    finally:
        handle.close()
    assert "first" in open(logfile + ".1").read()
    text = open(logfile).read()
    assert "second" in text and "ganeti-noded" in text and "hidden" not in text


def test_a_symlink_at_the_log_path_is_moved_aside_not_written_through(tmp_path) -> None:
    logfile = tmp_path / "node-daemon.log"
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    logfile.symlink_to(target)
    logger = logging.getLogger("test.logsetup.symlink")
    logger.propagate = False
    handle = logsetup.setup_logging(str(logfile), program="ganeti-noded", logger=logger)
    try:
        logger.info("hello")
    finally:
        handle.close()
    assert target.read_text() == "keep me\n"
    assert not logfile.is_symlink()
    text = logfile.read_text()
    assert "is a symbolic link" in text and "moved it aside" in text and "hello" in text
    assert os.path.islink(str(logfile) + ".invalid-1")


def test_access_log_common_log_format(tmp_path) -> None:
    line = logsetup.format_access_line("127.0.0.1", "jack", 'GET /2/info HTTP/1.1', 200, 2326,
                                       when=971186136.0)
    assert line == '127.0.0.1 - jack [10/Oct/2000:13:55:36 +0000] "GET /2/info HTTP/1.1" 200 2326'
    assert logsetup.format_access_line("::1", None, 'GET /"x HTTP/1.0', 404, None, 0.0) == \
        '::1 - - [01/Jan/1970:00:00:00 +0000] "GET /\\"x HTTP/1.0" 404 -'
    path = str(tmp_path / "rapi-access.log")
    access = logsetup.AccessLog(path, clock=lambda: 971186136.0)
    access.log("10.0.0.1", "bob", "PUT /2/instances/x/startup HTTP/1.1", 200, 5)
    os.rename(path, path + ".1")
    access.reopen()
    access.log("10.0.0.1", None, "GET /version HTTP/1.1", 200, 1)
    access.close()
    assert open(path + ".1").read().count("\n") == 1
    assert open(path).read() == '10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /version HTTP/1.1" 200 1\n'


def test_a_starter_that_stopped_waiting_does_not_kill_the_daemon(tmp_path, caplog) -> None:
    """A master daemon may wait long for its vote: when the process that started it
    gave up (its end of the pipe closed), telling it "ready" must not end the daemon."""
    import logging
    import os

    from ganeti.server import daemon
    rfd, wfd = os.pipe()
    os.close(rfd)
    with caplog.at_level(logging.WARNING):
        daemon._notify(wfd, b"ready")     # EPIPE (SIGPIPE is ignored by Python)
    assert "stopped waiting" in caplog.text
    try:
        os.fstat(wfd)
    except OSError:
        pass
    else:
        raise AssertionError("the notify pipe was left open")


@pytest.mark.integration  # starts a daemon
def test_a_stop_callback_finishes_before_the_daemon_exits(env, tmp_path) -> None:
    """The stop callbacks run in a helper thread: the daemon waits for them before it
    exits (it used to exit as soon as its main loop saw the stop)."""
    script, paths, environ, started = env
    marker = str(tmp_path / "marker")
    first = _start(script, environ, "slowstop", "--marker", marker)
    assert first.returncode == 0, first.stderr
    pid = int(open(paths.pid_file(NAME)).read())
    started.append(pid)
    log_file = paths.daemon_log_file(NAME)
    assert _wait_for(lambda: os.path.exists(log_file) and "serving" in open(log_file).read())
    os.kill(pid, signal.SIGTERM)
    assert _wait_for(lambda: not _alive(pid)), "daemon ignored SIGTERM"
    assert open(marker).read() == "stopped"
