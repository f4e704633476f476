"""The drbd template on the master side: disk generation (ports, minors, secret, the
two volumes), creation on the secondary then the primary, the sync wait, start/stop
of mirrors on both nodes, failover to the secondary, removal on both nodes, and the
secret kept out of every answer; against a real ConfigWriter and fake nodes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cmdlib.test_cmdlib_instance import _create, env  # noqa: F401 - env: a fixture
from cmdlib.test_cmdlib_plain import LvmNodes

from ganeti import constants, errors, locking, mcpu, opcodes
from ganeti.cmdlib import drbd
from ganeti.mcpu import Processor


class DrbdNodes(LvmNodes):
    """LvmNodes that keep what happens to each DRBD disk, per node, in order.

    ``sync[node]`` scripts the answers of blockdev_find on that node (a list of
    payload updates used one per call; the last one stays).
    """

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str, Any]] = []
        self.sync: dict[str, list[dict[str, Any]]] = {}
        self.seen_disks: list[dict[str, Any]] = []

    def do_blockdev_create(self, node: str, disk: dict, size: int, owner: str,
                           on_primary: bool, *rest: Any) -> dict:
        self.events.append(("create", node, on_primary))
        self.seen_disks.append(disk)
        return super().do_blockdev_create(node, disk, size, owner, on_primary, *rest)

    def do_blockdev_assemble(self, node: str, disk: dict, name: str, as_primary: bool,
                             idx: int) -> dict:
        self.events.append(("assemble", node, as_primary))
        return super().do_blockdev_assemble(node, disk, name, as_primary, idx)

    def do_blockdev_shutdown(self, node: str, disk: dict) -> None:
        self.events.append(("shutdown", node, None))

    def do_blockdev_remove(self, node: str, disk: dict) -> None:
        self.events.append(("remove", node, None))
        super().do_blockdev_remove(node, disk)

    def do_blockdev_find(self, node: str, disk: dict) -> dict | None:
        self.seen_disks.append(disk)
        if disk["uuid"] not in self.disks[node]:
            return None
        script = self.sync.get(node) or [{}]
        update = script.pop(0) if len(script) > 1 else script[0]
        return {"dev_path": "/dev/drbd0", "size": disk["size"], "major": 147, "minor": 0,
                "sync_percent": None, "estimated_time": None, "is_degraded": False,
                "ldisk_status": "ok", "drbd": {"cstate": "Connected"}, **update}

    def do_instance_start(self, node: str, *rest: Any) -> None:
        self.events.append(("start", node, None))
        return super().do_instance_start(node, *rest)


@pytest.fixture
def denv(env: Any, monkeypatch: Any) -> Any:  # noqa: F811 - the imported fixture
    nodes = DrbdNodes()
    env.ctx.rpc = nodes
    env.rpc = nodes
    nodes.vgs = {n: {"xenvg": 4096} for n in ("node1", "node2", "node3")}
    templates = ["plain", "drbd", "diskless", "file", "sharedfile"]
    env.run("OP_CLUSTER_SET_PARAMS", vg_name="xenvg", enabled_disk_templates=templates,
            ipolicy={"disk-templates": templates})
    monkeypatch.setattr(drbd, "SYNC_POLL", 0.0)
    feedback: list[str] = []
    progress: list[dict[str, Any]] = []

    class Callbacks(mcpu.NullCallbacks):
        def feedback(self, *args: Any) -> None:
            if args and args[0] == constants.ELOG_PROGRESS:
                progress.append(args[-1])
            feedback.append(str(args[-1]))

    def run(op_id: str, **params: Any) -> Any:
        op = opcodes.from_dict({"OP_ID": op_id, **params})
        return Processor(env.ctx).execute_opcode(op, Callbacks())
    env.run = run
    env.feedback = feedback
    env.progress = progress
    return env


def _drbd(denv: Any, name: str = "inst1", pnode: str = "node1", snode: str = "node2",
          **kw: Any) -> Any:
    return _create(denv, name, template="drbd", pnode=pnode, snode=snode, **kw)


def _disk(denv: Any, name: str = "inst1") -> Any:
    inst = denv.cfg.get_instance_info_by_name(name)
    return denv.cfg.get_instance_disks(inst.uuid)[0]


def test_create_makes_the_secondary_first_then_the_primary(denv: Any) -> None:
    assert _drbd(denv, start=False) == ["node1"]
    creates = [e for e in denv.rpc.events if e[0] == "create"]
    assert creates == [("create", "node2", False), ("create", "node1", True)]
    disk = _disk(denv)
    node1, node2 = "uuid-node1", "uuid-node2"
    assert disk.dev_type == "drbd" and disk.nodes == [node1, node2]
    assert disk.logical_id[:5] == [node1, node2, constants.FIRST_DRBD_PORT, 0, 0]
    assert len(disk.logical_id[5]) == 40
    data, meta = disk.children
    assert (data.logical_id, data.size) == (["xenvg", f"{disk.uuid}.disk0_data"], 128)
    assert (meta.logical_id, meta.size) == (["xenvg", f"{disk.uuid}.disk0_meta"], 128)
    # the node learns both ends: names and replication addresses
    sent = denv.rpc.seen_disks[0]
    assert sent["dynamic_params"] == {"drbd_nodes": [["node1", "10.0.0.1"],
                                                     ["node2", "10.0.0.2"]],
                                      "resync_rate": 61440,
                                      "resync_control": {"c-plan-ahead": "0"}}
    # not started: the mirrors go down again on both nodes
    assert [e[:2] for e in denv.rpc.events if e[0] == "shutdown"] == \
        [("shutdown", "node1"), ("shutdown", "node2")]


def test_ports_and_minors_are_never_shared(denv: Any) -> None:
    _drbd(denv, "a", start=False)
    _drbd(denv, "b", pnode="node1", snode="node3", start=False)
    _drbd(denv, "c", pnode="node3", snode="node2", start=False)
    ids = {n: _disk(denv, n).logical_id[:5] for n in "abc"}
    assert ids["b"][2:5] == [constants.FIRST_DRBD_PORT + 1, 1, 0]
    assert ids["c"][2:5] == [constants.FIRST_DRBD_PORT + 2, 1, 1]
    # reservations: two allocations before either is in the config differ
    cfg = denv.cfg
    first = cfg.allocate_drbd("uuid-node1", "uuid-node2")
    second = cfg.allocate_drbd("uuid-node1", "uuid-node2")
    assert first != second and first[1] != second[1]
    cfg.release_drbd([("uuid-node1", "uuid-node2", *first), ("uuid-node1", "uuid-node2",
                                                             *second)])
    assert cfg.allocate_drbd("uuid-node1", "uuid-node2") == first


@pytest.mark.parametrize("params, match", [
    ({"snode": None}, "needs a secondary node"),
    ({"snode": "node1"}, "must differ"),
    ({"template": "plain"}, "takes no secondary node"),
], ids=["no-snode", "same-node", "plain-with-snode"])
def test_bad_node_choices_are_refused(denv: Any, params: dict[str, Any], match: str) -> None:
    before = denv.raw()
    args = {"pnode": "node1", "snode": "node2", "template": "drbd", **params}
    template = args.pop("template")
    with pytest.raises(errors.OpPrereqError, match=match):
        _create(denv, "inst1", template=template, **args)
    assert denv.raw() == before and not denv.rpc.created


def test_no_room_on_the_secondary_creates_nothing(denv: Any) -> None:
    denv.rpc.vgs["node2"]["xenvg"] = 200        # 128 + 128 MiB of metadata needed
    before = denv.raw()
    with pytest.raises(errors.OpPrereqError, match="node2.*required 256 MiB, available 200"):
        _drbd(denv)
    assert denv.raw() == before and not denv.rpc.created
    # the refused creation's port and minors are free again
    assert denv.cfg.allocate_drbd("uuid-node1", "uuid-node2")[0] == constants.FIRST_DRBD_PORT


def test_a_failed_create_removes_on_both_nodes(denv: Any) -> None:
    original = denv.rpc.do_blockdev_create

    def failing(node: str, *args: Any) -> Any:
        if node == "node1":
            raise errors.StorageError("no")
        return original(node, *args)
    denv.rpc.do_blockdev_create = failing
    with pytest.raises(errors.OpExecError, match="Can't create disk disk/0 on node node1"):
        _drbd(denv)
    assert sorted(e[1] for e in denv.rpc.events if e[0] == "remove") == ["node1", "node2"]
    assert not denv.rpc.disks["node2"]
    assert denv.cfg.get_instance_info_by_name("inst1") is None


def test_the_sync_is_waited_for_and_reported(denv: Any) -> None:
    denv.rpc.sync["node1"] = [
        {"sync_percent": 12.5, "estimated_time": 30, "is_degraded": True},
        {"sync_percent": 80.0, "estimated_time": 4, "is_degraded": True},
        {}]
    _drbd(denv, start=False)
    text = "\n".join(denv.feedback)
    assert "device disk/0: 12.50% done, 30s remaining (estimated)" in text
    assert "80.00% done" in text and "disks are in sync" in text
    # typed progress entries of the resync in the job's log, the last one done
    entries = [e for e in denv.progress if e.get("op") == "drbd-resync"]
    assert entries and entries[0]["end"] == 128 * 1024 * 1024
    assert entries[-1]["done"] and entries[-1]["cur"] == entries[-1]["end"]


def test_no_wait_for_sync(denv: Any) -> None:
    denv.rpc.sync["node1"] = [{"sync_percent": 1.0, "is_degraded": True}]
    _drbd(denv, start=False, wait_for_sync=False)
    assert not any("% done" in f for f in denv.feedback)


def test_start_sets_up_the_secondary_first_and_stop_takes_both_down(denv: Any) -> None:
    _drbd(denv, start=False)
    denv.rpc.events.clear()
    denv.run("OP_INSTANCE_STARTUP", instance_name="inst1")
    assert denv.rpc.events[:2] == [("assemble", "node2", False), ("start", "node1", None)]
    denv.rpc.events.clear()
    denv.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    assert [e[:2] for e in denv.rpc.events if e[0] == "shutdown"] == \
        [("shutdown", "node1"), ("shutdown", "node2")]
    assert not denv.cfg.get_instance_info_by_name("inst1").disks_active


def test_reboot_of_a_stopped_mirror_instance_sets_up_the_secondary_first(denv: Any) -> None:
    # reboot starts a stopped instance, as Ganeti's (its QA's TestInstanceReboot)
    _drbd(denv)
    denv.run("OP_INSTANCE_SHUTDOWN", instance_name="inst1")
    denv.rpc.events.clear()
    denv.run("OP_INSTANCE_REBOOT", instance_name="inst1", reboot_type="hard")
    assert denv.rpc.events[:2] == [("assemble", "node2", False), ("start", "node1", None)]
    inst = denv.cfg.get_instance_info_by_name("inst1")
    assert inst.admin_state == "up" and inst.disks_active


def test_activate_disks_assembles_both_sides(denv: Any) -> None:
    _drbd(denv, start=False)
    denv.rpc.events.clear()
    result = denv.run("OP_INSTANCE_ACTIVATE_DISKS", instance_name="inst1")
    assert denv.rpc.events == [("assemble", "node2", False), ("assemble", "node1", True)]
    assert result[0][:2] == ["node1", "disk/0"]
    denv.rpc.events.clear()
    denv.run("OP_INSTANCE_DEACTIVATE_DISKS", instance_name="inst1")
    assert [e[1] for e in denv.rpc.events] == ["node1", "node2"]


def test_activate_disks_follows_the_resync_of_a_node_that_came_back(denv: Any,
                                                                       monkeypatch: Any
                                                                       ) -> None:
    _drbd(denv, start=False)
    denv.feedback.clear()
    denv.progress.clear()
    # the secondary came back: its resync runs when the disks are activated
    denv.rpc.sync["node1"] = [{"sync_percent": 40.0, "estimated_time": 6, "is_degraded": True},
                              {}]
    denv.run("OP_INSTANCE_ACTIVATE_DISKS", instance_name="inst1", wait_for_sync=True)
    assert "device disk/0: 40.00% done" in "\n".join(denv.feedback)
    entries = [e for e in denv.progress if e.get("op") == "drbd-resync"]
    assert entries and entries[-1]["done"]
    # a peer that stays away is not waited for long: a warning, the disks are active
    monkeypatch.setattr(drbd, "ACTIVATE_SYNC_STALL", 0.3)
    denv.rpc.sync["node1"] = [{"is_degraded": True, "drbd": {"cstate": "WFConnection"}}]
    denv.feedback.clear()
    denv.run("OP_INSTANCE_ACTIVATE_DISKS", instance_name="inst1", wait_for_sync=True)
    assert "made no progress for 0s" in "\n".join(denv.feedback)
    inst = denv.cfg.get_instance_info_by_name("inst1")
    assert inst.disks_active


def test_failover_goes_to_the_secondary_and_keeps_the_mirror(denv: Any) -> None:
    _drbd(denv)
    with pytest.raises(errors.OpPrereqError, match="only move to its secondary node node2"):
        denv.run("OP_INSTANCE_FAILOVER", instance_name="inst1", target_node="node3")
    denv.rpc.events.clear()
    denv.run("OP_INSTANCE_FAILOVER", instance_name="inst1")
    inst = denv.cfg.get_instance_info_by_name("inst1")
    assert inst.primary_node == "uuid-node2"
    assert _disk(denv).nodes == ["uuid-node2", "uuid-node1"]
    events = [e for e in denv.rpc.events if e[0] in ("assemble", "start", "shutdown")]
    assert events == [("shutdown", "node1", None), ("assemble", "node1", False),
                      ("start", "node2", None)]
    # and back
    denv.run("OP_INSTANCE_FAILOVER", instance_name="inst1")
    assert denv.cfg.get_instance_info_by_name("inst1").primary_node == "uuid-node1"
    assert _disk(denv).nodes == ["uuid-node1", "uuid-node2"]


def test_failover_refuses_a_target_that_is_not_up_to_date(denv: Any) -> None:
    _drbd(denv)
    denv.rpc.sync["node2"] = [{"ldisk_status": "unknown", "is_degraded": True}]
    before = denv.raw()
    with pytest.raises(errors.OpPrereqError, match="not up to date on the target node node2"):
        denv.run("OP_INSTANCE_FAILOVER", instance_name="inst1")
    assert denv.raw() == before
    denv.run("OP_INSTANCE_FAILOVER", instance_name="inst1", ignore_consistency=True)
    assert denv.cfg.get_instance_info_by_name("inst1").primary_node == "uuid-node2"


def test_move_and_migrate_with_disks_of_drbd_are_refused_clearly(denv: Any) -> None:
    _drbd(denv)
    with pytest.raises(errors.OpPrereqError, match="(?i)disk template drbd"):
        denv.run("OP_INSTANCE_MOVE", instance_name="inst1", target_node="node3")
    with pytest.raises(errors.OpPrereqError, match="without --with-disks"):
        denv.run("OP_INSTANCE_MIGRATE", instance_name="inst1", with_disks=True)


def test_remove_removes_on_both_nodes(denv: Any) -> None:
    _drbd(denv)
    denv.rpc.events.clear()
    denv.run("OP_INSTANCE_REMOVE", instance_name="inst1")
    assert sorted(e[1] for e in denv.rpc.events if e[0] == "remove") == ["node1", "node2"]
    assert not denv.rpc.disks["node1"] and not denv.rpc.disks["node2"]
    assert denv.cfg.allocate_drbd("uuid-node1", "uuid-node2")[:2] == \
        (constants.FIRST_DRBD_PORT, 0)


def test_the_secret_is_never_in_an_answer(denv: Any) -> None:
    _drbd(denv)
    secret = _disk(denv).logical_id[5]
    data = denv.run("OP_INSTANCE_QUERY_DATA", instances=["inst1"], static=False)
    text = json.dumps(data)
    assert secret not in text
    disk = data["inst1"]["disks"][0]
    assert disk["logical_id"][5] == drbd.HIDDEN
    assert disk["drbd_info"] == {"primary_node": "node1", "primary_minor": 0,
                                 "secondary_node": "node2", "secondary_minor": 0,
                                 "port": constants.FIRST_DRBD_PORT}
    assert disk["pstatus"]["ldisk_status"] == "ok" and disk["sstatus"]["minor"] == 0
    assert [c["dev_type"] for c in disk["children"]] == ["plain", "plain"]
    assert secret not in "\n".join(denv.feedback)
    query = denv.run("OP_QUERY", what="instance", fields=["disk.sizes", "snodes"],
                     qfilter=None)
    assert secret not in json.dumps(query)


# --- replace-disks --------------------------------------------------------------------

class ReplaceNodes(DrbdNodes):
    """DrbdNodes that also record the replace-disks and migration steps (volume names
    included); ``fail_at`` names steps that fail."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_at: set[str] = set()
        #: connection state of the DRBD sides per node (blockdev_getmirrorstatus)
        self.cstate: dict[str, str] = {}

    def do_blockdev_getmirrorstatus(self, node: str, disks: list) -> list:
        return [{"drbd": {"cstate": self.cstate.get(node, "Connected")}} for _ in disks]

    def do_blockdev_create(self, node: str, disk: dict, size: int, owner: str,
                           on_primary: bool, *rest: Any) -> dict:
        if disk["dev_type"] == "plain":
            self.events.append(("create-lv", node, disk["logical_id"][1]))
            return {"path": "/x", "logical_id": disk["logical_id"], "size": size}
        return super().do_blockdev_create(node, disk, size, owner, on_primary, *rest)

    def do_blockdev_remove(self, node: str, disk: dict) -> None:
        if disk["dev_type"] == "plain":
            self.events.append(("remove-lv", node, disk["logical_id"][1]))
            return
        ends = [n[0] for n in disk["dynamic_params"]["drbd_nodes"]]
        if node not in ends:      # as the node's device class refuses it
            raise errors.StorageError(f"node {node} is not one of its DRBD nodes")
        super().do_blockdev_remove(node, disk)

    def do_blockdev_rename(self, node: str, devlist: list) -> list:
        for old, new in devlist:
            self.events.append(("rename", node, (old["logical_id"][1], new[1])))
        return [new for _, new in devlist]

    def do_node_info(self, node: str, storage_units: list, hv_specs: list) -> dict:
        info = super().do_node_info(node, storage_units, hv_specs)
        info.update(memory_total=8192, memory_free=8192, memory_dom0=512, cpu_total=4)
        return info

    def do_instance_resize_disk(self, node: str, inst: dict, idx: int) -> bool:
        return True

    def do_blockdev_close(self, node: str, disks: list) -> None:
        self.events.append(("close", node, None))

    def do_accept_instance(self, node: str, inst: dict, info: dict, target: str) -> None:
        self.events.append(("accept", node, None))
        if "accept" in self.fail_at:
            raise errors.HypervisorError("refused")

    def do_instance_migrate(self, node: str, *args: Any) -> None:
        self.events.append(("migrate", node, None))
        super().do_instance_migrate(node, *args)

    def do_drbd_detach_local(self, node: str, disks: list) -> None:
        self.events.append(("detach", node, None))

    def do_drbd_attach_local(self, node: str, disks: list, new_metadata: bool) -> None:
        self.events.append(("attach-local", node, new_metadata))

    def do_drbd_disconnect_net(self, node: str, disks: list) -> None:
        self.events.append(("disconnect", node, None))

    def do_drbd_attach_net(self, node: str, disks: list, multimaster: bool) -> None:
        peers = [n[0] for n in disks[0]["dynamic_params"]["drbd_nodes"]]
        self.events.append(("attach-net", node, tuple(peers)))
        if multimaster:
            self.events.append(("dual", node, None))


