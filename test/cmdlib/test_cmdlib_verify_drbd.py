"""Cluster verify of DRBD mirrors: degraded, resyncing, inactive and two-primary sides,
minors no disk owns and the usermode helper (the nodes' answers planted through the fake
drbd_node_info and blockdev_getmirrorstatus)."""

from __future__ import annotations

from typing import Any

from cmdlib.test_cmdlib_verify import _setup, _verify_group
from fakes.fakeconfig import node_name

from ganeti import constants, objects

_OK = {"dev_path": "/dev/drbd0", "size": 128, "sync_percent": None, "estimated_time": None,
       "is_degraded": False, "ldisk_status": "ok",
       "drbd": {"cstate": "Connected", "role": "Secondary", "peer_role": "Primary",
                "disk": "UpToDate", "peer_disk": "UpToDate"}}


def _drbd_cluster(tmp_path: Any, state: dict[str, dict[str, Any]],
                  minors: dict[str, list[int]] | None = None,
                  helper: str = "/bin/true") -> tuple[Any, Any, Any]:
    cfg, rpc, ctx, _, answers = _setup(tmp_path, nodes=2)
    cluster = cfg.get_cluster_info()
    cluster.enabled_disk_templates = ["drbd", "plain", "diskless"]
    cluster.volume_group_name = "xenvg"
    cluster.drbd_usermode_helper = "/bin/true"
    cfg.update(cluster)
    n1, n2 = (cfg.get_node_info_by_name(node_name(i)) for i in (1, 2))
    children = [objects.Disk(uuid=f"c{i}", dev_type="plain", size=size,
                             logical_id=["xenvg", f"d0.disk0_{kind}"], nodes=[n1.uuid, n2.uuid])
                for i, (kind, size) in enumerate((("data", 128), ("meta", 128)))]
    disk = objects.Disk(uuid="d0", dev_type="drbd", size=128, iv_name="disk/0",
                        logical_id=[n1.uuid, n2.uuid, 11000, 0, 3, "s" * 40],
                        nodes=[n1.uuid, n2.uuid], children=children)
    cfg.add_instance(objects.Instance(name="inst1.example.com", uuid="i1",
                                      primary_node=n1.uuid, disk_template="drbd",
                                      admin_state=constants.ADMINST_UP), [disk])
    for node in (node_name(1), node_name(2)):
        answers[node] = {"lvlist": {"d0.disk0_data": [128, True], "d0.disk0_meta": [128, True]}}
    owned = {node_name(1): [0], node_name(2): [3]}
    rpc.set_handler("drbd_node_info", lambda node, args: {
        "minors": (minors or owned)[node], "helper": helper, "version": "version: 8.4.11"})
    rpc.set_handler("blockdev_getmirrorstatus", lambda node, args: [state[node]])
    return cfg, rpc, ctx


def _primary(**kw: Any) -> dict[str, Any]:
    drbd = {**_OK["drbd"], "role": "Primary", "peer_role": "Secondary", **kw.pop("drbd", {})}
    return {**_OK, **kw, "drbd": drbd}


def test_an_in_sync_mirror_verifies_clean(tmp_path: Any) -> None:
    _, rpc, ctx = _drbd_cluster(tmp_path, {node_name(1): _primary(), node_name(2): _OK})
    result, msgs, _ = _verify_group(ctx)
    assert result is True, msgs
    # every disk dict the nodes got names both ends (and the secret stays in the RPC)
    (_, (disks,)), = [c for c in rpc.calls_to("blockdev_getmirrorstatus")
                      if c[0] == [node_name(2)]]
    assert [n[0] for n in disks[0]["dynamic_params"]["drbd_nodes"]] == [node_name(1),
                                                                        node_name(2)]


def test_a_degraded_mirror_and_a_resync(tmp_path: Any) -> None:
    state = {node_name(1): _primary(is_degraded=True, drbd={"cstate": "WFConnection",
                                                            "peer_disk": "DUnknown"}),
             node_name(2): {**_OK, "is_degraded": True, "sync_percent": 42.5,
                            "estimated_time": 12, "ldisk_status": "unknown"}}
    _, _, ctx = _drbd_cluster(tmp_path, state)
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    joined = "\n".join(msgs)
    assert result is False
    assert (f"ERROR:EINSTANCEFAULTYDISK:instance:inst1.example.com:disk/0 on node"
            f" {node_name(1)} is degraded (connection WFConnection, disks"
            " UpToDate/DUnknown)") in joined
    assert (f"WARNING:EINSTANCEFAULTYDISK:instance:inst1.example.com:disk/0 on node"
            f" {node_name(2)} is resyncing: 42.5% done, 12s remaining") in joined


def test_inactive_two_primaries_stray_minor_and_wrong_helper(tmp_path: Any) -> None:
    state = {node_name(1): {**_OK, "is_degraded": True, "drbd": {"cstate": "Unconfigured"}},
             node_name(2): {**_OK, "drbd": {**_OK["drbd"], "role": "Primary"}}}
    _, _, ctx = _drbd_cluster(tmp_path, state, minors={node_name(1): [], node_name(2): [3, 7]},
                              helper="/sbin/drbdadm")
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    joined = "\n".join(msgs)
    assert result is False
    assert f"disk/0 on node {node_name(1)} is not active" in joined
    assert (f"disk/0 on node {node_name(2)} is primary, but node {node_name(2)} is the"
            " instance's secondary") in joined
    assert f"ERROR:ENODEDRBD:node:{node_name(2)}:unallocated drbd minor 7 is in use" in joined
    assert "minor 3 is in use" not in joined
    assert (f"ERROR:ENODEDRBDHELPER:node:{node_name(1)}:wrong drbd usermode helper:"
            " /sbin/drbdadm (the cluster wants /bin/true)") in joined


