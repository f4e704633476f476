"""Instance LUs against a real ConfigWriter (tmp files) and a fake node RPC."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ganeti import constants, errors, locking, objects, opcodes
from ganeti.cmdlib import query as cquery
from ganeti.config import ConfigWriter
from ganeti.context import MasterContext
from ganeti.mcpu import Processor
from ganeti.pathutils import Paths
from ganeti.rpc.client import RpcResult, RpcResults, collect_per_node, node_list
from ganeti.rpc.stubs import Nodes, RpcStubs

from fakes.fakerpc import check_call

NODES = ["node1", "node2", "node3"]


class FakeNodes(RpcStubs):
    """A tiny simulation of the node side: running instances, disks, OSes.

    The typed ``call_<name>`` stubs are the generated ones; arguments are
    checked against the row like FakeRpc does, then ``do_<name>(node, *args)``
    answers.
    """

    def __init__(self) -> None:
        self.running: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in NODES}
        self.disks: dict[str, set[str]] = {n: set() for n in NODES}
        self.oses = {"tinyos"}
        self.disk_info: dict[str, str] = {}  # disk uuid -> its label (blockdev_setinfo)
        self.fail: dict[str, str] = {}       # proc -> message
        self.calls: list[tuple[str, str]] = []
        self.delay: dict[str, float] = {}
        self.lock = threading.Lock()
        self.seeds: dict[str, dict[str, Any]] = {}     # instance -> its seed's last build

    def _rpc(self, proc: str, node_or_nodes: Nodes, args: list[Any],
             rpc_timeout: float | None) -> RpcResults:
        check_call(proc, args)
        out = RpcResults(proc)
        for node in node_list(node_or_nodes):
            with self.lock:
                self.calls.append((proc, node))
            if proc in self.delay:
                time.sleep(self.delay[proc])
            if proc in self.fail:
                out[node] = RpcResult(node, None, self.fail[proc], call=proc)
                continue
            try:
                out[node] = RpcResult(node, getattr(self, "do_" + proc)(node, *args), call=proc)
            except errors.GanetiError as exc:
                out[node] = RpcResult(node, None, str(exc), call=proc)
        return out

    def per_node(self, nodes: Any, build: Any) -> RpcResults:
        proc, node_args, timeout = collect_per_node(nodes, build)
        out = RpcResults(proc)
        for node, args in node_args.items():
            out.update(self._rpc(proc, node, args, timeout))
        return out

    def do_os_validate(self, node: str, required: bool, osname: str, checks: list,
                       params: dict, private: dict) -> bool:
        if osname.split("+")[0] not in self.oses:
            raise errors.InvalidOS(f"OS {osname} not found")
        return True

    def do_instance_seed_build(self, node: str, name: str, uuid: str, nics: list,
                               osparams: dict, private: dict) -> str:
        self.seeds[name] = {"node": node, "nics": nics, "osparams": osparams}
        return f"/seeds/{name}.iso"

    def do_blockdev_create(self, node: str, disk: dict, size: int, *rest: Any) -> dict:
        self.disks[node].add(disk["uuid"])
        return {"path": "/x", "logical_id": disk["logical_id"], "size": size}

    def do_blockdev_remove(self, node: str, disk: dict) -> None:
        self.disks[node].discard(disk["uuid"])

    def do_blockdev_assemble(self, node: str, disk: dict, *rest: Any) -> dict:
        return {"path": "/p", "link": "/l", "uri": None}

    def do_blockdev_shutdown(self, node: str, disk: dict) -> None:
        return None

    def do_blockdev_grow(self, node: str, disk: dict, amount: int, dryrun: bool, *r: Any) -> int:
        return disk["size"] + amount

    def do_blockdev_rename(self, node: str, devlist: list) -> list:
        return [new for _, new in devlist]

    def do_blockdev_setinfo(self, node: str, disk: dict, info: str) -> None:
        self.disk_info[disk["uuid"]] = info

    def do_instance_os_add(self, node: str, inst: dict, reinstall: bool, debug: int) -> str:
        return "/log"

    def do_instance_run_rename(self, node: str, inst: dict, old: str, debug: int) -> str:
        return "/log"

    def do_instance_start(self, node: str, inst: dict, disks: list, paused: bool) -> None:
        assert isinstance(inst["beparams"]["maxmem"], int)   # filled params
        self.running[node][inst["name"]] = {"memory": inst["beparams"]["maxmem"],
                                            "vcpus": inst["beparams"]["vcpus"], "state": 0,
                                            "time": 1, "hv_state": "running"}

    def do_instance_shutdown(self, node: str, inst: dict, timeout: int) -> None:
        self.running[node].pop(inst["name"], None)

    def do_instance_reboot(self, node: str, inst: dict, rtype: str, timeout: int) -> None:
        if inst["name"] not in self.running[node]:
            raise errors.HypervisorError("not running")

    def do_instance_info(self, node: str, name: str, hv: str, hvp: dict) -> Any:
        return self.running[node].get(name)

    def do_all_instances_info(self, node: str, hvs: list, hvp: dict) -> dict:
        return dict(self.running[node])

    def do_instance_list(self, node: str, hvs: list, hvp: dict) -> list:
        return sorted(self.running[node])

    def do_instance_console_info(self, node: str, inst: dict) -> dict:
        first = {"instance": inst["name"], "kind": "msg", "message": "fake console",
                 "command": None}
        return {**first, "consoles": [first]}   # as backend.instance answers

    def do_migration_info(self, node: str, inst: dict) -> dict:
        return {"src": node}

    def do_accept_instance(self, node: str, inst: dict, info: dict, target: str) -> None:
        return None

    def do_instance_migrate(self, node: str, inst: dict, tnode: str, taddr: str,
                            live: bool, target_info: dict) -> None:
        self.running[tnode][inst["name"]] = self.running[node].pop(inst["name"])

    def do_instance_get_migration_status(self, node: str, inst: dict) -> dict:
        return {"status": "completed"}

    def do_instance_finalize_migration_dst(self, node: str, *a: Any) -> None:
        return None

    def do_instance_finalize_migration_src(self, node: str, *a: Any) -> None:
        return None

    def do_blockdev_read_chunk(self, node: str, disk: dict, offset: int, length: int) -> dict:
        return {"data": "", "length": length, "zero": True, "size": disk["size"] << 20,
                "eof": offset + length >= disk["size"] << 20}

    def do_blockdev_write_chunk(self, node: str, disk: dict, offset: int, data: str) -> int:
        return 0

    def do_blockdev_wipe(self, node: str, disk: dict, offset: int, size: int) -> int:
        return size

    def do_blockdev_checksum(self, node: str, disk: dict) -> dict:
        return {"sha1": "x", "size": disk["size"] << 20}

    def do_os_diagnose(self, node: str) -> list:
        rows = [["tinyos", "/srv/ganeti/os/tinyos", True, "", ["default"], [["size", "d"]],
                 [20], True]]
        if node == "node3":
            rows.append(["onlyhere", "/srv/ganeti/os/onlyhere", True, "", [], [], [20], True])
        return rows


@pytest.fixture
def env(tmp_path: Any) -> Any:
    data = objects.ConfigData()
    data.cluster = objects.Cluster(cluster_name="cluster.example.com", uuid="c-uuid",
                                   enabled_disk_templates=["diskless", "file", "sharedfile"],
                                   file_storage_dir="/srv/ganeti/file-storage")
    # small test disks, as on the virtual cluster (doc/vcluster.md); else Ganeti's policy
    data.cluster.ipolicy["minmax"][0]["min"]["disk-size"] = 1
    group = objects.NodeGroup(name="default", uuid="g-uuid")
    data.nodegroups[group.uuid] = group
    for i, name in enumerate(NODES):
        node = objects.Node(name=name, uuid=f"uuid-{name}", primary_ip=f"10.0.0.{i + 1}",
                            group="g-uuid", master_candidate=True)
        data.nodes[node.uuid] = node
    data.cluster.master_node = "uuid-node1"
    path = str(tmp_path / "config.data")
    cfg = ConfigWriter.initialize(path, data)
    glm = locking.GanetiLockManager(nodes=list(data.nodes), nodegroups=list(data.nodegroups),
                                    instances=[])
    fake = FakeNodes()
    ctx = MasterContext(paths=Paths(root=str(tmp_path)), cfg=cfg, glm=glm, rpc=fake)

    class Env:
        pass
    e = Env()
    e.cfg, e.ctx, e.rpc, e.path, e.glm = cfg, ctx, fake, path, glm

    def run(op_id: str, **params: Any) -> Any:
        op = opcodes.from_dict({"OP_ID": op_id, **params})
        return Processor(ctx).execute_opcode(op)
    e.run = run

    def raw() -> bytes:
        with open(path, "rb") as fh:
            return fh.read()
    e.raw = raw
    return e


def _create(env: Any, name: str = "inst1", template: str = "file", **kw: Any) -> Any:
    """OP_INSTANCE_CREATE; the made-up names do not resolve: no name/IP check."""
    params = {"instance_name": name, "disk_template": template, "os_type": "tinyos",
              "pnode": "node1", "nics": [{}], "name_check": False, "ip_check": False,
              "disks": [] if template == "diskless" else [{"size": 128}]}
    params.update(kw)
    return env.run("OP_INSTANCE_CREATE", **params)


def _query(env: Any, fields: list[str], qfilter: Any = None) -> list[list[Any]]:
    res = cquery.run_query(env.ctx, "instance", fields, qfilter)
    return [[c[1] for c in row] for row in res["data"]]


def test_create_file_instance_runs(env: Any) -> None:
    assert _create(env) == ["node1"]
    inst = env.cfg.get_instance_info_by_name("inst1")
    assert inst.admin_state == constants.ADMINST_UP
    disks = env.cfg.get_instance_disks(inst.uuid)
    assert disks[0].logical_id == ["loop", f"/srv/ganeti/file-storage/inst1/"
                                           f"{disks[0].uuid}.file.disk0"]
    assert disks[0].uuid in env.rpc.disks["node1"]
    assert "inst1" in env.rpc.running["node1"]
    assert _query(env, ["name", "status", "oper_ram", "disk.sizes", "pnode"]) == \
        [["inst1", "running", 128, [128], "node1"]]
    assert env.glm.names(locking.LEVEL_INSTANCE) == {"inst1"}


@pytest.mark.parametrize("params,match", [
    ({"os_type": "nosuchos"}, "nosuchos"),
    ({"disks": [{"size": 0}]}, "size"),
    ({"beparams": {"maxmem": "lots"}}, "maxmem"),
    ({"beparams": {"bogus": 1}}, "bogus"),
    ({"pnode": "nonode"}, "nonode"),
    ({"disk_template": "plain"}, "plain"),
], ids=["unknown-os", "disk-size-0", "bad-param", "unknown-param", "unknown-node",
        "template"])
def test_create_bad_input_changes_nothing(env: Any, params: dict, match: str) -> None:
    before = env.raw()
    with pytest.raises((errors.OpPrereqError, errors.ParameterError), match=match):
        _create(env, **params)
    assert env.raw() == before
    assert not env.rpc.disks["node1"]
    assert env.glm.names(locking.LEVEL_INSTANCE) == set()


def test_create_name_clash_and_offline_node(env: Any) -> None:
    _create(env, template="diskless", start=False)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="already"):
        _create(env, template="diskless")
    node = env.cfg.get_node_info_by_name("node2")
    node.offline = True
    env.cfg.update(node)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="offline"):
        _create(env, name="inst2", pnode="node2", template="diskless")
    assert env.raw() == before


def test_failed_os_install_cleans_up(env: Any) -> None:
    env.rpc.fail["instance_os_add"] = "create script failed: boom"
    before = env.raw()
    with pytest.raises(errors.OpExecError, match="boom"):
        _create(env)
    assert env.cfg.get_instance_info_by_name("inst1") is None
    assert not env.rpc.disks["node1"]
    assert not env.cfg.get_config_data().disks
    assert len(env.raw()) == len(before) or env.cfg.verify_config() == []
    assert env.glm.names(locking.LEVEL_INSTANCE) == set()


def test_a_configuration_write_that_fails_removes_the_new_disks(env: Any, monkeypatch: Any
                                                                ) -> None:
    """The disks are made before the instance enters the configuration; when that write
    fails (a full disk, a master whose lease expired), they are removed, not orphaned."""
    def refuse(*_args: Any) -> None:
        raise errors.ConfigurationError("Cannot write the configuration file: no space")

    monkeypatch.setattr(env.cfg, "add_instance", refuse)
    with pytest.raises(errors.ConfigurationError, match="no space"):
        _create(env, name="lost")
    assert env.cfg.get_instance_info_by_name("lost") is None
    assert not env.rpc.disks["node1"]


def test_shutdown_startup_reboot_status(env: Any) -> None:
    _create(env, template="diskless")
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    assert _query(env, ["status", "oper_ram", "admin_state"]) == [["ADMIN_down", None, "down"]]
    env.run("OP_INSTANCE_STARTUP", instance_name="inst1")
    assert _query(env, ["status"]) == [["running"]]
    env.run("OP_INSTANCE_REBOOT", instance_name="inst1", reboot_type="soft")
    env.rpc.running["node1"].clear()
    assert _query(env, ["status"]) == [["ERROR_down"]]
    env.run("OP_INSTANCE_REBOOT", instance_name="inst1", reboot_type="full")
    assert _query(env, ["status"]) == [["running"]]
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1", no_remember=True)
    assert _query(env, ["status"]) == [["ERROR_down"]]


@pytest.mark.parametrize("rtype", ["soft", "hard", "full"])
def test_reboot_of_a_stopped_instance_starts_it(env: Any, rtype: str) -> None:
    # as Ganeti's (its QA's TestInstanceReboot): reboot of a stopped instance starts it
    _create(env)
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    assert _query(env, ["status"]) == [["ADMIN_down"]]
    env.run("OP_INSTANCE_REBOOT", instance_name="inst1", reboot_type=rtype)
    assert _query(env, ["status", "admin_state"]) == [["running", "up"]]
    assert "inst1" in env.rpc.running["node1"]


def test_reboot_of_an_offline_instance_is_refused(env: Any) -> None:
    _create(env, start=False)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", offline=True)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="offline"):
        env.run("OP_INSTANCE_REBOOT", instance_name="inst1", reboot_type="hard")
    assert env.raw() == before and "inst1" not in env.rpc.running["node1"]


def test_status_values_for_node_states(env: Any) -> None:
    _create(env, template="diskless")
    env.rpc.running["node2"]["inst1"] = env.rpc.running["node1"].pop("inst1")
    assert _query(env, ["status"]) == [["ERROR_wrongnode"]]
    env.rpc.fail["all_instances_info"] = "connection refused"
    res = cquery.run_query(env.ctx, "instance", ["status", "oper_ram"], None)
    assert res["data"][0][0] == [0, "ERROR_nodedown"]
    assert res["data"][0][1][0] == constants.RS_UNAVAIL
    del env.rpc.fail["all_instances_info"]
    node = env.cfg.get_node_info_by_name("node1")
    node.offline = True
    env.cfg.update(node)
    env.rpc.calls.clear()
    res = cquery.run_query(env.ctx, "instance", ["status", "oper_ram"], None)
    assert res["data"][0][0] == [0, "ERROR_nodeoffline"]
    assert res["data"][0][1][0] == constants.RS_OFFLINE
    assert ("all_instances_info", "node1") not in env.rpc.calls


def test_list_without_live_fields_makes_no_rpc(env: Any) -> None:
    for i in range(5):
        _create(env, name=f"i{i}", template="diskless", start=False, no_install=True)
    env.rpc.calls.clear()
    rows = _query(env, ["name", "os", "be/maxmem", "hv/migration_mode", "nic.count"])
    assert [r[0] for r in rows] == [f"i{i}" for i in range(5)]
    assert rows[0][2:] == [128, "live", 1]
    assert env.rpc.calls == []
    _query(env, ["name", "status"])
    assert sorted(env.rpc.calls) == [("all_instances_info", n) for n in NODES]
    with pytest.raises(errors.OpPrereqError) as info:
        _query(env, ["name"], ["|", ["==", "name", "nope"]])
    assert info.value.ecode == errors.ECODE_NOENT


def test_remove(env: Any) -> None:
    _create(env)
    env.run("OP_INSTANCE_REMOVE", instance_name="inst1")
    assert env.cfg.get_instance_info_by_name("inst1") is None
    assert not env.rpc.disks["node1"] and not env.rpc.running["node1"]
    assert env.glm.names(locking.LEVEL_INSTANCE) == set()
    with pytest.raises(errors.OpPrereqError, match="not known"):
        env.run("OP_INSTANCE_REMOVE", instance_name="inst1")


def test_rename_requires_stopped_and_moves_disks(env: Any) -> None:
    _create(env)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="stop it"):
        env.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="inst9",
                name_check=False, ip_check=False)
    assert env.raw() == before
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    assert env.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="inst9",
                   name_check=False, ip_check=False) == "inst9"
    inst = env.cfg.get_instance_info_by_name("inst9")
    disk = env.cfg.get_instance_disks(inst.uuid)[0]
    assert "/inst9/" in disk.logical_id[1]
    assert env.glm.names(locking.LEVEL_INSTANCE) == {"inst9"}


def test_reinstall_and_unknown_os(env: Any) -> None:
    _create(env, start=False)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="other"):
        env.run("OP_INSTANCE_REINSTALL", instance_name="inst1", os_type="other")
    assert env.raw() == before
    env.rpc.oses.add("other")
    env.run("OP_INSTANCE_REINSTALL", instance_name="inst1", os_type="other")
    assert env.cfg.get_instance_info_by_name("inst1").os == "other"


def test_set_params(env: Any) -> None:
    _create(env, start=False)
    changes = env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                      beparams={"maxmem": "256M", "minmem": 256},
                      nics=[["add", -1, {"mode": "routed", "link": "100", "ip": "10.0.0.9"}]],
                      disks=[["add", -1, {"size": 64}], ["modify", 0, {"mode": "ro"}]])
    assert ["be/maxmem", 256] in changes
    rows = _query(env, ["be/maxmem", "nic.count", "nic.modes", "disk.sizes", "disk.modes"])
    assert rows == [[256, 2, ["bridged", "routed"], [128, 64], ["ro", "rw"]]]
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", disks=[["remove", 1, {}]],
            nics=[["remove", -1, {}]], offline=True)
    assert _query(env, ["disk.count", "nic.count", "admin_state", "status"]) == \
        [[1, 1, "offline", "ADMIN_offline"]]
    before = env.raw()
    with pytest.raises(errors.OpPrereqError):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", beparams={"vcpus": 0})
    with pytest.raises(errors.OpPrereqError):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", disks=[["remove", 0, {}]])
    assert env.raw() == before


@pytest.mark.parametrize("offline", [True, False], ids=["offline", "online"])
def test_marking_a_running_instance_offline_or_online_is_refused(env: Any,
                                                                  offline: bool) -> None:
    # as Ganeti's (its QA's TestInstanceModify): both need a stopped instance
    _create(env)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="marked to be up"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", offline=offline)
    assert env.raw() == before
    assert _query(env, ["status", "admin_state"]) == [["running", "up"]]


def test_marking_offline_an_instance_running_behind_the_masters_back_is_refused(
        env: Any) -> None:
    _create(env, start=False)
    env.rpc.running["node1"]["inst1"] = {"memory": 128, "vcpus": 1, "state": 0, "time": 1}
    with pytest.raises(errors.OpPrereqError, match="is running on node1"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", offline=True)


def test_stopped_instance_goes_offline_and_online(env: Any) -> None:
    # as Ganeti's QA's TestInstanceStoppedModify: online -> online, offline -> offline too
    _create(env, start=False)
    for offline, state in ((False, "down"), (True, "offline"), (True, "offline"),
                           (False, "down")):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", offline=offline)
        assert _query(env, ["admin_state"]) == [[state]]


def test_set_params_names_disks_and_nics_by_name_or_uuid(env: Any) -> None:
    # as Ganeti's (its QA's TestInstanceDeviceNames): index, name or UUID
    _create(env, start=False, disks=[{"size": 64, "name": "boot"}, {"size": 32, "name": "data"},
                                     {"size": 16}],
            nics=[{"name": "front"}, {"name": "back"}])
    inst = env.cfg.get_instance_info_by_name("inst1")
    third = env.cfg.get_instance_disks(inst.uuid)[2].uuid
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            disks=[["remove", "data", {}], ["modify", third, {"name": "logs"}],
                   ["modify", "logs", {"mode": "ro"}]],
            nics=[["remove", "front", {}]])
    assert _query(env, ["disk.sizes", "disk.names", "disk.modes", "nic.names"]) == \
        [[[64, 16], ["boot", "logs"], ["rw", "ro"], ["back"]]]


@pytest.mark.parametrize("mods,match", [
    ({"disks": [["remove", "nosuch", {}]]}, "Cannot find disk with identifier nosuch"),
    ({"nics": [["modify", "nosuch", {"link": "br1"}]]}, "Cannot find NIC with identifier"),
    ({"disks": [["add", "boot", {"size": 8}]]}, "placed by index"),
    # a name removed by an earlier change of the same job is gone
    ({"disks": [["remove", "boot", {}], ["remove", "boot", {}]]}, "Cannot find disk"),
    ({"disks": [["remove", 1, {"size": 8}]]}, "No settings should be passed when removing"),
], ids=["unknown-disk", "unknown-nic", "add-by-name", "removed-before", "remove-with-params"])
def test_set_params_refuses_bad_identifiers(env: Any, mods: dict, match: str) -> None:
    _create(env, start=False, disks=[{"size": 64, "name": "boot"}, {"size": 32}, {"size": 16}])
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match=match):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", **mods)
    assert env.raw() == before


@pytest.mark.parametrize("mods,match", [
    ({"disks": [["add", -1, {"size": 8, "name": "new"}], ["add", -1, {"size": 8, "name": "new"}]]},
     "disk name 'new' is already used"),
    ({"disks": [["modify", 1, {"name": "boot"}]]}, "disk name 'boot' is already used"),
    ({"disks": [["add", -1, {"size": 8, "name": "2"}]]}, "may not be a number"),
    ({"nics": [["add", -1, {"name": "front"}]]}, "NIC name 'front' is already used"),
    ({"nics": [["modify", 0, {"name": "7"}]]}, "may not be a number"),
], ids=["two-new", "renamed-onto", "numeric", "nic-taken", "nic-numeric"])
def test_set_params_refuses_clashing_or_numeric_device_names(env: Any, mods: dict,
                                                             match: str) -> None:
    # as Ganeti's (its QA's TestInstanceDeviceNames)
    _create(env, start=False, disks=[{"size": 64, "name": "boot"}, {"size": 32}],
            nics=[{"name": "front"}])
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match=match):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", **mods)
    assert env.raw() == before


def test_device_name_none_is_no_name(env: Any) -> None:
    # as Ganeti (its QA's TestInstanceDeviceNames renames a nameless disk back to "none")
    _create(env, start=False, disks=[{"size": 64, "name": "none"}, {"size": 32, "name": "b"}],
            nics=[{"name": "None"}])
    assert _query(env, ["disk.names", "nic.names"]) == [[[None, "b"], [None]]]
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            disks=[["modify", "b", {"name": "NONE"}]], nics=[["modify", 0, {"name": "x"}]])
    assert _query(env, ["disk.names", "nic.names"]) == [[[None, None], ["x"]]]


def test_set_params_takes_a_name_given_up_in_the_same_job(env: Any) -> None:
    _create(env, start=False, disks=[{"size": 64, "name": "boot"}, {"size": 32}])
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            disks=[["modify", 0, {"name": "old"}], ["modify", 1, {"name": "boot"}]])
    assert _query(env, ["disk.names"]) == [[["old", "boot"]]]


@pytest.mark.parametrize("kw", [{"disks": [{"size": 8, "name": "a"}, {"size": 8, "name": "a"}]},
                                {"nics": [{"name": "1"}]}], ids=["disk-twice", "nic-numeric"])
def test_create_refuses_clashing_or_numeric_device_names(env: Any, kw: dict) -> None:
    with pytest.raises(errors.OpPrereqError, match="already used|may not be a number"):
        _create(env, **kw)
    assert env.cfg.get_instance_info_by_name("inst1") is None


def test_new_primary_only_for_a_stopped_instance(env: Any) -> None:
    # as Ganeti's (its QA's TestInstanceModifyPrimaryAndBack): refused while running
    _create(env)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="still running on node1"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", pnode="node2")
    assert env.raw() == before
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    changes = env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", pnode="node2")
    assert ["pnode", "node2"] in changes
    inst = env.cfg.get_instance_info_by_name("inst1")
    assert inst.primary_node == "uuid-node2"
    assert [d.nodes for d in env.cfg.get_instance_disks(inst.uuid)] == [["uuid-node2"]]
    with pytest.raises(errors.OpPrereqError, match="cannot be combined"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", pnode="node1",
                disks=[["add", -1, {"size": 8}]])


def test_new_primary_with_force_skips_the_running_check(env: Any) -> None:
    _create(env)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", pnode="node3", force=True)
    assert _query(env, ["pnode"]) == [["node3"]]


def test_grow_disk(env: Any) -> None:
    _create(env, start=False)
    env.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    env.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=512, absolute=True)
    assert _query(env, ["disk.size/0"]) == [[512]]
    with pytest.raises(errors.OpPrereqError, match="shrink"):
        env.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=1,
                absolute=True)


@pytest.mark.parametrize("how", [{}, {"allow_failover": True}, {"always_failover": True}],
                         ids=["refused", "allow-failover", "always-failover"])
def test_migrate_of_a_stopped_instance_needs_failover(env: Any, how: dict) -> None:
    # as Ganeti's (its QA's TestInstanceMigrate): migrate --force of a stopped instance
    # fails; with --allow-failover (or be/always_failover) it fails over
    _create(env, name="shared", template="sharedfile", start=False,
            beparams={"always_failover": True} if "always_failover" in how else {})
    op = {"instance_name": "shared", "target_node": "node2",
          **({"allow_failover": True} if "allow_failover" in how else {})}
    if not how:
        before = env.raw()
        with pytest.raises(errors.OpPrereqError, match="allow-failover"):
            env.run("OP_INSTANCE_MIGRATE", **op)
        assert env.raw() == before
        assert _query(env, ["pnode", "status"]) == [["node1", "ADMIN_down"]]
        return
    env.run("OP_INSTANCE_MIGRATE", **op)
    assert _query(env, ["pnode", "status"]) == [["node2", "ADMIN_down"]]


def test_migrate_of_a_running_always_failover_instance_fails_it_over(env: Any) -> None:
    # as Ganeti's (its QA's TestInstanceMigrate with be/always_failover=true)
    _create(env, name="shared", template="sharedfile", beparams={"always_failover": True})
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2")
    assert _query(env, ["pnode", "status"]) == [["node2", "running"]]
    procs = [c for c in env.rpc.calls if c[0] in ("instance_migrate", "instance_shutdown",
                                                   "instance_start")]
    assert procs == [("instance_shutdown", "node1"), ("instance_start", "node2")]


def test_migrate_failover_move(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    env.run("OP_INSTANCE_MIGRATE", instance_name="shared", target_node="node2")
    assert _query(env, ["pnode", "status"]) == [["node2", "running"]]
    env.run("OP_INSTANCE_FAILOVER", instance_name="shared", target_node="node3")
    assert _query(env, ["pnode", "status"]) == [["node3", "running"]]
    _create(env, name="local", template="file")
    with pytest.raises(errors.OpPrereqError, match="move"):
        env.run("OP_INSTANCE_MIGRATE", instance_name="local", target_node="node2")
    env.run("OP_INSTANCE_MOVE", instance_name="local", target_node="node2")
    inst = env.cfg.get_instance_info_by_name("local")
    disk = env.cfg.get_instance_disks(inst.uuid)[0]
    assert disk.nodes == ["uuid-node2"] and disk.uuid in env.rpc.disks["node2"]
    assert disk.uuid not in env.rpc.disks["node1"]
    assert "local" in env.rpc.running["node2"]


def _progress_of(env: Any, op_id: str, **params: Any) -> tuple[list[dict], Any]:
    """Run an opcode; its progress log entries, and the error it raised (or None)."""
    from ganeti.mcpu import NullCallbacks
    cbs = NullCallbacks()
    error = None
    try:
        Processor(env.ctx).execute_opcode(opcodes.from_dict({"OP_ID": op_id, **params}), cbs)
    except errors.GanetiError as exc:
        error = exc
    return [m for t, m in cbs.messages if t == constants.ELOG_PROGRESS], error


def test_migration_writes_progress_and_one_final_entry(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    steps = iter([{"status": "active", "ram": {"transferred": 0, "remaining": 64 << 20,
                                               "total": 64 << 20}, "mbps": 80.0},
                  {"status": "completed", "ram": {"transferred": 64 << 20, "remaining": 0,
                                                  "total": 64 << 20}}])
    env.rpc.do_instance_get_migration_status = lambda node, inst: next(steps)
    entries, error = _progress_of(env, "OP_INSTANCE_MIGRATE", instance_name="shared",
                                  target_node="node2")
    assert error is None
    assert [(m["op"], m["cur"], m["done"]) for m in entries] == [
        ("migration", 0, False), ("migration", 64 << 20, True)]
    assert entries[0]["rate"] == 10e6 and entries[-1]["error"] is None


def test_failed_migration_ends_with_an_error_entry(env: Any) -> None:
    _create(env, name="shared", template="sharedfile")
    env.rpc.do_instance_get_migration_status = lambda node, inst: {
        "status": "failed", "info": "target died",
        "ram": {"transferred": 8 << 20, "remaining": 56 << 20, "total": 64 << 20}}
    entries, error = _progress_of(env, "OP_INSTANCE_MIGRATE", instance_name="shared",
                                  target_node="node2")
    assert isinstance(error, errors.OpExecError)
    assert [m["done"] for m in entries] == [False, True]
    assert "target died" in entries[-1]["error"]
    # also when it fails before any status
    _create(env, name="shared2", template="sharedfile")
    env.rpc.fail["instance_migrate"] = "no route"
    entries, error = _progress_of(env, "OP_INSTANCE_MIGRATE", instance_name="shared2",
                                  target_node="node2")
    assert error is not None and len(entries) == 1
    assert entries[0]["done"] and "no route" in entries[0]["error"]


def test_move_reports_its_disk_copy(env: Any) -> None:
    _create(env, name="local", template="file")
    seen: list[Any] = []
    real = env.rpc.do_blockdev_write_chunk

    def write(node: str, disk: dict, offset: int, data: str) -> int:
        seen.append(env.ctx.runtime_jobs.jobs("local"))
        return real(node, disk, offset, data)
    env.rpc.do_blockdev_write_chunk = write
    env.rpc.do_blockdev_read_chunk = lambda node, disk, offset, length: {
        "data": "AA==", "length": length, "zero": False, "size": 128 << 20,
        "eof": offset + length >= 128 << 20}
    entries, error = _progress_of(env, "OP_INSTANCE_MOVE", instance_name="local",
                                  target_node="node2")
    assert error is None
    assert entries[0]["op"] == "disk-copy" and entries[0]["end"] == 128 << 20
    assert [m for m in entries if m["done"]] == [entries[-1]]
    assert entries[-1]["cur"] == 128 << 20
    # while copying, the instance showed a block copy job; gone afterwards
    assert seen[1][0]["info"]["jobType"] == "block" and seen[1][0]["info"]["device"] == "disk/0"
    assert env.ctx.runtime_jobs.jobs("local") == []


def _wiping(env: Any) -> tuple[list[tuple[str, int, int]], list[Any]]:
    """Turn on prealloc_wipe_disks; record each blockdev_wipe (node, offset, size)
    and the instance's runtime jobs during it."""
    cluster = env.cfg.get_cluster_info()
    cluster.prealloc_wipe_disks = True
    env.cfg.update(cluster)
    wiped: list[tuple[str, int, int]] = []
    jobs: list[Any] = []

    def wipe(node: str, disk: dict, offset: int, size: int) -> int:
        wiped.append((node, offset, size))
        jobs.append(env.ctx.runtime_jobs.jobs("wiped"))
        return size
    env.rpc.do_blockdev_wipe = wipe
    env.rpc.do_instance_resize_disk = lambda node, inst, idx: False
    return wiped, jobs