@pytest.fixture
def renv(denv: Any) -> Any:
    nodes = ReplaceNodes()
    nodes.vgs = denv.rpc.vgs
    denv.ctx.rpc = nodes
    denv.rpc = nodes
    return denv


def _replace(lenv: Any, mode: str, **kw: Any) -> Any:
    return lenv.run("OP_INSTANCE_REPLACE_DISKS", instance_name="inst1", mode=mode, **kw)


@pytest.mark.parametrize("mode, node", [("replace_on_secondary", "node2"),
                                        ("replace_on_primary", "node1")], ids=["-s", "-p"])
def test_replace_in_place_swaps_the_volumes_under_drbd(renv: Any, mode: str, node: str) -> None:
    _drbd(renv)
    before = _disk(renv)
    renv.rpc.events.clear()
    _replace(renv, mode)
    data, meta = (c.logical_id[1] for c in before.children)
    steps = [e for e in renv.rpc.events if e[0] not in ("find",)]
    assert steps[:2] == [("create-lv", node, data + ".new"), ("create-lv", node, meta + ".new")]
    assert steps[2] == ("detach", node, None)
    renames = [e[2] for e in steps if e[0] == "rename"]
    assert renames[1] == (data + ".new", data) and renames[3] == (meta + ".new", meta)
    assert renames[0][1].startswith(data + "_replaced-")
    assert ("attach-local", node, True) in steps
    removed = [e[2] for e in steps if e[0] == "remove-lv"]
    assert sorted(removed) == sorted([renames[0][1], renames[2][1]])
    assert all(e[1] == node for e in steps if e[0] in ("create-lv", "rename", "remove-lv"))
    assert _disk(renv).logical_id == before.logical_id     # the config is unchanged
    assert "disks are in sync" in "\n".join(renv.feedback)


