"""ganeti.utils.localfile: local files are never opened through a link."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ganeti import errors
from ganeti.utils import localfile


def _plant(path: Path, kind: str, target: Path) -> None:
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_text("x")
    else:
        os.mkfifo(path)


KINDS = ["symlink", "directory", "fifo"]


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "precious"
    path.write_text("keep me\n")
    return path


def test_a_regular_file_opens_and_is_created(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = localfile.open_local(str(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"x")
        assert os.get_inheritable(fd) is False
    finally:
        os.close(fd)
    assert path.read_bytes() == b"x" and oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("kind", KINDS)
def test_without_replace_a_non_file_is_refused_and_left_alone(tmp_path: Path, target: Path,
                                                              kind: str) -> None:
    path = tmp_path / "lock"
    _plant(path, kind, target)
    expected = {"symlink": "a symbolic link", "directory": "a directory", "fifo": "a FIFO"}
    with pytest.raises(errors.UntrustedFileError, match=f"lock file .* is {expected[kind]}"):
        localfile.open_local(str(path), os.O_RDWR | os.O_CREAT, what="lock file")
    assert os.path.lexists(path) and not os.path.lexists(str(path) + ".invalid-1")
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("kind", KINDS)
def test_with_replace_a_non_file_is_moved_aside_with_a_warning(
        tmp_path: Path, target: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "state"
    _plant(path, kind, target)
    with caplog.at_level(logging.WARNING):
        fd = localfile.open_local(str(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC,
                                  what="state file", replace=True)
    os.close(fd)
    assert path.is_file() and not path.is_symlink() and path.read_bytes() == b""
    assert os.path.lexists(str(path) + ".invalid-1")
    assert target.read_text() == "keep me\n"
    assert "State file" in caplog.text and "moved it aside" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_read_local_treats_a_replaced_non_file_as_missing(tmp_path: Path, target: Path,
                                                          kind: str) -> None:
    path = tmp_path / "state"
    _plant(path, kind, target)
    assert localfile.read_local(str(path), replace=True) is None
    assert not os.path.lexists(path) and os.path.lexists(str(path) + ".invalid-1")


def test_read_local_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert localfile.read_local(str(tmp_path / "none")) is None


@pytest.mark.parametrize("kind", KINDS)
def test_write_local_atomic_never_writes_through_a_link(tmp_path: Path, target: Path,
                                                        kind: str) -> None:
    path = tmp_path / "status"
    _plant(path, kind, target)
    localfile.write_local_atomic(str(path), "new\n")
    assert path.read_text() == "new\n" and not path.is_symlink()
    assert target.read_text() == "keep me\n"


def test_move_aside_picks_the_next_free_name(tmp_path: Path) -> None:
    path = tmp_path / "x"
    for k in (1, 2):
        path.mkdir()
        assert localfile.move_aside(str(path)) == f"{path}.invalid-{k}"
