"""DRBD ports and minors handed out by the real ConfigWriter to logical units running
at once (doc/storage.md, "Node evacuation"): never the same port in the cluster nor
the same minor on a node, held until released, free again after."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from ganeti import constants, objects
from ganeti.config.writer import ConfigWriter

NODES = ["n1", "n2", "n3"]
THREADS = 12
ROUNDS = 5


@pytest.fixture
def cfg(tmp_path: Any, monkeypatch: Any) -> ConfigWriter:
    data = objects.ConfigData()
    data.cluster = objects.Cluster(cluster_name="cluster.example.com", uuid="c-uuid")
    group = objects.NodeGroup(name="default", uuid="g-uuid")
    data.nodegroups[group.uuid] = group
    for i, name in enumerate(NODES):
        data.nodes[name] = objects.Node(name=f"{name}.example.com", uuid=name,
                                        primary_ip=f"10.0.0.{i + 1}", group="g-uuid")
    data.cluster.master_node = "n1"
    writer = ConfigWriter.initialize(str(tmp_path / "config.data"), data)
    # give the other threads every chance to run between reading what is in use and
    # reserving: an allocation not atomic under the config lock hands out duplicates
    in_use = writer._drbd_in_use

    def slow_in_use() -> Any:
        found = in_use()
        time.sleep(0.001)
        return found
    monkeypatch.setattr(writer, "_drbd_in_use", slow_in_use)
    return writer


def _run_at_once(work: Any) -> list[Any]:
    barrier = threading.Barrier(THREADS)
    results: list[Any] = [None] * THREADS
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:   # reported by the test, not lost in the thread
            errors.append(exc)
    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


#: both directions of each pair of nodes: a node is node A of some disks, B of others
PAIRS = [("n1", "n2"), ("n2", "n3"), ("n3", "n1"), ("n2", "n1"), ("n3", "n2"), ("n1", "n3")]


def test_concurrent_allocations_never_share_a_port_or_a_minor(cfg: ConfigWriter) -> None:
    def work(i: int) -> list[tuple[str, str, int, int, int]]:
        got = []
        for _ in range(ROUNDS):
            a, b = PAIRS[i % len(PAIRS)]
            port, ma, mb = cfg.allocate_drbd(a, b)
            got.append((a, b, port, ma, mb))
        return got
    held = [r for rs in _run_at_once(work) for r in rs]
    ports = Counter(r[2] for r in held)
    minors = Counter(m for a, b, _, ma, mb in held for m in ((a, ma), (b, mb)))
    assert len(held) == THREADS * ROUNDS
    assert max(ports.values()) == 1, ports.most_common(3)
    assert max(minors.values()) == 1, minors.most_common(3)
    # the lowest free ones were taken: ports FIRST.. without a gap
    assert sorted(ports) == list(range(constants.FIRST_DRBD_PORT,
                                       constants.FIRST_DRBD_PORT + len(held)))


def test_new_secondary_minors_and_whole_disks_at_once_never_clash(cfg: ConfigWriter) -> None:
    """replace-disks -n (one minor) and creations (a port and two minors) together."""
    def work(i: int) -> list[tuple[str, int]]:
        got = []
        for _ in range(ROUNDS):
            if i % 2:
                got.append(("n2", cfg.allocate_drbd_minor("n2")))
            else:
                _port, ma, mb = cfg.allocate_drbd("n1", "n2")
                got += [("n1", ma), ("n2", mb)]
        return got
    held = [m for ms in _run_at_once(work) for m in ms]
    assert max(Counter(held).values()) == 1


def test_a_reservation_holds_until_released_and_the_config_holds_it_after(
        cfg: ConfigWriter) -> None:
    port, ma, mb = cfg.allocate_drbd("n1", "n2")
    # reserved, nothing in the config yet: the next gets others
    assert cfg.allocate_drbd("n1", "n2") == (port + 1, ma + 1, mb + 1)
    cfg.release_drbd([("n1", "n2", port + 1, ma + 1, mb + 1)])
    # a disk written with the reserved port and minors keeps them after the release
    disk = objects.Disk(uuid="d1", dev_type=constants.DT_DRBD8, size=128,
                        logical_id=["n1", "n2", port, ma, mb, "s"], nodes=["n1", "n2"])
    inst = objects.Instance(name="i1.example.com", uuid="i1", primary_node="n1",
                            disk_template=constants.DT_DRBD8, os="tinyos")
    cfg.add_instance(inst, [disk])
    cfg.release_drbd([("n1", "n2", port, ma, mb)])
    assert cfg.allocate_drbd("n1", "n2") == (port + 1, ma + 1, mb + 1)
    # released twice (a logical unit's cleanup run again): nothing else is freed
    cfg.release_drbd([("n1", "n2", port, ma, mb)])
    assert cfg.allocate_drbd("n1", "n2") == (port + 2, ma + 2, mb + 2)
