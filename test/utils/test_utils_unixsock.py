"""ganeti.utils.unixsock: Unix sockets bound and reached at paths longer than ``sun_path``."""

from __future__ import annotations

import errno
import os
import pathlib
import socket

import pytest

from ganeti.utils import unixsock


def _long_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """A directory whose socket paths are over the limit (as under a deep temporary root)."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    return deep


def _pair(path: str) -> tuple[socket.socket, socket.socket, socket.socket]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unixsock.bind(server, path)
    server.listen(1)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    unixsock.connect(client, path)
    conn, _ = server.accept()
    return server, client, conn


@pytest.mark.parametrize("deep", [False, True], ids=["short", "over-the-limit"])
def test_bind_and_connect_at_the_real_path(tmp_path: pathlib.Path, deep: bool) -> None:
    path = str((_long_dir(tmp_path) if deep else tmp_path) / "master.sock")
    assert unixsock.too_long(path) == deep
    server, client, conn = _pair(path)
    with server, client, conn:
        client.sendall(b"ping")
        assert conn.recv(4) == b"ping"
        # the socket is at its real path, where any other process finds it
        assert pathlib.Path(path).is_socket()
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with other:
            unixsock.connect(other, path)


def test_plain_sockets_refuse_such_a_path(tmp_path: pathlib.Path) -> None:
    """What the helpers are for: the same path bound directly fails."""
    path = str(_long_dir(tmp_path) / "master.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        with pytest.raises(OSError, match="too long"):
            sock.bind(path)


def test_the_limit_is_sun_path_less_its_nul() -> None:
    assert unixsock.MAX_PATH == 107
    assert not unixsock.too_long("/" + "x" * 106)
    assert unixsock.too_long("/" + "x" * 107)


def test_no_socket_there_is_the_usual_error(tmp_path: pathlib.Path) -> None:
    """A long path with nothing listening: the error of the connection, not a hidden one."""
    path = str(_long_dir(tmp_path) / "absent.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        with pytest.raises(FileNotFoundError):
            unixsock.connect(sock, path)


def test_a_file_name_too_long_even_from_its_directory_names_path_and_limit(
        tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / ("s" * 100))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        with pytest.raises(OSError) as info:
            unixsock.bind(sock, path)
    assert info.value.errno == errno.ENAMETOOLONG
    assert path in str(info.value) and "107-byte limit" in str(info.value)
    assert not os.path.exists(path)


def test_no_descriptor_is_left_open(tmp_path: pathlib.Path) -> None:
    before = set(os.listdir("/proc/self/fd"))
    path = str(_long_dir(tmp_path) / "master.sock")
    server, client, conn = _pair(path)
    for sock in (server, client, conn):
        sock.close()
    assert set(os.listdir("/proc/self/fd")) == before
