"""ganeti.watcher.state and .nodes: state files, the lock, the watcher hooks."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ganeti import errors
from ganeti.pathutils import Paths
from ganeti.watcher import core, nodes, state


def test_state_file_round_trips(tmp_path: Path) -> None:
    path = str(tmp_path / "watcher.g1.data")
    st = core.GroupState(attempts={"i1": core.Attempts(2, 5.0)}, bootids={"n1": "b"})
    state.save_state(path, st)
    assert state.load_state(path) == st
    assert [p.name for p in tmp_path.iterdir()] == ["watcher.g1.data"]   # no temp files left


def test_missing_state_file_is_empty(tmp_path: Path) -> None:
    assert state.load_state(str(tmp_path / "none")) == core.GroupState()


@pytest.mark.parametrize("content", [b"{not json", b'{"version": 7}', b"\xff\xfe"],
                         ids=["garbage", "wrong-version", "binary"])
def test_corrupt_state_file_is_reset_with_a_log_line(tmp_path: Path, content: bytes,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "watcher.g1.data"
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert state.load_state(str(path)) == core.GroupState()
    assert "is corrupt" in caplog.text and "resetting it" in caplog.text


def test_instance_status_file(tmp_path: Path) -> None:
    path = tmp_path / "instance-status"
    state.write_instance_status(str(path), [("b", "running"), ("a", "ERROR_down")])
    assert path.read_text() == "a ERROR_down\nb running\n"


def test_second_lock_holder_is_refused(tmp_path: Path) -> None:
    first, second = (state.WatcherLock(str(tmp_path / "lock")) for _ in range(2))
    assert first.acquire()
    assert not second.acquire()
    assert second.holder() == str(os.getpid())
    first.release()
    assert second.acquire()


def test_a_symlink_at_the_lock_path_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    (tmp_path / "lock").symlink_to(target)
    lock = state.WatcherLock(str(tmp_path / "lock"))
    with pytest.raises(errors.UntrustedFileError, match="is a symbolic link"):
        lock.acquire()
    assert target.read_text() == "keep me\n" and (tmp_path / "lock").is_symlink()


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo"])
def test_a_non_file_at_the_state_path_is_moved_aside_and_the_state_starts_empty(
        tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "watcher.g1.data"
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(target)
    else:
        os.mkfifo(path)
    with caplog.at_level(logging.WARNING):
        assert state.load_state(str(path)) == core.GroupState()
    assert "moved it aside" in caplog.text
    st = core.GroupState(attempts={"i1": core.Attempts(1, 5.0)})
    state.save_state(str(path), st)
    assert state.load_state(str(path)) == st
    assert target.read_text() == "keep me\n"


def test_a_directory_at_the_status_path_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "instance-status"
    path.mkdir()
    state.write_instance_status(str(path), [("a", "running")])
    assert path.read_text() == "a running\n"


def _hook(directory: Path, name: str, body: str, mode: int = 0o755) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(body)
    path.chmod(mode)


def test_hooks_run_sorted_valid_and_logged(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    paths = Paths(root=str(tmp_path))
    hooks = Path(paths.watcher_hooks_dir)
    order = tmp_path / "order"
    _hook(hooks, "20-second", f"#!/bin/sh\necho second >> {order}\necho hello-out\n")
    _hook(hooks, "10-first", f"#!/bin/sh\necho first >> {order}\nexit 3\n")
    _hook(hooks, "bad.name", f"#!/bin/sh\necho bad >> {order}\n")
    _hook(hooks, "30-not-executable", f"#!/bin/sh\necho noexec >> {order}\n", mode=0o644)
    with caplog.at_level(logging.INFO):
        results = nodes.run_hooks(paths)
    assert order.read_text() == "first\nsecond\n"
    assert [(r.name, r.ok) for r in results] == [("10-first", False), ("20-second", True)]
    assert "exited with status 3" in caplog.text and "hello-out" in caplog.text


def test_hooks_are_time_limited(tmp_path: Path) -> None:
    paths = Paths(root=str(tmp_path))
    _hook(Path(paths.watcher_hooks_dir), "slow", "#!/bin/sh\nsleep 30\n")
    (result,) = nodes.run_hooks(paths, timeout=0.2)
    assert not result.ok and "timed out" in result.detail


def test_no_hooks_directory_means_no_hooks(tmp_path: Path) -> None:
    assert nodes.run_hooks(Paths(root=str(tmp_path))) == []
