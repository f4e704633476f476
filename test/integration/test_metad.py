"""The instance metadata service through the real daemons (doc/images.md, "The metadata service").

A 1-node virtual cluster (fake hypervisor) and a real ``ganeti-metad`` on
the node's address.  The instance's NIC has a loopback address of its own
(any of 127/8 is local), so the test asks *as the instance* by binding
its client socket to that address, and as anyone else from another one.
Real ``qemu-img`` and ``genisoimage`` (the seed is built with the entry).
"""

from __future__ import annotations

import os
import shutil
import socket

import pytest
from instance_helpers import NOCHECK, rows
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl
from ganeti.http import framing
from tools.harness import vcluster

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("qemu-img") is None or shutil.which("genisoimage") is None,
                       reason="needs qemu-img (qemu-utils) and genisoimage (make debian-deps)"),
]

N1 = "node1.vcluster"
IP = "127.0.9.20"         # the instance's NIC
OTHER = "127.0.9.21"      # no instance's
IP2 = "127.0.9.22"        # the NIC's address after a modify
SECRET1 = "#cloud-config\nruncmd:\n  - echo metad-secret-one\n"
SECRET2 = "#cloud-config\nruncmd:\n  - echo metad-secret-two\n"
SECRET3 = "#cloud-config\nruncmd:\n  - echo metad-secret-three\n"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcmetad"), nodes=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def metad(vc):
    """``(address, port)`` of the node's ``ganeti-metad``."""
    node_ip = vc.cluster.node(N1).ip
    port = vcluster.pick_free_port([node_ip])
    paths = vc.paths(N1)
    daemonctl.start_metad(paths, node_ip, port, env=vc.env(N1))
    try:
        yield node_ip, port
    finally:
        daemonctl.stop_daemon(paths, constants.METAD, timeout=10.0)


def _get(metad, source: str, path: str) -> tuple[int, str]:
    with socket.socket() as sock:
        sock.settimeout(30)
        sock.bind((source, 0))
        sock.connect(metad)
        sock.sendall(framing.build_request("GET", path, {"Host": constants.METAD_ADDRESS}))
        parser = framing.ResponseParser(request_method="GET")
        while (resp := parser.next_response()) is None:
            data = sock.recv(65536)
            parser.feed(data) if data else parser.feed_eof()
    return resp.status, resp.body.decode()


def _image(tmp_path) -> str:
    path = str(tmp_path / "m.img")
    data = bytearray(b"M" * 1024 * 1024)
    data[510:512] = b"\x55\xaa"
    with open(path, "wb") as fh:
        fh.write(data)
    return path