def test_create_wipes_new_disks_when_the_cluster_asks(env: Any, monkeypatch: Any) -> None:
    from ganeti.cmdlib import disk_wipe
    _create(env, name="plain")
    assert not any(c[0] == "blockdev_wipe" for c in env.rpc.calls)     # off by default
    wiped, jobs = _wiping(env)
    monkeypatch.setattr(disk_wipe, "WIPE_CHUNK", 48 << 20)
    entries, error = _progress_of(env, "OP_INSTANCE_CREATE", instance_name="wiped",
                                  disk_template="file", os_type="tinyos", pnode="node1",
                                  nics=[{}], name_check=False, ip_check=False,
                                  disks=[{"size": 128}, {"size": 16}])
    assert error is None
    # every byte of both disks, in chunks, on the primary
    assert wiped == [("node1", 0, 48 << 20), ("node1", 48 << 20, 48 << 20),
                     ("node1", 96 << 20, 32 << 20), ("node1", 0, 16 << 20)]
    assert [(m["op"], m["done"]) for m in entries if m["done"]] == [("wipe", True)] * 2
    assert jobs[1][0]["info"]["opType"] == "wipe" and jobs[1][0]["info"]["device"] == "disk/0"
    assert env.ctx.runtime_jobs.jobs("wiped") == []
    # the grown part only
    wiped.clear()
    env.run("OP_INSTANCE_GROW_DISK", instance_name="wiped", disk=1, amount=8)
    assert wiped == [("node1", 16 << 20, 8 << 20)]


