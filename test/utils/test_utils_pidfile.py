"""ganeti.utils.pidfile: a pid file names a running process, or it does not."""

import os
import subprocess
import sys

from ganeti.utils import pidfile


def test_running_process(tmp_path) -> None:
    path = tmp_path / "d.pid"
    path.write_text(f"{os.getpid()}\n")
    assert pidfile.running_pid(str(path)) == os.getpid()


def test_missing_garbage_and_dead(tmp_path) -> None:
    path = tmp_path / "d.pid"
    assert pidfile.running_pid(str(path)) is None
    for text in ("", "abc", "-5", "0", "²", "1" * 100):
        path.write_text(text)
        assert pidfile.running_pid(str(path)) is None, text
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    path.write_text(str(child.pid))
    assert pidfile.running_pid(str(path)) is None


def test_symlink_is_not_followed(tmp_path) -> None:
    real = tmp_path / "real.pid"
    real.write_text(str(os.getpid()))
    link = tmp_path / "d.pid"
    link.symlink_to(real)
    assert pidfile.running_pid(str(link)) is None


def test_a_fifo_or_directory_is_no_pid_file_and_does_not_block(tmp_path) -> None:
    fifo = tmp_path / "fifo.pid"
    os.mkfifo(fifo)
    assert pidfile.running_pid(str(fifo)) is None
    directory = tmp_path / "dir.pid"
    directory.mkdir()
    assert pidfile.running_pid(str(directory)) is None
