"""Moves between clusters on a node: transfer keys, and a remote import's listener fed by
the export's sender over real TLS sockets on loopback (ganeti.backend.remoteimpexp,
ganeti.server.impexp_listener, ganeti.server.impexp_worker)."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import socket
import ssl
import threading
import time
from typing import Any

import pytest

from ganeti import crypto, errors, serializer
from ganeti.backend import blockdev, remoteimpexp
from ganeti.backend.context import NodeContext
from ganeti.http import framing
from ganeti.http.tls import transfer_client_context
from ganeti.impexp import stream as diskstream
from ganeti.objects import Disk
from ganeti.pathutils import Paths
from ganeti.server import impexp_listener, impexp_worker
from ganeti.storage.filestorage import file_logical_id

MIB = 1024 * 1024


def _node(tmp_path, name: str) -> NodeContext:
    paths = Paths(root=str(tmp_path / name))
    for d in (paths.data_dir, paths.run_dir):
        os.makedirs(d, exist_ok=True)
    return NodeContext(paths=paths, hostname=f"{name}.example.com")


# --- transfer keys ---------------------------------------------------------------------------

def test_a_transfer_key_stays_on_its_node_and_expires(ctx) -> None:
    name, cert = remoteimpexp.x509_cert_create(ctx, 3600)
    path = remoteimpexp.key_path(ctx, name)
    assert os.stat(path).st_mode & 0o777 == 0o600
    key_pem, stored = crypto.load_pem_pair(path)
    assert stored.decode() == cert and b"PRIVATE KEY" in key_pem and "PRIVATE" not in cert
    expires = crypto.cert_not_after(cert.encode())
    assert expires == datetime.datetime.fromtimestamp(1234.5 + 3600, datetime.timezone.utc
                                                      ).replace(microsecond=0)
    # an expired key goes with the next creation
    ctx.clock = lambda: 1234.5 + 7200
    other, _ = remoteimpexp.x509_cert_create(ctx, 3600)
    assert os.listdir(ctx.paths.crypto_dir) == [other]


def test_the_sweep_leaves_other_files_and_keys_being_made(ctx) -> None:
    os.makedirs(os.path.join(ctx.paths.crypto_dir, "x509-1-being-made"))
    os.makedirs(os.path.join(ctx.paths.crypto_dir, "notes"))
    made, _ = remoteimpexp.x509_cert_create(ctx, 60)
    assert sorted(os.listdir(ctx.paths.crypto_dir)) == sorted(["x509-1-being-made", "notes",
                                                               made])
    # an hour later, the unfinished one is abandoned; the other directory stays
    ctx.clock = lambda: os.stat(os.path.join(ctx.paths.crypto_dir, "notes")).st_mtime + 7200
    again, _ = remoteimpexp.x509_cert_create(ctx, 60)
    assert sorted(os.listdir(ctx.paths.crypto_dir)) == sorted(["notes", again])


def test_checking_a_transfer_key(ctx) -> None:
    name, _ = remoteimpexp.x509_cert_create(ctx, 60)
    remoteimpexp.x509_cert_check(ctx, name)
    with pytest.raises(errors.OpExecError, match="No X509 key x509-9-nosuch"):
        remoteimpexp.x509_cert_check(ctx, "x509-9-nosuch")
    ctx.clock = lambda: 1234.5 + 61
    with pytest.raises(errors.OpExecError, match=f"The X509 key {name} expired at"):
        remoteimpexp.x509_cert_check(ctx, name)


def test_removing_a_transfer_key(ctx) -> None:
    name, _ = remoteimpexp.x509_cert_create(ctx, 60)
    remoteimpexp.x509_cert_remove(ctx, name)
    assert os.listdir(ctx.paths.crypto_dir) == []
    with pytest.raises(errors.OpExecError, match="No X509 key"):
        remoteimpexp.x509_cert_remove(ctx, name)


@pytest.mark.parametrize("name", ["../data", "", ".hidden", "a/b"])
def test_a_transfer_key_name_is_a_plain_name(ctx, name) -> None:
    with pytest.raises(errors.OpExecError, match="Invalid X509 key name"):
        remoteimpexp.x509_cert_remove(ctx, name)


@pytest.mark.parametrize("validity", [0, -5, remoteimpexp.MAX_VALIDITY + 1])
def test_a_transfer_key_validity_is_bounded(ctx, validity) -> None:
    with pytest.raises(errors.OpExecError, match="Invalid certificate validity"):
        remoteimpexp.x509_cert_create(ctx, validity)


def test_listen_refuses_other_destinations_and_unknown_keys(ctx) -> None:
    with pytest.raises(errors.OpExecError, match="writes an instance disk"):
        remoteimpexp.impexp_listen(ctx, {"kind": "export"}, "127.0.0.1", "k", "", "m", 5.0)
    with pytest.raises(errors.OpExecError, match="No X509 key k1"):
        remoteimpexp.impexp_listen(ctx, {"kind": "import"}, "127.0.0.1", "k1", "", "m", 5.0)


# --- the listener and the sender ------------------------------------------------------------

class Move:
    """A source node with a disk and a key, a destination node with a disk, a key and a
    listening socket; ``serve()`` runs the listener in a thread."""

    def __init__(self, tmp_path, data: bytes) -> None:
        self.src, self.dst = _node(tmp_path, "src"), _node(tmp_path, "dst")
        self.src_disk = self._disk(self.src, "s1")
        self.dst_disk = self._disk(self.dst, "d1")
        _, path = blockdev.assemble_disk(self.src, self.src_disk, "web1", 0)
        with open(path, "r+b") as fh:
            fh.write(data)
        self.src_key, self.src_cert = remoteimpexp.x509_cert_create(self.src, 600)
        self.dst_key, self.dst_cert = remoteimpexp.x509_cert_create(self.dst, 600)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.result: Any = None

    @staticmethod
    def _disk(ctx: NodeContext, uuid: str) -> dict[str, Any]:
        lid = list(file_logical_id("/srv/ganeti/file-storage", "web1", uuid, 0))
        disk = serializer.to_data(Disk(uuid=uuid, dev_type="file", size=1, logical_id=lid))
        blockdev.blockdev_create(ctx, disk, 1, "web1", True, "", False)
        return disk

    def job(self, *, magic: str = "m0", trusted: str | None = None,
            timeout: float = 20.0) -> dict[str, Any]:
        return {"dest": {"kind": "import", "index": 0, "label": "disk/0",
                         "instance": {"name": "web1", "os": None,
                                      "disks_info": [self.dst_disk]}},
                "key_name": self.dst_key, "ca": trusted or self.src_cert, "magic": magic,
                "timeout": timeout}

    def serve(self, **job: Any) -> threading.Thread:
        status = impexp_worker.TransferStatus(str(self.state))

        def run() -> None:
            try:
                self.result = impexp_listener.serve(self.dst, self.job(**job), self.listener,
                                                    status)
            except errors.GanetiError as exc:
                self.result = exc
        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def send(self, *, magic: str = "m0", trusted: str | None = None) -> dict[str, Any]:
        job = {"host": "127.0.0.1", "port": self.port,
               "source": {"kind": "disk", "disk": self.src_disk, "index": 0,
                          "instance": {"name": "web1", "os": None}},
               "dest": {"kind": "remote", "magic": magic, "key_name": self.src_key,
                        "ca": trusted or self.dst_cert}}
        return impexp_worker.send(self.src, job, lambda done, total: None)

    def received(self) -> bytes:
        _, path = blockdev.assemble_disk(self.dst, self.dst_disk, "web1", 0)
        with open(path, "rb") as fh:
            return fh.read()


def test_a_disk_moves_over_the_transfer_keys(tmp_path) -> None:
    data = os.urandom(300_000)
    move = Move(tmp_path, data)
    thread = move.serve()
    sent = move.send()
    thread.join(30)
    assert move.result == sent
    assert sent["sha256"] == hashlib.sha256(data + b"\0" * (MIB - len(data))).hexdigest()
    assert move.received()[:len(data)] == data


def test_a_sender_with_another_key_is_refused_and_the_listener_waits_on(tmp_path) -> None:
    move = Move(tmp_path, b"payload")
    thread = move.serve()
    stranger_key = tmp_path / "stranger.pem"
    crypto.write_pem_pair(str(stranger_key), *crypto.generate_self_signed_cert("stranger"))
    context = transfer_client_context(str(stranger_key), move.dst_cert)
    with pytest.raises((ssl.SSLError, OSError)):
        with socket.create_connection(("127.0.0.1", move.port), timeout=10) as raw:
            with context.wrap_socket(raw) as tls:
                tls.sendall(framing.build_request("POST", "/impexp_stream", {}.items(),
                                                  keep_alive=False))
                if not tls.recv(100):
                    raise OSError("closed")
    assert thread.is_alive() and move.result is None
    move.send()               # the real source still gets through
    thread.join(30)
    assert isinstance(move.result, dict)
    assert move.received().startswith(b"payload")


def test_a_silent_client_does_not_hold_the_sender_up(tmp_path) -> None:
    move = Move(tmp_path, b"payload")
    thread = move.serve()
    with socket.create_connection(("127.0.0.1", move.port)) as silent, \
            socket.create_connection(("127.0.0.1", move.port)) as garbage:
        garbage.sendall(b"GET / HTTP/1.0\r\n\r\n")
        move.send()           # while both are still open
        thread.join(30)
        assert silent.fileno() >= 0
    assert isinstance(move.result, dict)
    assert move.received().startswith(b"payload")


@pytest.mark.parametrize("magic", ["wrong", "\u00e9", "\udcff"])
def test_a_sender_naming_another_magic_fails_the_import(tmp_path, magic) -> None:
    move = Move(tmp_path, b"payload")
    thread = move.serve(magic="right")
    # the listener refuses at the header and reads on until the sender reads why
    with pytest.raises(errors.OpExecError, match="wrong magic"):
        move.send(magic=magic)
    thread.join(30)
    assert isinstance(move.result, errors.OpExecError)
    assert "wrong magic" in str(move.result)
    assert b"payload" not in move.received()


def test_a_sender_refuses_a_listener_it_does_not_trust(tmp_path) -> None:
    move = Move(tmp_path, b"payload")
    thread = move.serve(timeout=3.0)
    _, other = crypto.generate_self_signed_cert("other")
    with pytest.raises(errors.OpExecError, match="Cannot connect"):
        move.send(trusted=other.decode())
    thread.join(30)
    assert isinstance(move.result, errors.OpExecError)
    assert "No sender connected within 3 s" in str(move.result)


def test_the_listener_gives_up_without_a_sender(tmp_path) -> None:
    move = Move(tmp_path, b"payload")
    thread = move.serve(timeout=0.5)
    thread.join(30)
    assert isinstance(move.result, errors.OpExecError)
    assert str(move.result).startswith("No sender connected within")


def test_the_header_names_only_the_magic() -> None:
    dest = {"kind": "remote", "magic": "m1", "key_name": "k", "ca": "PEM"}
    assert impexp_worker._header_dest(dest) == {"kind": "remote", "magic": "m1"}
    local = {"kind": "export", "instance_name": "web1", "file": "x"}
    assert impexp_worker._header_dest(local) == local
    assert diskstream.STREAM_PROCEDURE == "impexp_stream"


def test_a_listener_process_reports_and_receives(tmp_path) -> None:
    """impexp_listen end to end: the process gets the socket, says ``listening`` with its
    port, takes the sender's disk, says ``done`` with the checksum."""
    from ganeti.backend import impexp
    data = os.urandom(50_000)
    move = Move(tmp_path, data)
    move.listener.close()
    answer = remoteimpexp.impexp_listen(move.dst, move.job()["dest"], "127.0.0.1",
                                        move.dst_key, move.src_cert, "m0", 30.0)
    move.port = answer["port"]
    try:
        for _ in range(200):
            (status,) = impexp.impexp_status(move.dst, [answer["id"]])
            if status and status.get("state") == "listening":
                break
            time.sleep(0.05)
        assert status["state"] == "listening" and status["port"] == answer["port"]
        sent = move.send()
        for _ in range(200):
            (status,) = impexp.impexp_status(move.dst, [answer["id"]])
            if status["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        assert status["state"] == "done", status
        assert status["sha256"] == sent["sha256"] and status["done"] == MIB
        assert move.received()[:len(data)] == data
    finally:
        impexp.impexp_cleanup(move.dst, answer["id"])
    assert os.listdir(move.dst.paths.import_export_dir) == []


# --- the transfer process's frame: a final state whatever happens ---------------------------

def _job_dir(tmp_path, job: Any) -> str:
    directory = tmp_path / "xfer"
    directory.mkdir()
    (directory / "job.json").write_text(json.dumps(job))
    return str(directory)


def _final(directory: str) -> dict[str, Any]:
    with open(os.path.join(directory, "status.json")) as fh:
        return json.load(fh)


@pytest.mark.parametrize("body,state,error", [
    (lambda ctx, job, status: {"size": 3, "sha256": "ab"}, "done", None),
    (lambda ctx, job, status: (_ for _ in ()).throw(errors.OpExecError("no disk")),
     "failed", "no disk"),
    (lambda ctx, job, status: (_ for _ in ()).throw(TypeError("bad job")), "failed",
     "internal error: TypeError('bad job')"),
    (lambda ctx, job, status: (_ for _ in ()).throw(SystemExit(143)), "failed",
     "the transfer was aborted"),
], ids=["done", "error", "bug", "sigterm"])
def test_a_transfer_process_always_ends_with_a_final_state(tmp_path, monkeypatch, body,
                                                            state, error) -> None:
    monkeypatch.setattr(impexp_worker.signal, "signal", lambda *args: None)  # pytest's own
    directory = _job_dir(tmp_path, {"root": str(tmp_path / "node"), "hostname": "n1"})
    code = impexp_worker.run_transfer(directory, body)
    final = _final(directory)
    assert (code, final["state"]) == ((0, "done") if state == "done" else (1, "failed"))
    assert final.get("error") == error