def test_a_failed_wipe_removes_the_new_instance(env: Any) -> None:
    _wiping(env)
    env.rpc.fail["blockdev_wipe"] = "disk full"
    with pytest.raises(errors.OpExecError, match="Cannot wipe disk 0 of gone.*disk full"):
        _create(env, name="gone")
    assert env.cfg.get_instance_info_by_name("gone") is None
    assert not env.rpc.disks["node1"]


def test_activate_deactivate_console_querydata(env: Any) -> None:
    _create(env)
    assert env.run("OP_INSTANCE_ACTIVATE_DISKS", instance_name="inst1") == \
        [["node1", "disk/0", "/l"]]
    console = env.run("OP_INSTANCE_CONSOLE", instance_name="inst1")
    assert console["message"] == "fake console" and len(console["consoles"]) == 1
    # the query field keeps Ganeti's one-console shape (its CLI builds an
    # InstanceConsole of it, which refuses other keys)
    field = _query(env, ["console"])[0][0]
    assert field["message"] == "fake console" and "consoles" not in field
    with pytest.raises(errors.OpPrereqError, match="running"):
        env.run("OP_INSTANCE_DEACTIVATE_DISKS", instance_name="inst1")
    data = env.run("OP_INSTANCE_QUERY_DATA", instances=["inst1"])
    assert data["inst1"]["run_state"] == "up" and data["inst1"]["be_actual"]["maxmem"] == 128