def test_replace_connects_a_standalone_source_before_the_copy(renv: Any) -> None:
    _drbd(renv)
    renv.rpc.cstate["node1"] = "StandAlone"        # a split brain left the primary alone
    renv.rpc.events.clear()
    _replace(renv, "replace_on_secondary")
    steps = [e[:2] for e in renv.rpc.events if e[0] in ("attach-local", "attach-net")]
    assert steps == [("attach-local", "node2"), ("attach-net", "node1")]
    renv.rpc.cstate.clear()                         # connected: left alone
    renv.rpc.events.clear()
    _replace(renv, "replace_on_secondary")
    assert not [e for e in renv.rpc.events if e[0] == "attach-net"]


def test_replace_new_secondary_moves_the_mirror(renv: Any) -> None:
    _drbd(renv)
    old = _disk(renv)
    renv.rpc.events.clear()
    _replace(renv, "replace_new_secondary", remote_node="node3")
    disk = _disk(renv)
    assert disk.logical_id[:5] == ["uuid-node1", "uuid-node3", old.logical_id[2], 0, 0]
    assert disk.logical_id[5] == old.logical_id[5]
    assert disk.nodes == ["uuid-node1", "uuid-node3"]
    assert all(c.nodes == ["uuid-node1", "uuid-node3"] for c in disk.children)
    steps = [e for e in renv.rpc.events if e[0] in ("create", "shutdown", "disconnect",
                                                    "attach-net", "remove")]
    assert steps == [("create", "node3", False), ("shutdown", "node2", None),
                     ("disconnect", "node1", None),
                     ("attach-net", "node1", ("node1", "node3")), ("remove", "node2", None)]
    inst = renv.cfg.get_instance_info_by_name("inst1")
    assert renv.cfg.get_instance_nodes(inst.uuid) == ["uuid-node1", "uuid-node3"]
    # the next new secondary gets the next free minor there, and the old one is free
    _drbd(renv, "inst2", pnode="node2", snode="node3")
    assert _disk(renv, "inst2").logical_id[3:5] == [0, 1]


