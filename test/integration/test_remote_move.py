"""Moves between clusters (doc/exports.md, "Moves between clusters"), through the real
daemons of a virtual cluster.

Upstream's own ``move-instance`` (Debian's ``ganeti-3.0``, run by
test/integration/upstream_cli.py in Debian's python) drives the move through
our RAPI, as Ganeti's QA ``TestInterClusterInstanceMove`` does: the source and
the destination are the same cluster, under another name, so every step of
the protocol runs (prepare-export with a transfer key on the source's
primary node, the remote import's listeners and its ``remote-import`` log
entry, the remote export's TLS streams, the removal of the source).  The
disk arrives unchanged, the instance runs on the node asked for, and no key,
listener or transfer state is left behind.  A remote import with a handshake
signed by another domain secret is refused and changes nothing.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess

import pytest
import upstream_cli
from test_rapi import USERS, WRITER, request, wait_job, write_users
from vcluster_harness import VirtualCluster

from ganeti.cmdlib import backup_remote as br

pytestmark = pytest.mark.timeout(900)

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"
SRC, DEST = "mover1.example.com", "mover2.example.com"
FILE_DIR = "/srv/ganeti/file-storage"
MARKER_SEEK = 8


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcm"), nodes=3, use_ssh=False) as cluster:
        write_users(cluster, USERS)
        with open(os.path.join(cluster.cluster.directory, "hosts"), "a") as fh:
            fh.write(f"\n127.0.3.1 {SRC}\n127.0.3.2 {DEST}\n")
        yield cluster


def _disks(vc, node: str, name: str) -> list[bytes]:
    """The disk files of instance ``name`` on ``node`` (by disk index)."""
    root = vc.paths(node).root
    # <uuid>.file.disk<N>: in the order of N
    files = sorted(glob.glob(os.path.join(root, FILE_DIR.lstrip("/"), name, "*")),
                   key=lambda path: int(path.rsplit("disk", 1)[1]))
    contents = []
    for path in files:
        with open(path, "rb") as fh:
            contents.append(fh.read())
    return contents


def _marker(disk: bytes) -> str:
    """tinyos's marker sector (tools/os/tinyos/common.sh: sector MARKER_SEEK)."""
    return disk[MARKER_SEEK * 512:(MARKER_SEEK + 1) * 512].rstrip(b"\0").decode()


def _digest(disk: bytes, *, skip_marker: bool = False) -> str:
    if skip_marker:
        disk = disk[:MARKER_SEEK * 512] + disk[(MARKER_SEEK + 1) * 512:]
    return hashlib.sha256(disk).hexdigest()


def _leftovers(vc) -> list[str]:
    """Transfer keys and transfer states left on any node."""
    found = []
    for node in (N1, N2, N3):
        paths = vc.paths(node)
        for directory in (paths.crypto_dir, paths.import_export_dir):
            if os.path.isdir(directory):
                found += [os.path.join(directory, x) for x in os.listdir(directory)]
    return found


def test_upstreams_move_instance_moves_a_running_instance(vc, tmp_path):
    reason = upstream_cli.unusable()
    if reason:
        pytest.skip(reason)
    upstream_cli.prepare_host()
    vc.ok("gnt-instance", "add", "-t", "file", "-o", "tinyos", "--disk", "0:size=8M", "--disk", "1:size=4M",
          "-n", N2, "--no-name-check", "--no-ip-check", SRC)
    # something to recognise on the disks
    for path in glob.glob(os.path.join(vc.paths(N2).root, FILE_DIR.lstrip("/"), SRC, "*")):
        index = int(path.rsplit("disk", 1)[1])
        with open(path, "r+b") as fh:
            fh.seek(1024 * 1024 * (index + 1))
            fh.write(f"disk {index} of {SRC}".encode() * 100)
    before = _disks(vc, N2, SRC)
    assert len(before) == 2 and f"name={SRC}" in _marker(before[0])
    res = upstream_cli.move_instance(vc, tmp_path, WRITER, SRC, DEST, N3, N1)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{SRC} as {DEST}: Success" in res.stderr
    listing = vc.ok("gnt-instance", "list", "--no-headers", "-o", "name,pnode,status")
    assert SRC not in listing
    assert listing.split() == [DEST, N3, "running"]
    after = _disks(vc, N3, DEST)
    # every byte arrived; then the OS rename script rewrote the marker, as Ganeti runs it
    # after an import from another name
    assert [len(d) for d in after] == [len(d) for d in before]
    assert _digest(after[1]) == _digest(before[1])
    assert _digest(after[0], skip_marker=True) == _digest(before[0], skip_marker=True)
    assert f"name={DEST}" in _marker(after[0])
    assert _disks(vc, N2, SRC) == []
    assert _leftovers(vc) == []


def test_a_remote_import_signed_with_another_secret_is_refused(vc):
    handshake = br.compute_handshake("f" * 64, "ab")
    body = {"__version__": 1, "mode": "remote-import", "name": "refused.example.com",
            "disk_template": "file", "disks": [{"size": 8}], "nics": [{}], "pnode": N2,
            "os": "tinyos", "name_check": False, "ip_check": False,
            "source_handshake": handshake, "source_x509_ca": "x",
            "source_instance_name": SRC}
    status, job_id, _ = request(vc, "POST", "/2/instances", body, auth=WRITER)
    assert status == 200, job_id
    job = wait_job(vc, job_id)
    assert job["status"] == "error"
    assert "Hash didn't match, clusters don't share the same domain secret" in str(
        job["opresult"])
    assert request(vc, "GET", "/2/instances/refused.example.com")[0] == 404
    assert _leftovers(vc) == []


def test_prepare_export_hands_out_signed_transfer_material(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "-o", "tinyos", "-s", "8M", "-n", N2,
          "--no-name-check", "--no-ip-check", "--no-start", "prep.example.com")
    try:
        status, job_id, _ = request(
            vc, "PUT", "/2/instances/prep.example.com/prepare-export?mode=remote", auth=WRITER)
        assert status == 200, job_id
        job = wait_job(vc, job_id)
        assert job["status"] == "success", job
        result = job["opresult"][0]
        with open(vc.paths(N1).cluster_domain_secret) as fh:
            cds = fh.read().strip()
        br.check_handshake(cds, result["handshake"])
        name = br.check_key_name(cds, result["x509_key_name"])
        cert = br.load_signed_ca(cds, result["x509_ca"])
        # the key stays on the primary node (its private half never travels)
        key_file = os.path.join(vc.paths(N2).crypto_dir, name, "pem")
        with open(key_file) as fh:
            assert cert.strip() in fh.read()
        assert "PRIVATE KEY" not in str(result)
        assert subprocess.run(["stat", "-c", "%a", key_file], capture_output=True,
                              text=True).stdout.strip() == "600"
    finally:
        vc.ok("gnt-instance", "remove", "-f", "prep.example.com")
        shutil.rmtree(vc.paths(N2).crypto_dir, ignore_errors=True)