def test_tags(env: Any) -> None:
    _create(env, template="diskless", start=False)
    env.run("OP_TAGS_SET", kind="instance", name="inst1", tags=["web", "prod"])
    env.run("OP_TAGS_SET", kind="cluster", tags=["prodcluster"])
    env.run("OP_TAGS_SET", kind="node", name="node2", tags=["rack1"])
    assert env.run("OP_TAGS_GET", kind="instance", name="inst1") == ["prod", "web"]
    assert env.run("OP_TAGS_SEARCH", pattern="^prod") == \
        [["/cluster", "prodcluster"], ["/instances/inst1", "prod"]]
    env.run("OP_TAGS_DEL", kind="instance", name="inst1", tags=["web"])
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="not found"):
        env.run("OP_TAGS_DEL", kind="instance", name="inst1", tags=["web"])
    with pytest.raises(errors.OpPrereqError):
        env.run("OP_TAGS_SET", kind="instance", name="inst1", tags=["bad tag!"])
    assert env.raw() == before
    assert _query(env, ["tags"]) == [[["prod"]]]


def test_os_resource_reports_differences(env: Any) -> None:
    res = cquery.run_query(env.ctx, "os", ["name", "valid", "variants", "node_status"], None)
    rows = {r[0][1]: [c[1] for c in r] for r in res["data"]}
    assert rows["tinyos"][1] is True and rows["tinyos"][2] == ["default"]
    assert rows["onlyhere"][1] is False
    assert rows["onlyhere"][3]["node1"] == []
    # Ganeti 3.0's seven fields per node row: path, status, diagnose, variants,
    # parameters, api versions, trusted
    first = next(r[0] for r in rows["tinyos"][3].values() if r)
    assert len(first) == 7 and first[1] is True and first[6] is True