def test_replace_needs_an_up_to_date_source(renv: Any) -> None:
    _drbd(renv)
    renv.rpc.sync["node1"] = [{"ldisk_status": "unknown", "is_degraded": True}]
    before = renv.raw()
    renv.rpc.events.clear()
    for mode, kw in (("replace_new_secondary", {"remote_node": "node3"}),
                     ("replace_on_secondary", {})):
        with pytest.raises(errors.OpPrereqError, match="not up to date on node node1"):
            _replace(renv, mode, **kw)
    assert renv.raw() == before
    assert not [e for e in renv.rpc.events if e[0] not in ("find",)]


def test_replace_auto_repairs_the_degraded_side(renv: Any) -> None:
    _drbd(renv)
    renv.rpc.events.clear()
    _replace(renv, "replace_auto")
    assert "No disks of instance inst1 need replacing" in renv.feedback
    assert not [e for e in renv.rpc.events if e[0] == "create-lv"]
    renv.rpc.sync["node2"] = [{"ldisk_status": "faulty", "is_degraded": True}, {}]
    _replace(renv, "replace_auto")
    assert {e[1] for e in renv.rpc.events if e[0] == "create-lv"} == {"node2"}
    renv.rpc.sync["node1"] = [{"ldisk_status": "faulty"}]
    renv.rpc.sync["node2"] = [{"ldisk_status": "unknown"}]
    with pytest.raises(errors.OpPrereqError, match="not up to date on both"):
        _replace(renv, "replace_auto")


