"""``gnt-instance recreate-disks`` of drbd instances (ganeti.cmdlib.instance_recreate_drbd):
mirrors lost on both nodes made again, half-lost ones refused, and the move of every
disk onto two other nodes; on fake nodes and a real ConfigWriter."""

from __future__ import annotations

from typing import Any

import pytest
from cmdlib.test_cmdlib_convert import cenv  # noqa: F401 - a fixture
from cmdlib.test_cmdlib_drbd import denv  # noqa: F401 - a fixture
from cmdlib.test_cmdlib_instance import _create, env  # noqa: F401 - a fixture

from ganeti import errors, locking, objects, serializer


def _mirror(lenv: Any, disks: int = 1) -> tuple[Any, list[Any]]:
    _create(lenv, template="drbd", pnode="node1", snode="node2", start=False,
            disks=[{"size": 64}] * disks)
    inst = lenv.cfg.get_instance_info_by_name("inst1")
    return inst, lenv.cfg.get_instance_disks(inst.uuid)


def _lose(lenv: Any, disk: Any, *nodes: str) -> None:
    for node in nodes:
        lenv.rpc.disks[node].discard(disk.uuid)


def _recreate(lenv: Any, **kw: Any) -> Any:
    return lenv.run("OP_INSTANCE_RECREATE_DISKS", instance_name="inst1", **kw)


def test_a_mirror_lost_on_both_nodes_is_made_again_with_its_logical_id(cenv: Any) -> None:  # noqa: F811
    _, disks = _mirror(cenv, 2)
    before = [serializer.to_data(d) for d in disks]
    _lose(cenv, disks[1], "node1", "node2")
    cenv.rpc.events.clear()
    _recreate(cenv, disks=[1])
    assert [serializer.to_data(d) for d in cenv.cfg.get_instance_disks(
        cenv.cfg.get_instance_info_by_name("inst1").uuid)] == before
    creates = [e for e in cenv.rpc.events if e[0] == "create"]
    assert creates == [("create", "node2", False), ("create", "node1", True)]   # disk 1 only
    shutdowns = {e[1] for e in cenv.rpc.events if e[0] == "shutdown"}
    assert shutdowns == {"node1", "node2"}            # stopped instance: taken down again


@pytest.mark.parametrize("lost, hint", [("node1", "replace-disks -p"),
                                        ("node2", "replace-disks -s")])
def test_a_mirror_lost_on_one_node_is_left_to_replace_disks(cenv: Any, lost: str,  # noqa: F811
                                                            hint: str) -> None:
    _, disks = _mirror(cenv)
    _lose(cenv, disks[0], lost)
    cenv.rpc.events.clear()
    with pytest.raises(errors.OpPrereqError, match=hint):
        _recreate(cenv)
    assert not [e for e in cenv.rpc.events if e[0] in ("create", "create-lv")]


def test_changing_a_mirrors_parameters_is_refused(cenv: Any) -> None:  # noqa: F811
    _, disks = _mirror(cenv)
    _lose(cenv, disks[0], "node1", "node2")
    with pytest.raises(errors.OpPrereqError, match="drbd instance's disks"):
        _recreate(cenv, disks=[[0, {"size": 128}]])


def test_a_mirror_on_both_nodes_is_refused(cenv: Any) -> None:  # noqa: F811
    # as Ganeti: only missing disks are recreated
    _mirror(cenv)
    cenv.rpc.events.clear()
    with pytest.raises(errors.OpPrereqError, match="Disk 0 of instance inst1 exists on node1"
                                                   " and node2"):
        _recreate(cenv, nodes=["node1", "node2"])
    assert not [e for e in cenv.rpc.events if e[0] == "create"]


def _add_node(lenv: Any, name: str) -> None:
    node = objects.Node(name=name, uuid=f"uuid-{name}", primary_ip="10.0.0.9", group="g-uuid")
    lenv.cfg.add_node(node)
    lenv.glm.add(locking.LEVEL_NODE, node.uuid)
    lenv.glm.add(locking.LEVEL_NODE_RES, node.uuid)
    lenv.rpc.disks.setdefault(name, set())
    lenv.rpc.vgs[name] = {"xenvg": 4096}


