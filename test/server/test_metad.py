"""ganeti-metad's server (ganeti/server/metad.py): a real listener on loopback, plain HTTP.

The client binds its socket to a loopback address of its choice (any of
127/8 is local), so the source address an entry names can be tested
without a network namespace.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from ganeti import errors
from ganeti.http import framing
from ganeti.impexp import metadata
from ganeti.pathutils import Paths
from ganeti.server import metad

pytestmark = pytest.mark.timeout(60)

DOCS = {"meta-data": 'instance-id: "u1"\nlocal-hostname: "web1"\n',
        "user-data": "#cloud-config\nruncmd: [[echo, private]]\n",
        "network-config": "version: 2\nethernets: {}\n"}
ADDR = "127.0.3.10"


def _write(paths: Paths, name: str, addresses: list[str], docs=DOCS) -> None:
    os.makedirs(paths.metadata_dir, exist_ok=True)
    with open(paths.metadata_entry(name), "w", encoding="utf-8") as fh:
        fh.write(metadata.entry_text(name, f"uuid-{name}", addresses, docs))


@pytest.fixture
def server(tmp_path) -> Iterator[metad.MetadServer]:
    srv = metad.MetadServer(("127.0.0.1", 0), Paths(root=str(tmp_path)))
    thread = threading.Thread(target=srv.serve)
    thread.start()
    yield srv
    srv.shutdown()
    thread.join(10)
    srv.server_close()


def _ask(srv: metad.MetadServer, source: str, raw: bytes) -> framing.Response:
    with socket.socket() as sock:
        sock.settimeout(10)
        sock.bind((source, 0))
        sock.connect(srv.server_address)
        sock.sendall(raw)
        parser = framing.ResponseParser(request_method=raw.split(b" ", 1)[0].decode())
        while (resp := parser.next_response()) is None:
            data = sock.recv(65536)
            if not data:
                parser.feed_eof()
            else:
                parser.feed(data)
        assert resp is not None
        return resp


def _get(srv: metad.MetadServer, source: str, path: str, method: str = "GET") -> framing.Response:
    return _ask(srv, source, framing.build_request(method, path, {"Host": "169.254.169.254"}))


def test_the_instance_gets_its_documents_and_others_are_refused(server, tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    _write(paths, "web1", [ADDR])
    for name, text in DOCS.items():
        resp = _get(server, ADDR, f"/{name}")
        assert (resp.status, resp.body) == (200, text.encode())
        assert resp.headers["content-type"].startswith("text/plain")
    head = _get(server, ADDR, "/user-data", "HEAD")
    assert head.status == 200 and head.body == b""
    assert _get(server, ADDR, "/nothing").status == 404
    assert _get(server, ADDR, "/user-data", "DELETE").status == 405
    for other in ("127.0.0.1", "127.0.3.11"):
        resp = _get(server, other, "/user-data")
        assert resp.status == 403 and b"private" not in resp.body


def test_entries_are_read_again_when_they_change(server, tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    assert _get(server, ADDR, "/meta-data").status == 403       # no entry yet
    _write(paths, "web1", [ADDR])
    assert _get(server, ADDR, "/meta-data").body == DOCS["meta-data"].encode()
    os.unlink(paths.metadata_entry("web1"))                     # renamed: new name, new data
    _write(paths, "web1b", [ADDR], {**DOCS, "meta-data": "local-hostname: web1b\n"})
    assert _get(server, ADDR, "/meta-data").body == b"local-hostname: web1b\n"
    with open(os.path.join(paths.metadata_dir, "junk.json"), "w", encoding="utf-8") as fh:
        fh.write("{not json")
    assert _get(server, ADDR, "/meta-data").status == 200       # a bad file is skipped
    _write(paths, "web2", [ADDR])                                # two claim one address
    assert _get(server, ADDR, "/meta-data").status == 403
    os.unlink(paths.metadata_entry("web2"))
    os.unlink(paths.metadata_entry("web1b"))
    assert _get(server, ADDR, "/meta-data").status == 403


def test_a_malformed_request_gets_400_and_a_body_413(server, tmp_path) -> None:
    _write(Paths(root=str(tmp_path)), "web1", [ADDR])
    assert _ask(server, ADDR, b"GARBAGE\r\n\r\n").status == 400
    resp = _ask(server, ADDR, b"POST /user-data HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
    assert resp.status == 413


def test_the_daemon_refuses_a_bad_port(tmp_path) -> None:
    with pytest.raises(errors.ParameterError):
        metad._check(type("O", (), {"port": 0})(), Paths(root=str(tmp_path)))


def test_a_settled_directory_is_not_scanned_and_a_rename_or_unlink_is_seen(tmp_path,
                                                                           monkeypatch) -> None:
    paths = Paths(root=str(tmp_path))
    os.makedirs(paths.metadata_dir)
    cache = metad.EntryCache(paths.metadata_dir)
    monkeypatch.setattr(metad.EntryCache, "SETTLE_NS", 0)
    tick = [1_000_000_000]

    def settle() -> None:   # each change in a clock tick of its own, long ago
        tick[0] += 1_000_000_000
        os.utime(paths.metadata_dir, ns=(tick[0], tick[0]))

    def replace(name: str, docs) -> None:     # as the node daemon writes: a rename
        tmp = paths.metadata_entry(name) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(metadata.entry_text(name, "u", [ADDR], docs))
        os.replace(tmp, paths.metadata_entry(name))
        settle()

    replace("web1", DOCS)
    assert cache.table()[ADDR].documents["meta-data"] == DOCS["meta-data"]
    reads: list[str] = []
    real_listdir = os.listdir

    def listdir(directory: str) -> list[str]:
        reads.append(directory)
        return real_listdir(directory)
    monkeypatch.setattr(metad.os, "listdir", listdir)
    cache.table()
    assert reads == []                               # settled: the table is kept
    replace("web1", {**DOCS, "meta-data": "local-hostname: new\n"})
    assert cache.table()[ADDR].documents["meta-data"] == "local-hostname: new\n"
    assert len(reads) == 1
    os.unlink(paths.metadata_entry("web1"))
    settle()
    assert ADDR not in cache.table()