@pytest.mark.parametrize("mode, kw, match", [
    ("replace_new_secondary", {}, "needs a new node"),
    ("replace_new_secondary", {"remote_node": "node2"}, "already the secondary"),
    ("replace_new_secondary", {"remote_node": "node1"}, "is the instance's primary"),
    ("replace_on_secondary", {"remote_node": "node3"}, "goes with mode"),
    ("replace_on_primary", {"disks": [3]}, "has no disk 3"),
], ids=["no-node", "same-secondary", "primary", "node-with-s", "bad-index"])
def test_replace_refuses_bad_requests(renv: Any, mode: str, kw: dict[str, Any],
                                      match: str) -> None:
    _drbd(renv)
    before = renv.raw()
    with pytest.raises(errors.OpPrereqError, match=match):
        _replace(renv, mode, **kw)
    assert renv.raw() == before


def test_replace_refuses_other_templates(renv: Any) -> None:
    _create(renv, "inst1", template="plain")
    with pytest.raises(errors.OpPrereqError, match="only mirrored"):
        _replace(renv, "replace_auto")


def test_replace_on_a_stopped_instance_activates_then_shuts_down(renv: Any) -> None:
    _drbd(renv, start=False)
    renv.rpc.events.clear()
    _replace(renv, "replace_on_secondary")
    kinds = [(e[0], e[1]) for e in renv.rpc.events if e[0] in ("assemble", "shutdown")]
    assert kinds[:2] == [("assemble", "node2"), ("assemble", "node1")]
    assert not any(e[2] for e in renv.rpc.events if e[0] == "assemble")   # never primary
    assert kinds[-2:] == [("shutdown", "node1"), ("shutdown", "node2")]