def test_hooks_env(env: Any) -> None:
    seen: list[tuple[str, dict]] = []

    class Hooks:
        def run_hooks(self, lu: Any, phase: str, feedback_fn: Any) -> None:
            if phase == constants.HOOKS_PHASE_PRE:
                seen.append((lu.HPATH, lu.BuildHooksEnv()))
                lu.BuildHooksNodes()
    env.ctx.hooks_runner = Hooks()
    _create(env, beparams={"vcpus": 2})
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    hpath, hook_env = seen[0]
    assert hpath == "instance-add"
    assert hook_env["INSTANCE_NAME"] == "inst1" and hook_env["INSTANCE_PRIMARY"] == "node1"
    assert hook_env["INSTANCE_VCPUS"] == 2 and hook_env["INSTANCE_DISK_COUNT"] == 1
    assert hook_env["INSTANCE_DISK0_SIZE"] == 128 and hook_env["INSTANCE_NIC_COUNT"] == 1
    assert hook_env["INSTANCE_BE_maxmem"] == 128 and "INSTANCE_HV_migration_mode" in hook_env
    assert seen[1][0] == "instance-stop"


@pytest.mark.timeout(30)
def test_operations_on_different_instances_run_in_parallel(env: Any) -> None:
    _create(env, name="a", template="diskless")
    _create(env, name="b", template="diskless")
    intervals: dict[str, list[float]] = {}
    both_inside = threading.Barrier(2, timeout=10)
    real_reboot = env.rpc.do_instance_reboot

    def slow_reboot(node: str, inst: dict, rtype: str, timeout: int) -> None:
        # record the [start, end] interval of each reboot; each one waits
        # (bounded) until the other has entered too: serialised LUs would
        # break the barrier instead of overlapping
        intervals[inst["name"]] = [time.monotonic()]
        try:
            both_inside.wait()
        except threading.BrokenBarrierError:
            pass
        real_reboot(node, inst, rtype, timeout)
        intervals[inst["name"]].append(time.monotonic())
    env.rpc.do_instance_reboot = slow_reboot
    errs: list[BaseException] = []

    def reboot(name: str) -> None:
        try:
            env.run("OP_INSTANCE_REBOOT", instance_name=name, reboot_type="soft")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errs.append(exc)
    threads = [threading.Thread(target=reboot, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errs
    assert not both_inside.broken, "the two reboots never ran at the same time"
    (a_start, a_end), (b_start, b_end) = intervals["a"], intervals["b"]
    # the running intervals overlap: each started before the other ended
    assert a_start < b_end and b_start < a_end


def test_storage_dir_for_makes_master_rooted_file_dir_canonical() -> None:
    from types import SimpleNamespace

    from ganeti.cmdlib.instance import storage_dir_for
    cluster = SimpleNamespace(file_storage_dir="/vc/node1/srv/ganeti/file-storage",
                              shared_file_storage_dir="/vc/node1/srv/ganeti/shared-file-storage")
    assert storage_dir_for(cluster, constants.DT_FILE, None, "/vc/node1") == \
        "/srv/ganeti/file-storage"
    # a directory outside the master's root, or a real root, is kept as written
    assert storage_dir_for(cluster, constants.DT_FILE, None, "/vc/node2") == \
        "/vc/node1/srv/ganeti/file-storage"
    assert storage_dir_for(cluster, constants.DT_FILE, None, "/") == \
        "/vc/node1/srv/ganeti/file-storage"
    # sharedfile: one directory seen by all nodes, never re-rooted
    assert storage_dir_for(cluster, constants.DT_SHARED_FILE, None, "/vc/node1") == \
        "/vc/node1/srv/ganeti/shared-file-storage"
    assert storage_dir_for(cluster, constants.DT_FILE, "sub", "/vc/node1") == \
        "/srv/ganeti/file-storage/sub"
    with pytest.raises(errors.OpPrereqError):
        storage_dir_for(cluster, constants.DT_FILE, "../../etc", "/vc/node1")


def test_param_field_titles_and_dict_cells(env: Any) -> None:
    from ganeti import query
    _create(env, start=False, osparams={"hostname_prefix": "x-"},
            hvparams={"migration_mode": "non-live"})
    res = cquery.run_query(env.ctx, "instance",
                           ["be/maxmem", "hv/migration_mode", "osparams", "custom_hvparams"],
                           None)
    assert [f["title"] for f in res["fields"]] == \
        ["BE_maxmem", "HV_migration_mode", "OSParameters", "CustomHypervisorParameters"]
    titles = [f["title"] for f in cquery.run_query(env.ctx, "instance", ["name"], None)
              ["fields"]]
    assert titles == ["Instance"]
    header, line = query.format_table(res["fields"], res["data"], separator="|")
    assert header == "BE_maxmem|HV_migration_mode|OSParameters|CustomHypervisorParameters"
    cells = line.split("|")
    assert cells[:2] == ["128", "non-live"]
    assert "hostname_prefix=x-" in cells[2] and "{" not in cells[2] and "'" not in cells[2]
    assert cells[3] == "migration_mode=non-live"


def test_set_params_nic_modify_normalises_and_checks_macs(env: Any) -> None:
    _create(env, start=False, nics=[{"mac": "aa:00:00:00:00:01", "ip": "192.0.2.1"}])
    _create(env, name="inst2", start=False, nics=[{"mac": "aa:00:00:00:00:02"}])
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            nics=[["modify", 0, {"mac": "AA:00:00:00:00:09", "ip": "none", "bridge": "br5"}]])
    assert _query(env, ["nic.macs", "nic.ips", "nic.links"], ["=", "name", "inst1"]) == \
        [[["aa:00:00:00:00:09"], [None], ["br5"]]]
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            nics=[["modify", 0, {"mac": "generate"}]])
    (mac,), = _query(env, ["nic.macs"], ["=", "name", "inst1"])[0]
    assert mac not in ("generate", "aa:00:00:00:00:09", "") and len(mac) == 17
    before = env.raw()
    for bad in ([["modify", 0, {"mac": "aa:00:00:00:00:02"}]],    # inst2's MAC
                [["add", -1, {"mac": mac}]],                      # its own
                [["modify", 0, {"mac": "zz:00"}]],
                [["modify", 3, {"ip": "192.0.2.3"}]],
                [["remove", 1, {}]],
                [["modify", 0, {}]]):
        with pytest.raises(errors.OpPrereqError):
            env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", nics=bad)
    assert env.raw() == before