def _with_free_memory(rpc: Any, free: dict[str, int]) -> None:
    rpc.set_handler("node_info", lambda node, args: {"memory_free": free[node]})


def test_n1_a_secondary_without_room_for_its_peer_instances(tmp_path: Any) -> None:
    state = {node_name(1): _primary(), node_name(2): _OK}
    cfg, rpc, ctx = _drbd_cluster(tmp_path, state)
    inst = cfg.get_instance_info_by_name("inst1.example.com")
    inst.beparams = {"minmem": 256, "maxmem": 512}
    cfg.update(inst)
    _with_free_memory(rpc, {node_name(1): 4096, node_name(2): 200})
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert result is False
    assert (f"ERROR:ENODEN1:node:{node_name(2)}:not enough memory to accommodate instance"
            f" failovers should node {node_name(1)} fail (256MiB needed, 200MiB"
            " available)") in "\n".join(msgs)
    # enough room, or an instance that does not ask for N+1: clean
    _with_free_memory(rpc, {node_name(1): 4096, node_name(2): 256})
    assert _verify_group(ctx)[0] is True
    _with_free_memory(rpc, {node_name(1): 4096, node_name(2): 200})
    inst.beparams = {"minmem": 256, "maxmem": 512, "auto_balance": False}
    cfg.update(inst)
    assert _verify_group(ctx)[0] is True


def test_n1_needs_are_summed_per_failing_primary() -> None:
    from ganeti.cmdlib import verify_n1
    cluster = objects.Cluster()

    def mirror(name: str, pnode: str, snode: str, up: bool = True,
               mem: int = 128) -> tuple[Any, list[Any]]:
        inst = objects.Instance(name=name, uuid=name, primary_node=pnode, disk_template="drbd",
                                admin_state="up" if up else "down",
                                beparams={"minmem": mem, "maxmem": mem})
        return inst, [objects.Disk(uuid=f"{name}-d", dev_type="drbd", size=1,
                                   logical_id=[pnode, snode, 11000, 0, 0, "x"])]
    made = [mirror("a", "n1", "n3"), mirror("b", "n1", "n3", mem=256),
            mirror("c", "n2", "n3"), mirror("d", "n1", "n3", up=False)]
    needs = verify_n1.failover_needs(cluster, [i for i, _ in made],
                                     {i.uuid: d for i, d in made})
    assert needs == {"n3": {"n1": 384, "n2": 128}}
    assert verify_n1.problems(needs, {"n3": 300}) == [("n3", "n1", 384, 300)]
    assert verify_n1.problems(needs, {}) == []       # no figure: nothing said


def test_a_side_connected_to_the_wrong_peer(tmp_path: Any) -> None:
    wrong = "is connected to the wrong peer 10.0.0.9:11000 (configured: 10.0.0.2:11000)"
    state = {node_name(1): _primary(drbd={"mismatch": wrong}), node_name(2): _OK}
    _, _, ctx = _drbd_cluster(tmp_path, state)
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert result is False
    assert (f"ERROR:EINSTANCEFAULTYDISK:instance:inst1.example.com:disk/0 on node"
            f" {node_name(1)} {wrong}") in "\n".join(msgs)


def test_a_standalone_side_not_connected_to_its_peer_is_a_split_brain(tmp_path: Any) -> None:
    alone = {"cstate": "StandAlone", "peer_disk": "DUnknown"}
    state = {node_name(1): _primary(is_degraded=True, drbd=alone),
             node_name(2): {**_OK, "is_degraded": True, "drbd": {**_OK["drbd"], **alone}}}
    _, _, ctx = _drbd_cluster(tmp_path, state)
    result, msgs, _ = _verify_group(ctx, error_codes=True)
    assert result is False
    assert ("ERROR:EINSTANCEFAULTYDISK:instance:inst1.example.com:disk/0 is not connected"
            f" (StandAlone on {node_name(1)}, StandAlone on {node_name(2)}): DRBD refuses to"
            " connect its sides (a split brain") in "\n".join(msgs)
    # the other side waiting again (activated by verify-disks): still a split
    state[node_name(2)] = {**_OK, "is_degraded": True,
                           "drbd": {**_OK["drbd"], "cstate": "WFConnection"}}
    _, _, ctx2 = _drbd_cluster(tmp_path / "again", state)
    assert "refuses to connect its sides" in "\n".join(_verify_group(ctx2)[1])
    # a side waiting for its peer while the peer is away is only degraded, not a split
    state[node_name(1)] = _primary(is_degraded=True, drbd={"cstate": "WFConnection"})
    _, _, ctx3 = _drbd_cluster(tmp_path / "third", state)
    assert "refuses to connect" not in "\n".join(_verify_group(ctx3)[1])