def test_replace_new_secondary_chosen_by_the_allocator(renv: Any) -> None:
    _drbd(renv)
    _replace(renv, "replace_new_secondary", iallocator="ganeti-iallocator")
    assert _disk(renv).nodes == ["uuid-node1", "uuid-node3"]
    assert any("Selected new secondary node node3" in f for f in renv.feedback)


# --- live migration ----------------------------------------------------------------

def test_live_migration_goes_dual_primary_for_the_copy_only(renv: Any) -> None:
    _drbd(renv)
    renv.rpc.events.clear()
    renv.run("OP_INSTANCE_MIGRATE", instance_name="inst1")
    inst = renv.cfg.get_instance_info_by_name("inst1")
    assert inst.primary_node == "uuid-node2"
    assert _disk(renv).nodes == ["uuid-node2", "uuid-node1"]
    steps = [(e[0], e[1]) for e in renv.rpc.events
             if e[0] in ("disconnect", "dual", "assemble", "accept", "migrate", "close",
                         "attach-net", "shutdown")]
    dual = steps.index(("dual", "node2"))
    accept = steps.index(("accept", "node2"))
    close = steps.index(("close", "node1"))
    assert steps[:2] == [("disconnect", "node1"), ("disconnect", "node2")]
    assert dual < steps.index(("assemble", "node2")) < accept
    assert accept < steps.index(("migrate", "node1")) < close
    # after the copy: single-primary again, nothing taken down
    assert steps[close + 1:close + 3] == [("disconnect", "node1"), ("disconnect", "node2")]
    assert not [s for s in steps[close:] if s[0] == "dual"]
    assert not [s for s in steps if s[0] == "shutdown"]


def test_a_failed_migration_leaves_one_primary_on_the_source(renv: Any) -> None:
    _drbd(renv)
    renv.rpc.fail_at.add("accept")
    renv.rpc.events.clear()
    with pytest.raises(errors.OpExecError, match="refused"):
        renv.run("OP_INSTANCE_MIGRATE", instance_name="inst1")
    assert renv.cfg.get_instance_info_by_name("inst1").primary_node == "uuid-node1"
    steps = [(e[0], e[1]) for e in renv.rpc.events]
    close = steps.index(("close", "node2"))
    assert ("dual", "node1") in steps[:close]
    assert not [s for s in steps[close:] if s[0] == "dual"]
    assert [s for s in steps[close:] if s[0] == "attach-net"] == [("attach-net", "node1"),
                                                                  ("attach-net", "node2")]


def test_migration_needs_the_target_in_sync(renv: Any) -> None:
    _drbd(renv)
    renv.rpc.sync["node2"] = [{"ldisk_status": "unknown", "is_degraded": True}]
    with pytest.raises(errors.OpPrereqError, match="a migration needs both sides in sync"):
        renv.run("OP_INSTANCE_MIGRATE", instance_name="inst1")
    assert renv.cfg.get_instance_info_by_name("inst1").primary_node == "uuid-node1"


def test_grow_grows_both_volumes_then_the_mirror(renv: Any) -> None:
    calls: list[tuple[str, bool, bool]] = []

    def grow(node: str, disk: dict, amount: int, dryrun: bool, backing: bool,
             excl: bool) -> int:
        calls.append((node, dryrun, backing))
        return disk["size"] + amount
    renv.rpc.do_blockdev_grow = grow
    _drbd(renv)
    renv.rpc.vgs["node2"]["xenvg"] = 100
    with pytest.raises(errors.OpPrereqError, match="node2.*required 200 MiB"):
        renv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=200)
    assert calls == []
    renv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    assert calls == [("node1", True, False), ("node2", False, True), ("node1", False, True),
                     ("node1", False, False)]
    assert _disk(renv).size == 128 + 64
    assert [c.size for c in _disk(renv).children] == [192, 128]


def test_grow_of_a_stopped_mirror_needs_active_disks(renv: Any) -> None:
    _drbd(renv, start=False)
    with pytest.raises(errors.OpPrereqError, match="activate-disks first"):
        renv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    renv.run("OP_INSTANCE_ACTIVATE_DISKS", instance_name="inst1")
    renv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    assert _disk(renv).size == 192


def test_the_allocator_picks_both_nodes(renv: Any) -> None:
    _create(renv, "inst1", template="drbd", pnode=None, iallocator="ganeti-iallocator")
    disk = _disk(renv)
    assert len(set(disk.nodes)) == 2
    inst = renv.cfg.get_instance_info_by_name("inst1")
    assert disk.nodes[0] == inst.primary_node
    assert any("Selected nodes for instance inst1" in f for f in renv.feedback)