def test_create_refuses_a_mac_of_another_instance_in_any_case(env: Any) -> None:
    _create(env, start=False, nics=[{"mac": "aa:00:00:00:00:01"}])
    before = env.raw()
    for mac in ("aa:00:00:00:00:01", "AA:00:00:00:00:01"):
        with pytest.raises(errors.OpPrereqError, match="MAC address .* already in use"):
            _create(env, name="inst2", start=False, nics=[{"mac": mac}])
    assert env.raw() == before
    _create(env, name="inst2", start=False, nics=[{"mac": "aa:00:00:00:00:02"}])


def test_set_params_osparams_validated_by_the_os(env: Any) -> None:
    _create(env, start=False)
    seen: list[dict] = []

    def validate(node: str, required: bool, osname: str, checks: list, params: dict,
                 private: dict) -> bool:
        seen.append(dict(params))
        if params.get("fill") == "bogus":
            raise errors.InvalidOS("bad value for fill")
        return True
    env.rpc.do_os_validate = validate
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="fill"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", osparams={"fill": "bogus"})
    assert env.raw() == before
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", osparams={"fill": "zero"})
    assert seen[-1] == {"fill": "zero"}
    assert _query(env, ["custom_osparams"]) == [[{"fill": "zero"}]]


def test_ip_check_needs_name_check(env: Any) -> None:
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="name check"):
        _create(env, name_check=False, ip_check=True)
    assert env.raw() == before
    _create(env, name_check=False, ip_check=False, start=False)
    assert env.cfg.get_instance_info_by_name("inst1") is not None


class FakeNet:
    """Stands in for ganeti.utils.net's resolver and TCP ping (no network)."""

    def __init__(self) -> None:
        self.hosts: dict[str, tuple[str, str]] = {}   # given name -> (fqdn, ip)
        self.alive: set[str] = set()
        self.pings: list[tuple[str, int, float]] = []

    def resolve_hostname(self, name: str) -> tuple[str, str]:
        if name.lower() not in self.hosts:
            raise errors.ResolverError(f"{name}: Name or service not known")
        return self.hosts[name.lower()]

    def tcp_ping(self, ip: str, port: int, timeout: float = 2.0) -> bool:
        self.pings.append((ip, port, timeout))
        return ip in self.alive


@pytest.fixture
def net(monkeypatch: Any) -> FakeNet:
    from ganeti.utils import net as netutils
    fake = FakeNet()
    monkeypatch.setattr(netutils, "resolve_hostname", fake.resolve_hostname)
    monkeypatch.setattr(netutils, "tcp_ping", fake.tcp_ping)
    return fake


def _checked_create(env: Any, name: str, **kw: Any) -> Any:
    params = {"template": "diskless", "start": False, "name_check": True, "ip_check": True}
    return _create(env, name=name, **{**params, **kw})


def _assert_nothing_created(env: Any, before: bytes) -> None:
    assert env.raw() == before
    assert env.cfg.get_all_instances_info() == {}
    assert env.glm.names(locking.LEVEL_INSTANCE) == set()


def test_name_check_creates_instance_under_the_resolved_fqdn(env: Any, net: FakeNet) -> None:
    from ganeti.cmdlib.instance_create import IP_CHECK_TIMEOUT
    from ganeti.rpc.client import default_noded_port
    net.hosts["web1"] = ("web1.example.com", "192.0.2.50")
    assert _checked_create(env, "web1") == ["node1"]
    assert env.cfg.get_instance_info_by_name("web1.example.com") is not None
    assert env.cfg.get_instance_info_by_name("web1") is None
    assert env.glm.names(locking.LEVEL_INSTANCE) == {"web1.example.com"}
    assert net.pings == [("192.0.2.50", default_noded_port(), IP_CHECK_TIMEOUT)]
    # the clash check uses the resolved name too
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="already") as info:
        _checked_create(env, "web1")
    assert info.value.ecode == errors.ECODE_EXISTS
    assert env.raw() == before


