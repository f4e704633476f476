"""ganeti.daemonctl: a daemon's pid from its pid file, and stopping it (starting: test_bootstrap.py
and the virtual-cluster tests, which start every daemon through it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ganeti import constants, daemonctl, errors
from ganeti.pathutils import Paths
from ganeti.utils import pidfile

#: a process that says "ready" once it ignores SIGTERM, then sleeps
_IGNORES_TERM = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                 "print('ready', flush=True); time.sleep(60)")


def _write_pid(paths: Paths, pid: int) -> None:
    os.makedirs(paths.run_dir, exist_ok=True)
    with open(paths.pid_file(constants.NODED), "w") as fh:
        fh.write(f"{pid}\n")


def test_daemon_pid_ignores_dead_and_zombie_processes(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    os.makedirs(paths.run_dir, exist_ok=True)

    def write_pid(pid: int) -> None:
        with open(paths.pid_file(constants.NODED), "w") as fh:
            fh.write(f"{pid}\n")

    write_pid(os.getpid())
    assert daemonctl.daemon_pid(paths, constants.NODED) == os.getpid()
    # a daemon killed without cleanup whose parent has not reaped it yet
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while not pidfile.is_zombie(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    write_pid(child.pid)
    try:
        assert pidfile.is_zombie(child.pid)
        assert daemonctl.daemon_pid(paths, constants.NODED) is None
    finally:
        child.wait()
    assert daemonctl.daemon_pid(paths, constants.NODED) is None    # gone altogether


def test_stop_daemon_without_a_running_daemon_says_so(tmp_path) -> None:
    assert daemonctl.stop_daemon(Paths(root=str(tmp_path)), constants.NODED) is False


def test_stop_daemon_terminates_the_process(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write_pid(paths, child.pid)
        assert daemonctl.stop_daemon(paths, constants.NODED, timeout=30) is True
        child.wait(timeout=10)
        with pytest.raises(ProcessLookupError):
            os.kill(child.pid, 0)
        assert daemonctl.daemon_pid(paths, constants.NODED) is None
    finally:
        child.kill()
        child.wait()


def test_stop_daemon_kills_a_process_that_ignores_sigterm(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", _IGNORES_TERM], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        _write_pid(paths, child.pid)
        assert daemonctl.stop_daemon(paths, constants.NODED, timeout=0.5) is True
        child.wait(timeout=10)              # (stop_daemon reaped its own child already)
        with pytest.raises(ProcessLookupError):
            os.kill(child.pid, 0)           # SIGTERM alone would not have ended it
    finally:
        child.kill()
        child.wait()


def test_master_daemons_start_side_by_side(tmp_path, monkeypatch) -> None:
    """masterd and RAPI are started at once: each fake waits for the other to have begun
    (a barrier that would break if they ran one after the other)."""
    import threading

    paths = Paths(root=str(tmp_path))
    both = threading.Barrier(2, timeout=10)
    started = []

    def fake(name):  # type: ignore[no-untyped-def]
        def start(p, **kwargs):  # type: ignore[no-untyped-def]
            assert p is paths
            both.wait()
            started.append((name, kwargs.get("extra_args", ())))
        return start

    monkeypatch.setattr(daemonctl, "start_masterd", fake("masterd"))
    monkeypatch.setattr(daemonctl, "start_rapi", fake("rapi"))
    monkeypatch.setattr(daemonctl, "stop_daemon", lambda *a, **k: pytest.fail("stopped"))
    daemonctl.start_master_daemons(paths, extra_args=["--no-voting"])
    assert sorted(started) == [("masterd", ["--no-voting"]), ("rapi", ())]


def test_a_master_daemon_that_cannot_start_stops_the_other(tmp_path, monkeypatch) -> None:
    paths = Paths(root=str(tmp_path))
    stopped = []

    def masterd(p, **kwargs):  # type: ignore[no-untyped-def]
        raise errors.OpExecError("Cannot start the master daemon (exit 1): no vote")

    monkeypatch.setattr(daemonctl, "start_masterd", masterd)
    monkeypatch.setattr(daemonctl, "start_rapi", lambda p, **kwargs: None)
    monkeypatch.setattr(daemonctl, "stop_daemon",
                        lambda p, daemon, **k: stopped.append(daemon) or True)
    with pytest.raises(errors.OpExecError, match="no vote"):
        daemonctl.start_master_daemons(paths)
    assert stopped == [constants.RAPI, constants.MASTERD]