def test_migrate_allow_failover_of_an_instance_that_should_run_but_does_not(renv: Any) -> None:
    _drbd(renv)
    renv.rpc.running["node1"].pop("inst1")      # it died; the config still says up
    with pytest.raises(errors.OpExecError, match="--allow-failover"):
        renv.run("OP_INSTANCE_MIGRATE", instance_name="inst1")
    renv.rpc.events.clear()
    renv.run("OP_INSTANCE_MIGRATE", instance_name="inst1", allow_failover=True)
    assert renv.cfg.get_instance_info_by_name("inst1").primary_node == "uuid-node2"
    assert "inst1" in renv.rpc.running["node2"]
    steps = [(e[0], e[1]) for e in renv.rpc.events if e[0] in ("shutdown", "assemble", "start")]
    assert steps == [("shutdown", "node1"), ("assemble", "node1"), ("start", "node2")]


def test_the_cluster_drbd_usermode_helper(renv: Any) -> None:
    renv.run("OP_CLUSTER_SET_PARAMS", drbd_helper="/bin/true")
    assert renv.cfg.get_cluster_info().drbd_usermode_helper == "/bin/true"
    before = renv.raw()
    with pytest.raises(errors.GanetiError, match="absolute path"):
        renv.run("OP_CLUSTER_SET_PARAMS", drbd_helper="true")
    assert renv.raw() == before


def test_the_resync_rate_disk_parameter_reaches_the_nodes(renv: Any) -> None:
    renv.run("OP_CLUSTER_SET_PARAMS", diskparams={"drbd": {"resync-rate": 2048}})
    _drbd(renv, start=False)
    assert {d["dynamic_params"]["resync_rate"] for d in renv.rpc.seen_disks} == {2048}
    renv.run("OP_CLUSTER_SET_PARAMS", diskparams={"drbd": {"dynamic-resync": True,
                                                           "c-max-rate": 30720}})
    renv.rpc.seen_disks.clear()
    _drbd(renv, "inst2", start=False)
    assert renv.rpc.seen_disks[0]["dynamic_params"]["resync_control"] == {
        "c-plan-ahead": "20", "c-fill-target": "0s", "c-delay-target": "1",
        "c-max-rate": "30720k", "c-min-rate": "4096k"}


def test_node_drbd_minors_lists_each_minor_with_role_and_peer(denv: Any) -> None:
    # gnt-node list-drbd (Ganeti's QA TestNodeListDrbd): a node's rows name it or its peer
    _drbd(denv, "a", start=False)
    _drbd(denv, "b", pnode="node1", snode="node3", start=False)
    _drbd(denv, "c", pnode="node3", snode="node2", start=False)
    _create(denv, "p", template="plain", pnode="node1", start=False)
    rows = {n: drbd.node_drbd_minors(denv.cfg, f"uuid-{n}") for n in ("node1", "node2")}
    assert rows["node1"] == [["node1", 0, "a", "disk/0", "primary", "node2"],
                             ["node1", 1, "b", "disk/0", "primary", "node3"]]
    assert rows["node2"] == [["node2", 0, "a", "disk/0", "secondary", "node1"],
                             ["node2", 1, "c", "disk/0", "secondary", "node3"]]
    denv.run("OP_INSTANCE_REMOVE", instance_name="a")
    assert drbd.node_drbd_minors(denv.cfg, "uuid-node2") == [
        ["node2", 1, "c", "disk/0", "secondary", "node3"]]


def _hv_state(renv: Any, node: str, state: str) -> None:
    renv.rpc.running[node]["inst1"] = {"memory": 128, "vcpus": 1, "state": 0, "time": 1,
                                       "hv_state": state}


@pytest.mark.parametrize("source_state, target_state, primary, closed", [
    # the master died after qemu's copy (node1 fully sent, the guest paused on node2): the
    # target is resumed, the config switched, node1 made secondary
    ("migrating", "paused", "node2", "node1"),
    # the copy had not finished (node2 still incoming): node2's qemu goes, node2 is made
    # secondary, node1 keeps the guest
    ("paused", "incoming", "node1", "node2"),
])
def test_cleanup_of_an_interrupted_migration_leaves_one_primary(
        renv: Any, source_state: str, target_state: str, primary: str, closed: str) -> None:
    """``migrate --cleanup`` of both kinds of interrupted migration ends single-primary on
    the node that has the guest (test/integration/test_guest_drbd_migrate.py on real
    DRBD)."""
    _drbd(renv)
    _hv_state(renv, "node1", source_state)
    _hv_state(renv, "node2", target_state)
    renv.rpc.events.clear()
    renv.run("OP_INSTANCE_MIGRATE", instance_name="inst1", cleanup=True)
    assert renv.cfg.get_instance_info_by_name("inst1").primary_node == f"uuid-{primary}"
    steps = [(e[0], e[1]) for e in renv.rpc.events]
    close = steps.index(("close", closed))
    assert ("close", primary) not in steps
    assert not [s for s in steps if s[0] == "dual"]
    assert [s for s in steps[close:] if s[0] == "attach-net"] == [("attach-net", "node1"),
                                                                  ("attach-net", "node2")]


def test_cleanup_without_a_target_looks_at_the_secondary_only(renv: Any) -> None:
    """A drbd instance's ``--cleanup`` target is its secondary, whatever another node
    runs: a guest on node3 is not taken for the migration's (it would win, being
    the one that runs)."""
    _drbd(renv)
    _hv_state(renv, "node1", "paused")
    _hv_state(renv, "node2", "incoming")
    _hv_state(renv, "node3", "running")
    renv.run("OP_INSTANCE_MIGRATE", instance_name="inst1", cleanup=True)
    assert renv.cfg.get_instance_info_by_name("inst1").primary_node == "uuid-node1"