def test_the_instance_alone_gets_its_data_renewed_on_reinstall_modify_rename(vc, metad, tmp_path):
    image = _image(tmp_path)
    name = "meta1.example.com"
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", N1, *NOCHECK,
          "--os-image", image, "--net", f"0:ip={IP}",
          "--os-parameters-private", f"user_data={SECRET1}", name)
    uuid = rows(vc, "uuid", name)[0][0]
    mac = rows(vc, "nic.macs", name)[0][0]

    # the instance (its source address) gets its own documents: the seed's
    assert _get(metad, IP, "/meta-data") == (
        200, f'instance-id: "{uuid}"\nlocal-hostname: "{name}"\n')
    assert _get(metad, IP, "/user-data") == (200, SECRET1)
    status, netconf = _get(metad, IP, "/network-config")
    assert status == 200 and f'macaddress: "{mac}"' in netconf and f'"{IP}/32"' in netconf
    assert _get(metad, IP, "/")[1].split() == ["meta-data", "user-data", "vendor-data",
                                               "network-config"]
    # anyone else: refused, and nothing of the data in the answer
    for path in ("/meta-data", "/user-data", "/network-config"):
        status, body = _get(metad, OTHER, path)
        assert status == 403 and "secret" not in body and name not in body
    entry = vc.paths(N1).metadata_entry(name)
    assert os.stat(entry).st_mode & 0o777 == 0o600

    # stopped: it left the service; reinstalled with another document: the new one
    vc.ok("gnt-instance", "shutdown", name)
    assert _get(metad, IP, "/meta-data")[0] == 403
    vc.ok("gnt-instance", "reinstall", "-f", "--os-image", image,
          "--os-parameters-private", f"user_data={SECRET2}", name)
    vc.ok("gnt-instance", "startup", name)
    assert _get(metad, IP, "/user-data") == (200, SECRET2)

    # modified while it runs: the new document at once
    vc.ok("gnt-instance", "modify", "--os-parameters-private", f"user_data={SECRET3}", name)
    assert _get(metad, IP, "/user-data") == (200, SECRET3)

    # another address (changed while stopped): served there, no longer at the old one
    vc.ok("gnt-instance", "shutdown", name)
    vc.ok("gnt-instance", "modify", "--net", f"0:modify,ip={IP2}", name)
    vc.ok("gnt-instance", "startup", name)
    assert _get(metad, IP2, "/user-data") == (200, SECRET3)
    assert _get(metad, IP, "/user-data")[0] == 403
    vc.ok("gnt-instance", "shutdown", name)
    vc.ok("gnt-instance", "modify", "--net", f"0:modify,ip={IP}", name)

    # renamed: the new name, the old entry gone
    new = "meta2.example.com"
    vc.ok("gnt-instance", "rename", *NOCHECK, name, new)
    vc.ok("gnt-instance", "startup", new)
    assert _get(metad, IP, "/meta-data") == (
        200, f'instance-id: "{uuid}"\nlocal-hostname: "{new}"\n')
    assert sorted(os.listdir(vc.paths(N1).metadata_dir)) == [f"{new}.json"]

    # removed: refused again, nothing left
    vc.ok("gnt-instance", "remove", "-f", new)
    assert _get(metad, IP, "/meta-data")[0] == 403
    assert os.listdir(vc.paths(N1).metadata_dir) == []
    # the private documents are in no job file and no log of the node (the service
    # logs no body)
    for top in (vc.paths(N1).queue_dir, vc.paths(N1).log_dir):
        for dirpath, _dirs, files in os.walk(top):
            for fname in files:
                with open(os.path.join(dirpath, fname), "rb") as fh:
                    assert b"metad-secret" not in fh.read(), fname
    with open(vc.paths(N1).daemon_log_file(constants.METAD), encoding="utf-8") as fh:
        log = fh.read()
    assert f"GET /user-data from {IP} ({name}): 200" in log
    assert f"GET /user-data from {OTHER} (no instance): 403" in log


def test_the_watcher_starts_it_when_the_node_has_instances_to_serve(vc, metad, tmp_path,
                                                                   monkeypatch):
    paths = vc.paths(N1)
    daemonctl.stop_daemon(paths, constants.METAD, timeout=10.0)
    monkeypatch.setenv(constants.ENV_METAD_BIND, metad[0])
    monkeypatch.setenv(constants.ENV_METAD_PORT, str(metad[1]))
    # nothing to serve: not started
    [(_, code, lines)] = vcluster.run_watcher(vc.cluster, N1)
    assert code == 0, lines
    assert daemonctl.daemon_pid(paths, constants.METAD) is None
    name = "meta3.example.com"
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", N1, *NOCHECK,
          "--os-image", _image(tmp_path), "--net", f"0:ip={IP}", name)
    [(_, code, lines)] = vcluster.run_watcher(vc.cluster, N1)
    assert code == 0 and any("started the metadata daemon" in line for line in lines), lines
    assert daemonctl.daemon_pid(paths, constants.METAD) is not None
    assert 'local-hostname: "meta3.example.com"' in _get(metad, IP, "/meta-data")[1]
    vc.ok("gnt-instance", "remove", "-f", name)
