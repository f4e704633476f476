"""Moves between clusters on the master side (doc/exports.md, "Moves between
clusters"): prepare-export in remote mode, the remote import (listeners, the signed
``remote-import`` log entry, what a failure leaves behind) and the remote export
(the transfer key checked before the instance is touched, removed whatever
happens), against a real ConfigWriter and fake nodes."""

from __future__ import annotations

import os
from typing import Any

import pytest
from cmdlib.test_cmdlib_instance import NODES, FakeNodes, _create
from fakes.fakeconfig import RecordingCallbacks

from ganeti import constants, crypto, errors, locking, objects, opcodes
from ganeti.cmdlib import backup_remote as br
from ganeti.config import ConfigWriter
from ganeti.context import MasterContext
from ganeti.mcpu import Processor
from ganeti.pathutils import Paths

CDS = "5ecre7" * 8
_, SOURCE_CERT = crypto.generate_self_signed_cert("src")


class MoveNodes(FakeNodes):
    """FakeNodes with transfer keys, listeners and senders: ``status`` scripts what
    impexp_status answers per transfer id (the last answer stays)."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: dict[str, set[str]] = {n: set() for n in NODES}
        self.listening: dict[str, dict[str, Any]] = {}
        self.sent: list[dict[str, Any]] = []
        self.script: list[dict[str, Any]] = [{"state": "done", "done": 10, "total": 10,
                                              "elapsed": 1.0, "sha256": "a" * 64}]
        self.cleaned: list[str] = []

    def do_x509_cert_create(self, node: str, validity: int) -> list[str]:
        name = f"x509-{len(self.keys[node])}-{node}"
        self.keys[node].add(name)
        return [name, SOURCE_CERT.decode()]

    def do_x509_cert_remove(self, node: str, name: str) -> None:
        if name not in self.keys[node]:
            raise errors.OpExecError(f"No X509 key {name}")
        self.keys[node].discard(name)

    def do_x509_cert_check(self, node: str, name: str) -> None:
        if name not in self.keys[node]:
            raise errors.OpExecError(f"No X509 key {name} on this node")

    def do_impexp_listen(self, node: str, dest: dict, host: str, key_name: str, ca: str,
                         magic: str, timeout: float) -> dict:
        tid = f"l{len(self.listening)}"
        self.listening[tid] = {"node": node, "dest": dest, "host": host, "key": key_name,
                               "ca": ca, "magic": magic}
        return {"id": tid, "port": 20000 + len(self.listening)}

    def do_impexp_send(self, node: str, source: dict, dest: dict, host: str, port: int) -> str:
        self.sent.append({"node": node, "source": source, "dest": dest, "host": host,
                          "port": port})
        return f"s{len(self.sent)}"

    def do_impexp_status(self, node: str, ids: list) -> list:
        answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return [dict(answer) for _ in ids]

    def do_impexp_abort(self, node: str, transfer_id: str) -> bool:
        return True

    def do_impexp_cleanup(self, node: str, transfer_id: str) -> None:
        self.cleaned.append(transfer_id)


@pytest.fixture
def menv(tmp_path: Any) -> Any:
    data = objects.ConfigData()
    data.cluster = objects.Cluster(cluster_name="cluster.example.com", uuid="c-uuid",
                                   enabled_disk_templates=["diskless", "file"],
                                   file_storage_dir="/srv/ganeti/file-storage")
    data.cluster.ipolicy["minmax"][0]["min"]["disk-size"] = 1
    data.nodegroups["g-uuid"] = objects.NodeGroup(name="default", uuid="g-uuid")
    for i, name in enumerate(NODES):
        data.nodes[f"uuid-{name}"] = objects.Node(
            name=name, uuid=f"uuid-{name}", primary_ip=f"10.0.0.{i + 1}", group="g-uuid",
            master_candidate=True)
    data.cluster.master_node = "uuid-node1"
    cfg = ConfigWriter.initialize(str(tmp_path / "config.data"), data)
    glm = locking.GanetiLockManager(nodes=list(data.nodes), nodegroups=list(data.nodegroups),
                                    instances=[])
    paths = Paths(root=str(tmp_path))
    os.makedirs(os.path.dirname(paths.cluster_domain_secret), exist_ok=True)
    with open(paths.cluster_domain_secret, "w") as fh:
        fh.write(CDS + "\n")
    nodes = MoveNodes()

    class Env:
        pass
    e = Env()
    e.cfg, e.rpc = cfg, nodes
    e.ctx = MasterContext(paths=paths, cfg=cfg, glm=glm, rpc=nodes)

    def run(op_id: str, **params: Any) -> tuple[Any, RecordingCallbacks]:
        cbs = RecordingCallbacks()
        op = opcodes.from_dict({"OP_ID": op_id, **params})
        return Processor(e.ctx, timeouts=[1.0]).execute_opcode(op, cbs), cbs
    e.run = run
    return e


def _remote_import(menv: Any, **kw: Any) -> tuple[Any, RecordingCallbacks]:
    params = {"instance_name": "moved1", "mode": "remote-import", "disk_template": "file",
              "os_type": "tinyos", "pnode": "node2", "nics": [{}], "name_check": False,
              "ip_check": False, "disks": [{"size": 8}, {"size": 4}],
              "source_handshake": br.compute_handshake(CDS, "ab"),
              "source_x509_ca": br.sign_certificate(CDS, SOURCE_CERT.decode(), "cd"),
              "source_instance_name": "web1", "source_shutdown_timeout": 0}
    params.update(kw)
    return menv.run("OP_INSTANCE_CREATE", **params)


def test_prepare_export_makes_the_key_on_the_primary_and_signs_it(menv: Any) -> None:
    _create(menv, "web1", pnode="node2", disks=[{"size": 8}])
    assert menv.run("OP_BACKUP_PREPARE", instance_name="web1", mode="local")[0] is None
    assert menv.rpc.keys["node2"] == set()
    result, _ = menv.run("OP_BACKUP_PREPARE", instance_name="web1", mode="remote")
    (name,) = menv.rpc.keys["node2"]
    br.check_handshake(CDS, result["handshake"])
    assert br.check_key_name(CDS, result["x509_key_name"]) == name
    assert br.load_signed_ca(CDS, result["x509_ca"]).strip() == SOURCE_CERT.decode().strip()


def test_a_remote_import_listens_per_disk_and_logs_the_signed_destinations(menv: Any) -> None:
    result, cbs = _remote_import(menv)
    assert result == ["node2"]
    entries = [m for t, m in cbs.messages if t == constants.ELOG_REMOTE_IMPORT]
    assert len(entries) == 1
    (entry,) = entries
    listeners = list(menv.rpc.listening.values())
    assert [x["dest"]["index"] for x in listeners] == [0, 1]
    assert {x["node"] for x in listeners} == {"node2"} and listeners[0]["host"] == "10.0.0.2"
    assert listeners[0]["ca"].strip() == SOURCE_CERT.decode().strip()
    # the destinations the source's export will check, and the listener's certificate
    for idx, info in enumerate(entry["disks"]):
        assert br.check_disk_info(CDS, idx, info) == ("10.0.0.2", 20001 + idx,
                                                      listeners[idx]["magic"])
    br.load_signed_ca(CDS, entry["x509_ca"])
    assert "PRIVATE" not in str(cbs.messages)
    inst = menv.cfg.get_instance_info_by_name("moved1")
    assert inst.admin_state == constants.ADMINST_UP
    assert sorted(menv.rpc.cleaned) == ["l0", "l1"] and menv.rpc.keys["node2"] == set()
    # the OS rename script ran from the source's name, as Ganeti's
    assert ("instance_run_rename", "node2") in menv.rpc.calls


def test_a_remote_import_signed_with_another_secret_creates_nothing(menv: Any) -> None:
    with pytest.raises(errors.OpPrereqError, match="clusters don't share the same domain"):
        _remote_import(menv, source_handshake=br.compute_handshake("other" * 9, "ab"))
    assert menv.cfg.get_instance_info_by_name("moved1") is None
    assert not any(n for n in menv.rpc.disks.values()) and not menv.rpc.listening


def test_a_failed_remote_import_leaves_nothing_behind(menv: Any) -> None:
    menv.rpc.script = [{"state": "running", "done": 1, "total": 10},
                       {"state": "failed", "error": "The sender gave up: disk error"}]
    with pytest.raises(errors.OpExecError, match="disk/0: The sender gave up: disk error"):
        _remote_import(menv)
    assert menv.cfg.get_instance_info_by_name("moved1") is None
    assert not any(n for n in menv.rpc.disks.values())
    assert sorted(menv.rpc.cleaned) == ["l0", "l1"] and menv.rpc.keys["node2"] == set()


def test_a_source_that_never_connects_fails_the_import(menv: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(br, "CONNECT_TIMEOUT", 0.3)
    menv.rpc.script = [{"state": "listening", "done": 0, "total": None}]
    with pytest.raises(errors.OpExecError, match="the source did not connect within 0 s"):
        _remote_import(menv)
    assert menv.cfg.get_instance_info_by_name("moved1") is None
    assert menv.rpc.keys["node2"] == set()


def _export(menv: Any, key_name: str, **kw: Any) -> tuple[Any, RecordingCallbacks]:
    dests = [br.sign_disk_info(CDS, "ef", 0, "192.0.2.9", 1, "magic0")]
    params = {"instance_name": "web1", "mode": "remote", "target_node": dests,
              "x509_key_name": br.sign_key_name(CDS, key_name, "11"),
              "destination_x509_ca": br.sign_certificate(CDS, SOURCE_CERT.decode(), "22"),
              "remove_instance": True}
    params.update(kw)
    return menv.run("OP_BACKUP_EXPORT", **params)


@pytest.fixture
def reachable(monkeypatch: Any) -> None:
    from ganeti.utils import net
    monkeypatch.setattr(net, "connect_error", lambda host, port, timeout: None)


def test_a_remote_export_sends_to_the_listeners_then_removes_key_and_instance(
        menv: Any, reachable: None) -> None:
    _create(menv, "web1", pnode="node2", disks=[{"size": 8}])
    prepared, _ = menv.run("OP_BACKUP_PREPARE", instance_name="web1", mode="remote")
    name = prepared["x509_key_name"][0]
    assert _export(menv, name)[0] == [True, [True]]
    (sent,) = menv.rpc.sent
    assert (sent["node"], sent["host"], sent["port"]) == ("node2", "192.0.2.9", 1)
    assert sent["dest"]["kind"] == "remote" and sent["dest"]["magic"] == "magic0"
    assert sent["dest"]["key_name"] == name
    assert menv.rpc.keys["node2"] == set()
    assert menv.cfg.get_instance_info_by_name("web1") is None


def test_a_remote_export_without_its_key_does_not_touch_the_instance(
        menv: Any, reachable: None) -> None:
    _create(menv, "web1", pnode="node2", disks=[{"size": 8}])
    with pytest.raises(errors.OpPrereqError, match="The transfer key x509-9-gone cannot be"
                       " used on node2 .*prepare the export again"):
        _export(menv, "x509-9-gone")
    assert "web1" in menv.rpc.running["node2"] and not menv.rpc.sent
    assert ("instance_shutdown", "node2") not in menv.rpc.calls


def test_a_failed_remote_export_starts_the_instance_again_and_drops_the_key(
        menv: Any, reachable: None) -> None:
    _create(menv, "web1", pnode="node2", disks=[{"size": 8}])
    prepared, _ = menv.run("OP_BACKUP_PREPARE", instance_name="web1", mode="remote")
    menv.rpc.script = [{"state": "failed", "error": "Cannot connect to 192.0.2.9:1"}]
    with pytest.raises(errors.OpExecError, match="Cannot connect"):
        _export(menv, prepared["x509_key_name"][0])
    assert "web1" in menv.rpc.running["node2"]
    assert menv.cfg.get_instance_info_by_name("web1") is not None
    assert menv.rpc.keys["node2"] == set()


# --- the UEFI/TPM state of a kvm instance (doc/exports.md, "Moves between clusters") ---

def _kvm(menv: Any) -> None:
    cluster = menv.cfg.get_cluster_info()
    cluster.enabled_hypervisors = ["fake", "kvm"]
    menv.cfg.update(cluster)
    menv.rpc.do_hypervisor_validate_params = lambda node, hv, params: None


def test_a_remote_import_of_a_uefi_instance_listens_for_its_state_last(menv: Any) -> None:
    _kvm(menv)
    _, cbs = _remote_import(menv, hypervisor="kvm", hvparams={"firmware": "uefi"})
    listeners = list(menv.rpc.listening.values())
    inst = menv.cfg.get_instance_info_by_name("moved1")
    assert [x["dest"].get("index") for x in listeners] == [0, 1, None]
    assert listeners[2]["dest"] == {"kind": "firmware", "instance_uuid": inst.uuid}
    (entry,) = [m for t, m in cbs.messages if t == constants.ELOG_REMOTE_IMPORT]
    assert len(entry["disks"]) == 3
    assert br.check_disk_info(CDS, 2, entry["disks"][2]) == ("10.0.0.2", 20003,
                                                             listeners[2]["magic"])
    assert sorted(menv.rpc.cleaned) == ["l0", "l1", "l2"]


def test_a_remote_import_without_uefi_or_tpm_asks_for_no_state(menv: Any) -> None:
    _kvm(menv)
    _remote_import(menv, hypervisor="kvm", hvparams={"firmware": "bios"})
    assert [x["dest"]["kind"] for x in menv.rpc.listening.values()] == ["import", "import"]


def test_a_failed_remote_import_removes_the_state_it_received(menv: Any) -> None:
    _kvm(menv)
    removed: list[str] = []
    menv.rpc.do_instance_firmware_remove = lambda node, uuid: removed.append(node)
    menv.rpc.script = [{"state": "done", "done": 10, "total": 10, "elapsed": 1.0,
                        "sha256": "a" * 64}] * 2 + [
        {"state": "failed", "error": "Bad entry in a firmware state archive"}]
    with pytest.raises(errors.OpExecError, match="firmware: Bad entry"):
        _remote_import(menv, hypervisor="kvm", hvparams={"tpm": "tpm2"})
    assert menv.cfg.get_instance_info_by_name("moved1") is None
    assert removed == ["node2"]


def test_a_remote_export_sends_the_state_when_the_destination_asks(
        menv: Any, reachable: None) -> None:
    _create(menv, "web1", pnode="node2", disks=[{"size": 8}])
    uuid = menv.cfg.get_instance_info_by_name("web1").uuid
    prepared, _ = menv.run("OP_BACKUP_PREPARE", instance_name="web1", mode="remote")
    dests = [br.sign_disk_info(CDS, "ef", 0, "192.0.2.9", 1, "magic0"),
             br.sign_disk_info(CDS, "ef", 1, "192.0.2.9", 2, "magicfw")]
    assert _export(menv, prepared["x509_key_name"][0], target_node=dests)[0] == [True, [True]]
    disk, state = menv.rpc.sent
    assert disk["source"]["kind"] == "disk" and disk["port"] == 1
    assert state["source"] == {"kind": "firmware", "instance_uuid": uuid}
    assert state["port"] == 2 and state["dest"]["magic"] == "magicfw"


def test_a_remote_export_refuses_more_than_one_extra_destination(
        menv: Any, reachable: None) -> None:
    _create(menv, "web1", pnode="node2", disks=[{"size": 8}])
    prepared, _ = menv.run("OP_BACKUP_PREPARE", instance_name="web1", mode="remote")
    dests = [br.sign_disk_info(CDS, "ef", i, "192.0.2.9", i + 1, f"m{i}") for i in range(3)]
    with pytest.raises(errors.OpPrereqError, match="Expected 1 targets, got 3"):
        _export(menv, prepared["x509_key_name"][0], target_node=dests)
    assert not menv.rpc.sent