def _watch_sync(renv: Any) -> list[tuple[list[Any], set[str]]]:
    """At each look at a disk (the sync waits included): the volumes removed by
    then, and the node locks the job still holds."""
    seen: list[tuple[list[Any], set[str]]] = []
    real = renv.rpc.do_blockdev_find

    def find(node: str, disk: dict) -> dict | None:
        removed = [e[1] for e in renv.rpc.events if e[0] in ("remove", "remove-lv")]
        seen.append((removed, renv.glm.list_owned(locking.LEVEL_NODE)
                     | renv.glm.list_owned(locking.LEVEL_NODE_RES)))
        return real(node, disk)
    renv.rpc.do_blockdev_find = find
    return seen


@pytest.mark.parametrize("mode, kw", [("replace_new_secondary", {"remote_node": "node3"}),
                                      ("replace_on_secondary", {})], ids=["-n", "-s"])
def test_early_release_removes_the_old_volumes_and_frees_the_nodes_before_the_copy(
        renv: Any, mode: str, kw: dict[str, Any]) -> None:
    _drbd(renv)
    _drbd(renv, "inst2")
    seen = _watch_sync(renv)
    forgotten: list[set[str]] = []

    class Cache:
        def invalidate(self, uuids: Any = None) -> None:
            forgotten.append(set(uuids or ()))
    renv.ctx.node_info_cache = Cache()
    renv.rpc.events.clear()
    _replace(renv, mode, early_release=True, **kw)
    removed, held = seen[-1]                     # the last look: the copy's wait
    assert removed and set(removed) == {"node2"}  # the old volumes went before it
    assert held == set()                          # and no node lock was held for it
    assert "node locks released for the copy" in "\n".join(renv.feedback)
    # their live data is forgotten although the job no longer holds them at its end
    assert forgotten and "uuid-node2" in set().union(*forgotten)
    # without it: the old volumes stay until the copy is done, the locks are kept
    seen.clear()
    renv.rpc.events.clear()
    renv.run("OP_INSTANCE_REPLACE_DISKS", instance_name="inst2", mode=mode, **kw)
    assert seen and all(r == [] and h for r, h in seen)
    assert [e[1] for e in renv.rpc.events if e[0] in ("remove", "remove-lv")]


def test_a_copy_that_fails_after_an_early_release_says_no_old_copy_is_left(
        renv: Any, monkeypatch: Any) -> None:
    _drbd(renv)
    monkeypatch.setattr(drbd, "SYNC_SETTLE", 0.2)
    renv.rpc.sync["node1"] = [{"is_degraded": True, "drbd": {"cstate": "StandAlone"}}]
    with pytest.raises(errors.OpExecError, match="already removed .early release."):
        _replace(renv, "replace_on_secondary", early_release=True)
    assert [e[1] for e in renv.rpc.events if e[0] == "remove-lv"] == ["node2", "node2"]


def test_custom_drbd_options_reach_the_nodes_and_bad_ones_are_refused(denv: Any) -> None:
    # doc/storage.md, "DRBD parameters": Ganeti's net-custom and disk-custom
    with pytest.raises(errors.OpPrereqError, match="shared-secret is set by Ganeti"):
        denv.run("OP_CLUSTER_SET_PARAMS",
                 diskparams={"drbd": {"net-custom": "--shared-secret=abc"}})
    with pytest.raises(errors.OpPrereqError, match="not a drbdsetup option"):
        denv.run("OP_CLUSTER_SET_PARAMS", diskparams={"drbd": {"disk-custom": "al-extents"}})
    assert "net-custom" not in denv.cfg.get_cluster_info().diskparams.get("drbd", {})
    denv.run("OP_CLUSTER_SET_PARAMS", diskparams={"drbd": {
        "net-custom": "--ping-timeout=100  --ping-int=5", "disk-custom": "--al-extents=3389"}})
    _drbd(denv, start=False)
    sent = denv.rpc.seen_disks[0]["dynamic_params"]
    assert sent["net_custom"] == ["--ping-timeout=100", "--ping-int=5"]
    assert sent["disk_custom"] == ["--al-extents=3389"]


def test_grow_waits_for_a_running_resync_first(renv: Any) -> None:
    # DRBD refuses a resize during a resync (right after a failover, the old primary
    # catching up): the grow waits for it to end
    order: list[str] = []
    real_find = renv.rpc.do_blockdev_find

    def find(node: str, disk: dict) -> dict | None:
        order.append("find")
        return real_find(node, disk)

    def grow(node: str, disk: dict, amount: int, dryrun: bool, backing: bool,
             excl: bool) -> int:
        order.append("dry-run" if dryrun else "grow")
        return disk["size"] + amount
    _drbd(renv)
    renv.rpc.do_blockdev_find = find
    renv.rpc.do_blockdev_grow = grow
    renv.rpc.sync["node1"] = [{"sync_percent": 40.0, "estimated_time": 2, "is_degraded": True},
                              {"sync_percent": 90.0, "estimated_time": 1, "is_degraded": True},
                              {}]
    renv.feedback.clear()
    renv.run("OP_INSTANCE_GROW_DISK", instance_name="inst1", disk=0, amount=64)
    first_grow = order.index("grow")
    assert order[:first_grow].count("find") >= 3      # the resync was followed to its end
    assert any("% done" in line for line in renv.feedback)