def test_unresolvable_name_refused(env: Any, net: FakeNet) -> None:
    before = env.raw()
    with pytest.raises(errors.OpPrereqError,
                       match="Cannot resolve instance name nosuch.invalid.*--no-name-check") \
            as info:
        _checked_create(env, "nosuch.invalid")
    assert info.value.ecode == errors.ECODE_RESOLVER
    _assert_nothing_created(env, before)
    assert not env.rpc.calls and not net.pings


@pytest.mark.parametrize("given,fqdn,ok", [
    ("web1", "web1.example.com", True),
    ("web1.example.com", "web1.example.com", True),
    ("WEB1.Example.com", "web1.example.com", True),
    ("web", "web1.example.com", False),
    ("web1", "other.example.com", False),
    ("web1.example.com", "web1.example.org", False),
], ids=["short-to-fqdn", "fqdn", "case", "prefix-not-a-label", "other-host", "other-domain"])
def test_resolved_name_must_look_like_the_given_one(env: Any, net: FakeNet, given: str,
                                                   fqdn: str, ok: bool) -> None:
    net.hosts[given.lower()] = (fqdn, "192.0.2.51")
    before = env.raw()
    if ok:
        _checked_create(env, given)
        assert env.cfg.get_instance_info_by_name(fqdn) is not None
        return
    with pytest.raises(errors.OpPrereqError, match="does not look the same") as info:
        _checked_create(env, given)
    assert info.value.ecode == errors.ECODE_INVAL
    _assert_nothing_created(env, before)


def test_ip_in_use_refused(env: Any, net: FakeNet) -> None:
    net.hosts["web1"] = ("web1.example.com", "192.0.2.52")
    net.alive.add("192.0.2.52")
    before = env.raw()
    with pytest.raises(errors.OpPrereqError,
                       match="IP address 192.0.2.52 of instance web1.example.com already in"
                             " use.*--no-ip-check") as info:
        _checked_create(env, "web1", template="file", disks=[{"size": 128}])
    assert info.value.ecode == errors.ECODE_NOTUNIQUE
    _assert_nothing_created(env, before)
    assert not env.rpc.disks["node1"]
    # without the IP check the same name is fine, and nothing is pinged
    net.pings.clear()
    _checked_create(env, "web1", ip_check=False)
    assert env.cfg.get_instance_info_by_name("web1.example.com") is not None
    assert net.pings == []


def test_nic_ip_auto_takes_the_resolved_address(env: Any, net: FakeNet) -> None:
    net.hosts["web1"] = ("web1.example.com", "192.0.2.53")
    _checked_create(env, "web1", nics=[{"ip": "auto"}, {"ip": "192.0.2.99"}, {}])
    inst = env.cfg.get_instance_info_by_name("web1.example.com")
    assert [nic.ip for nic in inst.nics] == ["192.0.2.53", "192.0.2.99", None]


def test_nic_ip_auto_without_name_check_refused(env: Any, net: FakeNet) -> None:
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="ip=auto needs the instance name check"):
        _create(env, template="diskless", nics=[{"ip": "auto"}])
    _assert_nothing_created(env, before)


def test_rename_with_name_check_takes_the_resolved_name(env: Any, net: FakeNet) -> None:
    _create(env, start=False)
    net.hosts["inst9"] = ("inst9.example.com", "192.0.2.54")
    net.alive.add("192.0.2.54")
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="192.0.2.54.*already in use") as info:
        env.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="inst9")
    assert info.value.ecode == errors.ECODE_NOTUNIQUE
    with pytest.raises(errors.OpPrereqError, match="Cannot resolve instance name") as info:
        env.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="nosuch9")
    assert info.value.ecode == errors.ECODE_RESOLVER
    assert env.raw() == before
    net.alive.clear()
    assert env.run("OP_INSTANCE_RENAME", instance_name="inst1",
                   new_name="inst9") == "inst9.example.com"
    inst = env.cfg.get_instance_info_by_name("inst9.example.com")
    assert "/inst9.example.com/" in env.cfg.get_instance_disks(inst.uuid)[0].logical_id[1]
    assert env.glm.names(locking.LEVEL_INSTANCE) == {"inst9.example.com"}
    # renaming to a name that resolves to an existing instance's name clashes
    _create(env, name="inst2", template="diskless", start=False)
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="inst9.example.com.*already in use") \
            as info:
        env.run("OP_INSTANCE_RENAME", instance_name="inst2", new_name="inst9")
    assert info.value.ecode == errors.ECODE_EXISTS
    assert env.raw() == before


def test_parameter_columns_have_typed_kinds() -> None:
    from ganeti.cmdlib import instance_query
    kinds = {f.name: f.kind for f in instance_query._param_fields()}
    assert kinds["be/maxmem"] == constants.QFT_UNIT       # formatted with --units
    assert kinds["be/vcpus"] == constants.QFT_NUMBER
    assert kinds["be/auto_balance"] == constants.QFT_BOOL
    assert kinds["hv/migration_mode"] == constants.QFT_OTHER


def test_private_osparams_kept_in_config_and_given_to_the_os(env: Any) -> None:
    # add, modify, reinstall: the config and the OS install RPC get the value;
    # the modify result (through jsonable, as the queue stores it) does not.
    from ganeti.jqueue.job import jsonable
    installed: list[dict] = []

    def os_add(node: str, inst: dict, reinstall: bool, debug: int) -> str:
        installed.append(dict(inst["osparams_private"]))
        return "/log"
    env.rpc.do_instance_os_add = os_add
    _create(env, start=False, osparams_private={"secret": "c1"})
    assert env.cfg.get_instance_info_by_name("inst1").osparams_private == {"secret": "c1"}
    res = env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                  osparams_private={"secret": "c2"})
    assert env.cfg.get_instance_info_by_name("inst1").osparams_private == {"secret": "c2"}
    assert "c2" not in repr(jsonable(res)) and ["os_private/secret", "<redacted>"] in jsonable(res)
    env.run("OP_INSTANCE_REINSTALL", instance_name="inst1", osparams_private={"secret": "c3"})
    assert env.cfg.get_instance_info_by_name("inst1").osparams_private == {"secret": "c3"}
    assert installed == [{"secret": "c1"}, {"secret": "c3"}]


@pytest.mark.parametrize("case", ["exec-fails", "bad-second-nic", "dry-run", "success"])
def test_create_releases_the_macs_it_reserved(env: Any, case: str) -> None:
    """A MAC generated for a NIC is reserved only while the job runs (the
    reservations used to grow with every failed creation)."""
    nics = [{"mac": "auto"}, {"mac": "auto"}]
    if case == "exec-fails":
        env.rpc.fail["instance_os_add"] = "create script failed: boom"
        with pytest.raises(errors.OpExecError, match="boom"):
            _create(env, nics=nics)
    elif case == "bad-second-nic":
        with pytest.raises(errors.OpPrereqError, match="invalid MAC"):
            _create(env, nics=[{"mac": "auto"}, {"mac": "auto"}, {"mac": "zz"}])
    elif case == "dry-run":
        _create(env, nics=nics, dry_run=True)
    else:
        _create(env, nics=nics)
        inst = env.cfg.get_instance_info_by_name("inst1")
        assert all(nic.mac for nic in inst.nics)
    assert env.cfg._reserved_macs == set()


def test_set_params_releases_the_macs_it_reserved(env: Any) -> None:
    _create(env, template="diskless", start=False)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", nics=[["add", -1, {}]])
    assert len(env.cfg.get_instance_info_by_name("inst1").nics) == 2
    assert env.cfg._reserved_macs == set()