def test_recreate_on_two_other_nodes_moves_the_instance(cenv: Any) -> None:  # noqa: F811
    inst, disks = _mirror(cenv)
    old = list(disks[0].logical_id)
    _add_node(cenv, "node4")
    cenv.rpc.events.clear()
    _recreate(cenv, nodes=["node3", "node4"])
    inst = cenv.cfg.get_instance_info_by_name("inst1")
    disk = cenv.cfg.get_instance_disks(inst.uuid)[0]
    assert inst.primary_node == "uuid-node3"
    assert disk.logical_id[:2] == ["uuid-node3", "uuid-node4"]
    assert disk.logical_id[5] != old[5]                      # a new secret
    assert disk.nodes == ["uuid-node3", "uuid-node4"]
    assert all(c.nodes == ["uuid-node3", "uuid-node4"] for c in disk.children)
    creates = [e for e in cenv.rpc.events if e[0] == "create"]
    assert creates == [("create", "node4", False), ("create", "node3", True)]
    assert cenv.cfg.get_instance_secondary_nodes(inst.uuid) == ["uuid-node4"]


@pytest.mark.parametrize("nodes, match", [
    (["node3"], "two distinct nodes"),
    (["node3", "node3"], "two distinct nodes"),
    (["node3", "node1"], "already holds volumes"),
])
def test_bad_new_nodes_are_refused(cenv: Any, nodes: list[str], match: str) -> None:  # noqa: F811
    _mirror(cenv)
    before = cenv.raw()
    with pytest.raises(errors.OpPrereqError, match=match):
        _recreate(cenv, nodes=nodes)
    assert cenv.raw() == before


def test_a_failed_creation_on_the_new_nodes_changes_nothing(cenv: Any) -> None:  # noqa: F811
    _mirror(cenv)
    _add_node(cenv, "node4")
    before = cenv.raw()
    cenv.rpc.fail_create_on = {"node3"}
    cenv.rpc.events.clear()
    with pytest.raises(errors.OpExecError, match="Cannot recreate disk disk/0 on node3"):
        _recreate(cenv, nodes=["node3", "node4"])
    assert cenv.raw() == before
    assert sorted(e[1] for e in cenv.rpc.events if e[0] == "remove") == ["node3", "node4"]


def _roomy_nodes(lenv: Any) -> None:
    """Nodes that report memory and CPUs to spare (what an allocator reads)."""
    real = lenv.rpc.do_node_info

    def node_info(node: str, storage_units: list, hv_specs: list) -> dict:
        return {**real(node, storage_units, hv_specs), "memory_total": 8192,
                "memory_free": 8192, "memory_dom0": 512, "cpu_total": 4}
    lenv.rpc.do_node_info = node_info


@pytest.mark.parametrize("name", ["hail", "."])
def test_an_allocator_picks_the_two_nodes(cenv: Any, name: str) -> None:  # noqa: F811
    # Ganeti's QA TestRecreateDisks: destroy the disks, then -I hail and -I .
    _roomy_nodes(cenv)
    _, disks = _mirror(cenv)
    _add_node(cenv, "node4")
    node1 = cenv.cfg.get_node_info_by_name("node1")
    node1.offline = True                # lost: the allocator takes other nodes
    cenv.cfg.update(node1)
    _lose(cenv, disks[0], "node1", "node2")
    _recreate(cenv, iallocator=name)
    inst = cenv.cfg.get_instance_info_by_name("inst1")
    disk = cenv.cfg.get_instance_disks(inst.uuid)[0]
    assert "uuid-node1" not in disk.nodes and len(set(disk.nodes)) == 2
    assert inst.primary_node == disk.nodes[0]
    for uuid in disk.nodes:
        assert disk.uuid in cenv.rpc.disks[uuid[len("uuid-"):]]


def test_recreate_on_two_other_nodes_when_the_primary_is_offline(cenv: Any) -> None:  # noqa: F811
    # the way back for an instance whose nodes are both lost
    _mirror(cenv)
    _add_node(cenv, "node4")
    for name in ("node1", "node2"):
        node = cenv.cfg.get_node_info_by_name(name)
        node.offline = True
        cenv.cfg.update(node)
    _recreate(cenv, nodes=["node3", "node4"])
    inst = cenv.cfg.get_instance_info_by_name("inst1")
    assert inst.primary_node == "uuid-node3"
    assert cenv.cfg.get_instance_secondary_nodes(inst.uuid) == ["uuid-node4"]


def test_an_allocator_does_not_move_an_instance_whose_volumes_remain(cenv: Any) -> None:  # noqa: F811
    _roomy_nodes(cenv)
    _, disks = _mirror(cenv)
    _add_node(cenv, "node4")
    node1 = cenv.cfg.get_node_info_by_name("node1")
    node1.offline = True                # the allocator will look elsewhere ...
    cenv.cfg.update(node1)
    _lose(cenv, disks[0], "node1")      # ... but node2 still has its half of the mirror
    before = cenv.raw()
    with pytest.raises(errors.OpPrereqError, match="Node node2 still holds volumes"):
        _recreate(cenv, iallocator=".")
    assert cenv.raw() == before