def test_set_params_refuses_more_nics_than_allowed(env: Any) -> None:
    _create(env, template="diskless", start=False, nics=[{}] * constants.MAX_NICS)
    with pytest.raises(errors.OpPrereqError, match="at most 8"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", nics=[["add", -1, {}]])
    assert len(env.cfg.get_instance_info_by_name("inst1").nics) == constants.MAX_NICS
    assert env.cfg._reserved_macs == set()


def test_short_names_resolve_in_lus_queries_and_tags(env: Any) -> None:
    _create(env, name="web.example.com", template="diskless", start=False)
    env.run("OP_INSTANCE_STARTUP", instance_name="web")
    assert "web.example.com" in env.rpc.running["node1"]
    env.run("OP_TAGS_SET", kind="instance", name="WEB", tags=["short"])
    assert env.run("OP_TAGS_GET", kind="instance", name="web.example.com") == ["short"]
    assert _query(env, ["name", "admin_state"], ["=", "name", "web"]) == \
        [["web.example.com", "up"]]
    assert list(env.run("OP_INSTANCE_QUERY_DATA", instances=["web"])) == ["web.example.com"]
    _create(env, name="web.example.org", template="diskless", start=False)
    with pytest.raises(errors.OpPrereqError, match="not known"):   # ambiguous now
        env.run("OP_INSTANCE_SHUTDOWN", instance_name="web")
    with pytest.raises(errors.OpPrereqError, match="not known"):
        _query(env, ["name"], ["=", "name", "web"])


def test_create_without_a_disk_template_takes_the_first_enabled_one(env: Any) -> None:
    # the cluster enables diskless, file, sharedfile: Ganeti takes the first
    params = {"instance_name": "inst1", "os_type": "tinyos", "pnode": "node1", "nics": [{}],
              "name_check": False, "ip_check": False, "disks": []}
    assert env.run("OP_INSTANCE_CREATE", **params) == ["node1"]
    inst = env.cfg.get_instance_info_by_name("inst1")
    assert inst.disk_template == "diskless"


@pytest.mark.parametrize("op_id,change,expected,source", [
    ("OP_INSTANCE_STARTUP", "shutdown", "up", None),
    ("OP_INSTANCE_STARTUP", "user-shutdown", "up", "admin"),
    ("OP_INSTANCE_SHUTDOWN", "startup", "down", None),
], ids=["start-after-admin-stop", "start-after-user-stop", "stop-after-start"])
def test_start_or_stop_refused_when_the_admin_state_changed(env: Any, op_id: str, change: str,
                                                            expected: str,
                                                            source: str | None) -> None:
    _create(env, template="diskless")
    if change == "shutdown":
        env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    elif change == "user-shutdown":
        env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1", admin_state_source="user")
        inst = env.cfg.get_instance_info_by_name("inst1")
        env.cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP, constants.USER_SOURCE)
    else:
        env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
        env.run("OP_INSTANCE_STARTUP", instance_name="inst1")
    running = set(env.rpc.running["node1"])
    before = env.raw()
    params: dict[str, Any] = {"expected_admin_state": expected}
    if source:
        params["expected_admin_state_source"] = source
    with pytest.raises(errors.OpPrereqError, match=constants.ADMIN_STATE_CHANGED) as info:
        env.run(op_id, instance_name="inst1", **params)
    assert info.value.ecode == errors.ECODE_STATE
    assert env.raw() == before and set(env.rpc.running["node1"]) == running


def test_start_with_the_expected_admin_state_runs(env: Any) -> None:
    _create(env, template="diskless")
    env.rpc.running["node1"].clear()            # crashed: ERROR_down
    env.run("OP_INSTANCE_STARTUP", instance_name="inst1", expected_admin_state="up",
            expected_admin_state_source="admin")
    assert _query(env, ["status"]) == [["running"]]


def test_modify_takes_the_image_parameters_an_os_does_not_declare(env: Any) -> None:
    # Ganeti's QA TestInstanceModify: --os-parameters os-image=URL on a tinyos instance
    seen: list[dict] = []

    def os_validate(node: str, required: bool, osname: str, checks: list, params: dict,
                    private: dict) -> bool:
        seen.append(params)
        if set(params) - {"size"}:
            raise errors.InvalidOS(f"Unknown parameters for OS {osname}:"
                                   f" {', '.join(sorted(set(params) - {'size'}))}")
        return True
    env.rpc.do_os_validate = os_validate
    _create(env)
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            osparams={"os-image": "http://example.com/busybox.img"})
    inst = env.cfg.get_instance_info_by_name("inst1")
    assert inst.osparams == {"os-image": "http://example.com/busybox.img"}
    assert seen and "os-image" not in seen[-1]
    # the seed (and the metadata service's entry) follow the new parameters
    assert env.rpc.seeds["inst1"]["osparams"] == {"os-image": "http://example.com/busybox.img"}
    with pytest.raises(errors.OpPrereqError, match="Unknown parameters for OS tinyos: colour"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", osparams={"colour": "red"})


def test_a_dns_server_that_is_no_address_is_refused_and_changes_nothing(env: Any) -> None:
    # doc/images.md, "cloud-init": dns_servers go into the seed's network-config
    _create(env)
    with pytest.raises(errors.OpPrereqError, match="dns_servers: 'ns1.example.com' is not an IP"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                osparams={"dns_servers": "192.0.2.53 ns1.example.com"})
    assert "dns_servers" not in env.cfg.get_instance_info_by_name("inst1").osparams


def test_shutdown_leaves_the_disks_inactive(env: Any) -> None:
    # as Ganeti's (ShutdownInstanceDisks): its QA converts a stopped file instance next
    # (after gnt-cluster epo --on started it again)
    _create(env)
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    env.run("OP_INSTANCE_STARTUP", instance_name="inst1")
    assert env.cfg.get_instance_info_by_name("inst1").disks_active
    env.rpc.calls.clear()
    env.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    assert not env.cfg.get_instance_info_by_name("inst1").disks_active
    assert ("blockdev_shutdown", "node1") in env.rpc.calls


def test_cloud_init_from_the_metadata_service_needs_a_nic_address(env: Any) -> None:
    # doc/images.md, "Where the guest reads it": ganeti-metad knows an instance by its
    # source address, so an image-based kvm instance without one would get no data
    cluster = env.cfg.get_cluster_info()
    cluster.enabled_hypervisors = [constants.HT_FAKE, constants.HT_KVM]
    env.cfg.update(cluster)
    image = {"os-image": "http://example.com/debian.img"}
    with pytest.raises(errors.OpPrereqError, match="cloud_init_source=metad needs a NIC with"
                                                   " an IP address"):
        _create(env, hypervisor=constants.HT_KVM, hvparams={"cloud_init_source": "metad"},
                osparams=image, no_install=True, start=False)
    assert env.cfg.get_instance_info_by_name("inst1") is None
    # with an address, or with the seed cdrom, or without an image: accepted
    _create(env, hypervisor=constants.HT_KVM, hvparams={"cloud_init_source": "metad"},
            osparams=image, nics=[{"ip": "192.0.2.10"}], no_install=True, start=False)
    _create(env, "inst2", hypervisor=constants.HT_KVM, osparams=image, no_install=True,
            start=False)
    _create(env, "inst3", hypervisor=constants.HT_KVM, hvparams={"cloud_init_source": "metad"},
            no_install=True, start=False)


def test_modify_keeps_the_metadata_service_reachable_for_an_image_based_instance(
        env: Any) -> None:
    # as at add: neither switching to cloud_init_source=metad without a NIC address
    # nor taking the last address away from a metad instance is accepted
    cluster = env.cfg.get_cluster_info()
    cluster.enabled_hypervisors = [constants.HT_FAKE, constants.HT_KVM]
    env.cfg.update(cluster)
    image = {"os-image": "http://example.com/debian.img"}
    _create(env, hypervisor=constants.HT_KVM, osparams=image, no_install=True, start=False)
    with pytest.raises(errors.OpPrereqError, match="needs a NIC with an IP address"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                hvparams={"cloud_init_source": "metad"})
    inst = env.cfg.get_instance_info_by_name("inst1")
    assert "cloud_init_source" not in inst.hvparams          # nothing changed
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            nics=[["modify", "0", {"ip": "192.0.2.10"}]])
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
            hvparams={"cloud_init_source": "metad"})
    with pytest.raises(errors.OpPrereqError, match="needs a NIC with an IP address"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1",
                nics=[["modify", "0", {"ip": "none"}]])
    assert env.cfg.get_instance_info_by_name("inst1").nics[0].ip == "192.0.2.10"
