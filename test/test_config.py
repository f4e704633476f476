"""Tests for ganeti.config.ConfigWriter."""

from __future__ import annotations

import os
import random
import threading

import pytest

from ganeti import constants, errors, serializer
from ganeti.config import ConfigWriter
from fakes.fakeconfig import one_node_data
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Node, NodeGroup
from functools import partial

from fakes.clock import FakeClock


Clock = partial(FakeClock, 1000.0, tick=1.0)


def _initial() -> ConfigData:
    return one_node_data()


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "config.data")


@pytest.fixture
def cfg(path) -> ConfigWriter:
    return ConfigWriter.initialize(path, _initial(), clock=Clock(), rng=random.Random(1))


def _add_node(cfg: ConfigWriter, name: str, ip: str, **kw) -> Node:
    node = Node(name=name, primary_ip=ip, **kw)
    cfg.add_node(node)
    return node


def _add_instance(cfg: ConfigWriter, name: str, nodes: list[str], mac: str | None = None) -> Instance:
    inst = Instance(name=name, primary_node=nodes[0], os="debootstrap",
                    disk_template=constants.DT_DRBD8 if len(nodes) > 1 else constants.DT_PLAIN,
                    nics=[NIC(mac=mac or cfg.generate_mac())])
    disk = Disk(dev_type=inst.disk_template, size=1024, nodes=list(nodes), iv_name="disk/0")
    cfg.add_instance(inst, [disk])
    return inst


def test_initialize_refuses_to_overwrite(path, cfg) -> None:
    before = open(path, "rb").read()
    with pytest.raises(errors.ConfigurationError, match="already exists"):
        ConfigWriter.initialize(path, _initial())
    assert open(path, "rb").read() == before
    assert os.listdir(os.path.dirname(path)) == ["config.data"]


def test_round_trip_and_exact_dump(path, cfg) -> None:
    n2 = _add_node(cfg, "node2.example.com", "127.0.1.2")
    inst = _add_instance(cfg, "inst1.example.com", ["n1", n2.uuid])
    on_disk = open(path, "rb").read()
    assert cfg.dump() == on_disk
    again = ConfigWriter(path)
    assert again.get_config_data() == cfg.get_config_data()
    assert again.get_instance_info_by_name("inst1.example.com").uuid == inst.uuid
    assert [d.size for d in again.get_instance_disks(inst.uuid)] == [1024]
    assert again.get_instance_nodes(inst.uuid) == ["n1", n2.uuid]
    assert again.get_nodegroup("g1").members == sorted(["n1", n2.uuid],
                                                      key=lambda u: again.get_node_info(u).name)


def test_every_change_bumps_serial_and_calls_on_change(path) -> None:
    seen: list[bytes] = []
    cfg = ConfigWriter.initialize(path, _initial(), clock=Clock(), on_change=lambda raw, serial: seen.append(raw))
    serials = [cfg.get_serial_no()]

    def step() -> None:
        serials.append(cfg.get_serial_no())
        assert serializer.loads(seen[-1])["serial_no"] == serials[-1]
        assert serializer.loads(open(path, "rb").read())["serial_no"] == serials[-1]

    n2 = _add_node(cfg, "node2.example.com", "127.0.1.2")
    step()
    inst = _add_instance(cfg, "inst1.example.com", ["n1", n2.uuid])
    step()
    cfg.rename_instance(inst.uuid, "inst2.example.com")
    step()
    cfg.set_instance_admin_state(inst.uuid, constants.ADMINST_UP)
    step()
    old_serial = inst.serial_no
    cfg.add_instance_disk(inst.uuid, Disk(dev_type=constants.DT_DRBD8, size=5, nodes=["n1", n2.uuid]))
    step()
    assert inst.serial_no == old_serial + 1
    cfg.remove_instance_disk(inst.uuid, inst.disks[-1])
    step()
    node = cfg.get_node_info(n2.uuid)
    node.offline = True
    cfg.update(node)
    step()
    cluster = cfg.get_cluster_info()
    cluster.candidate_pool_size = 3
    cfg.update(cluster)
    step()
    grp = NodeGroup(name="group2")
    cfg.add_nodegroup(grp)
    step()
    cfg.remove_nodegroup(grp.uuid)
    step()
    cfg.remove_instance(inst.uuid)
    step()
    cfg.remove_node(n2.uuid)
    step()
    assert serials == list(range(serials[0], serials[0] + len(serials)))
    assert len(seen) == len(serials) - 1
    assert cfg.get_config_data().disks == {}


def test_object_serial_and_mtime_updated(cfg) -> None:
    node = cfg.get_node_info("n1")
    serial, mtime = node.serial_no, node.mtime
    node.drained = True
    cfg.update(node)
    assert node.serial_no == serial + 1 and node.mtime > mtime


def test_missing_config_is_refused(tmp_path) -> None:
    with pytest.raises(errors.ConfigurationError, match="does not exist"):
        ConfigWriter(str(tmp_path / "nope"))


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'{"version": 3000000}',
                                     b'{"version": 3000000, "cluster": [], "nodes": {}}',
                                     b'{"version": 1, "cluster": {}}', b"\xff\xfe"],
                         ids=["empty", "garbage", "list", "nocluster", "badcluster", "version",
                              "binary"])
def test_corrupt_config_refused_and_left_untouched(path, content) -> None:
    with open(path, "wb") as fh:
        fh.write(content)
    st = os.stat(path)
    with pytest.raises(errors.ConfigurationError) as info:
        ConfigWriter(path)
    assert path in str(info.value)
    assert open(path, "rb").read() == content
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert os.listdir(os.path.dirname(path)) == ["config.data"]


def test_names_are_unique_across_nodes_instances_groups(cfg) -> None:
    with pytest.raises(errors.ConfigurationError, match="node1.example.com"):
        _add_node(cfg, "node1.example.com", "127.0.1.9")
    with pytest.raises(errors.ConfigurationError, match="already used"):
        _add_instance(cfg, "node1.example.com", ["n1"])
    with pytest.raises(errors.ConfigurationError, match="already used"):
        cfg.add_nodegroup(NodeGroup(name="node1.example.com"))
    inst = _add_instance(cfg, "inst1.example.com", ["n1"])
    with pytest.raises(errors.ConfigurationError):
        cfg.rename_instance(inst.uuid, "default")
    node = cfg.get_node_info("n1")
    node.name = "inst1.example.com"
    with pytest.raises(errors.ConfigurationError):
        cfg.update(node)
    node.name = "node1.example.com"


def test_duplicate_mac_and_unknown_references_refused(cfg) -> None:
    _add_instance(cfg, "inst1.example.com", ["n1"], mac="aa:00:00:00:00:01")
    with pytest.raises(errors.ConfigurationError, match="MAC"):
        _add_instance(cfg, "inst2.example.com", ["n1"], mac="AA:00:00:00:00:01")
    with pytest.raises(errors.ConfigurationError, match="primary node"):
        cfg.add_instance(Instance(name="inst3.example.com", primary_node="nope"), [])
    with pytest.raises(errors.ConfigurationError, match="unknown node"):
        cfg.add_instance(Instance(name="inst4.example.com", primary_node="n1"),
                         [Disk(nodes=["n1", "ghost"])])
    with pytest.raises(errors.ConfigurationError, match="node group"):
        _add_node(cfg, "node9.example.com", "127.0.1.9", group="nogroup")
    assert cfg.get_instance_names() == ["inst1.example.com"]


def test_update_refuses_copies_and_unknown_objects(cfg) -> None:
    import copy
    node_copy = copy.deepcopy(cfg.get_node_info("n1"))
    with pytest.raises(errors.ConfigurationError, match="not in the configuration"):
        cfg.update(node_copy)
    with pytest.raises(errors.ConfigurationError):
        cfg.update(Cluster())
    with pytest.raises(errors.ConfigurationError):
        cfg.update(Instance(name="x"))
    with pytest.raises(errors.ConfigurationError):
        cfg.update("node1")  # type: ignore[arg-type]


def test_remove_nodegroup_with_members_refused(cfg) -> None:
    with pytest.raises(errors.ConfigurationError, match="still has nodes"):
        cfg.remove_nodegroup("g1")
    with pytest.raises(errors.ConfigurationError):
        cfg.remove_nodegroup("unknown")


def test_getters(cfg) -> None:
    n2 = _add_node(cfg, "node2.example.com", "127.0.1.2", offline=True)
    n3 = _add_node(cfg, "node3.example.com", "127.0.1.3", master_candidate=True)
    inst = _add_instance(cfg, "inst1.example.com", [n3.uuid, "n1"])
    assert cfg.get_node_names() == ["node1.example.com", "node2.example.com", "node3.example.com"]
    assert cfg.get_node_list() == ["n1", n2.uuid, n3.uuid]
    assert cfg.get_online_node_list() == ["n1", n3.uuid]
    assert cfg.get_master_node() == "n1"
    assert cfg.get_master_node_name() == "node1.example.com"
    assert [n.name for n in cfg.get_master_candidates()] == ["node1.example.com", "node3.example.com"]
    assert cfg.get_node_info_by_name("node2.example.com") is n2
    assert cfg.get_node_info_by_name("nope") is None
    assert cfg.get_instance_info(inst.uuid) is inst
    assert cfg.get_nodegroup_by_name("default").uuid == "g1"
    assert cfg.get_default_nodegroup() == "g1"
    assert set(cfg.get_all_nodegroups_info()) == {"g1"}
    assert set(cfg.get_all_instances_info()) == {inst.uuid}
    assert cfg.node_instances(n3.uuid) == ([inst.uuid], [])
    assert cfg.node_instances("n1") == ([], [inst.uuid])
    assert cfg.get_instance_secondary_nodes(inst.uuid) == ["n1"]
    with pytest.raises(errors.ConfigurationError):
        cfg.get_instance_disks("nope")


def test_generated_uuids_and_macs_are_unique(cfg) -> None:
    uuids = {cfg.generate_uuid() for _ in range(500)}
    assert len(uuids) == 500 and "n1" not in uuids
    macs = {cfg.generate_mac() for _ in range(500)}
    assert len(macs) == 500
    assert all(m.startswith(constants.DEFAULT_MAC_PREFIX + ":") and len(m) == 17 for m in macs)
    assert cfg.generate_mac("52:54:00").startswith("52:54:00:")


def test_generate_mac_avoids_config_macs(path) -> None:
    # same seed -> the first MAC generated would be the taken one
    first = ConfigWriter.initialize(path, _initial(), rng=random.Random(7)).generate_mac()
    cfg = ConfigWriter(path, rng=random.Random(7))
    _add_instance(cfg, "inst1.example.com", ["n1"], mac=first)
    cfg2 = ConfigWriter(path, rng=random.Random(7))
    assert cfg2.generate_mac() != first


def test_batch_writes_once(path) -> None:
    seen: list[bytes] = []
    cfg = ConfigWriter.initialize(path, _initial(), on_change=lambda raw, serial: seen.append(raw))
    start = cfg.get_serial_no()
    with cfg.batch():
        for i in range(20):
            _add_node(cfg, f"node{i + 10}.example.com", f"127.0.2.{i}")
        assert seen == []
    assert len(seen) == 1
    assert cfg.get_serial_no() == start + 20
    assert ConfigWriter(path).get_serial_no() == start + 20


def test_concurrent_changes_are_serialised(path) -> None:
    seen: list[int] = []
    cfg = ConfigWriter.initialize(path, _initial(),
                                  on_change=lambda b, _s: seen.append(serializer.loads(b)["serial_no"]))
    start = cfg.get_serial_no()
    errs: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(10):
                _add_node(cfg, f"n{k}-{i}.example.com", f"127.{k}.0.{i}")
        except BaseException as exc:   # pragma: no cover - reported below
            errs.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and not errs
    # group commit: every write carries the newest serial, in increasing order
    assert seen == sorted(set(seen)) and seen[-1] == start + 40
    assert len(ConfigWriter(path).get_node_list()) == 41


def test_verify_config_clean(cfg) -> None:
    _add_instance(cfg, "inst1.example.com", ["n1"])
    assert cfg.verify_config() == []


def test_verify_config_finds_planted_problems(cfg) -> None:
    n2 = _add_node(cfg, "node2.example.com", "127.0.1.2")
    inst = _add_instance(cfg, "inst1.example.com", ["n1", n2.uuid], mac="aa:00:00:00:00:01")
    other = _add_instance(cfg, "inst2.example.com", ["n1"])
    data = cfg.get_config_data()
    # plant problems behind the writer's back
    inst.disks.append("ghost-disk")
    data.disks[inst.disks[0]].nodes.append("ghost-node")
    other.nics[0].mac = "aa:00:00:00:00:01"
    n2.group = "ghost-group"
    n2.primary_ip = "127.0.1.1"
    other.primary_node = "gone"
    data.nodes["n1"].master_candidate = False
    data.disks["orphan"] = Disk(uuid="orphan")
    problems = cfg.verify_config()
    text = "\n".join(problems)
    assert "unknown disk 'ghost-disk'" in text
    assert "unknown node 'ghost-node'" in text
    assert "Duplicate MAC address 'aa:00:00:00:00:01'" in text
    assert "unknown node group 'ghost-group'" in text
    assert "Duplicate IP address '127.0.1.1'" in text
    assert "unknown primary node 'gone'" in text
    assert "not a master candidate" in text
    assert "Disk orphan does not belong to any instance" in text
    data.nodes[n2.uuid].name = "inst1.example.com"
    assert any("Duplicate name 'inst1.example.com'" in p for p in cfg.verify_config())
    assert all(p[0].isupper() for p in problems)


def test_on_change_gets_the_serial_of_its_bytes_in_order(path) -> None:
    """The on_change contract the replicator relies on: the serial of the bytes."""
    seen: list[tuple[int, int]] = []
    holder: list[ConfigWriter] = []

    def on_change(raw: bytes, serial: int) -> None:
        assert holder[0].get_serial_no() >= serial     # memory is never behind
        seen.append((serializer.loads(raw)["serial_no"], serial))

    cfg = ConfigWriter.initialize(path, _initial(), on_change=on_change)
    holder.append(cfg)
    threads = [threading.Thread(target=lambda i=i: _add_node(cfg, f"n{i}.example.com",
                                                            f"192.0.2.{i + 10}"))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert 1 <= len(seen) <= 8 and all(a == b for a, b in seen)
    serials = [b for _, b in seen]
    assert serials == sorted(set(serials)) and serials[-1] == cfg.get_serial_no()
    assert [a for a, _ in seen] == sorted(a for a, _ in seen)


def test_last_saved_serial_is_per_thread(cfg) -> None:
    assert cfg.last_saved_serial() == 0
    _add_node(cfg, "a.example.com", "192.0.2.50")
    mine = cfg.last_saved_serial()
    assert mine == cfg.get_serial_no()
    other: list[int] = []

    def work() -> None:
        other.append(cfg.last_saved_serial())
        _add_node(cfg, "b.example.com", "192.0.2.51")
        other.append(cfg.last_saved_serial())

    t = threading.Thread(target=work)
    t.start()
    t.join(10)
    assert other == [0, mine + 1]
    assert cfg.last_saved_serial() == mine          # the other thread's save is not ours


def test_saved_bytes_equal_full_encoding_after_changes(path, cfg) -> None:
    n2 = _add_node(cfg, "node2.example.com", "127.0.1.2")
    insts = [_add_instance(cfg, f"inst{i}.example.com", ["n1", n2.uuid]) for i in range(3)]
    cfg.set_instance_admin_state(insts[0].uuid, constants.ADMINST_UP)
    disk = cfg.get_instance_disks(insts[1].uuid)[0]
    disk.size = 4096
    cfg.update(disk)
    cfg.rename_instance(insts[2].uuid, "other.example.com")
    cfg.remove_instance(insts[1].uuid)
    on_disk = open(path, "rb").read()
    assert on_disk == serializer.dumps_bytes(cfg.get_config_data())
    again = ConfigWriter(path)
    assert again.get_instance_info(insts[0].uuid).admin_state == constants.ADMINST_UP
    assert again.get_instance_info(insts[1].uuid) is None
    assert disk.uuid not in again.get_config_data().disks
    assert again.get_instance_info(insts[2].uuid).name == "other.example.com"


# --- group commit -----------------------------------------------------------------

class CountingWrite:
    """An injectable ``write_fn``: real atomic write, counted, optionally slow/failing."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls = 0
        self.serials: list[int] = []
        self.fail_on: set[int] = set()      # 1-based call numbers that raise
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def __call__(self, path: str, raw: bytes) -> None:
        self.calls += 1
        self.entered.set()
        if self.gate is not None and self.calls == 1:
            assert self.gate.wait(20), "gate never opened"
        if self.delay:
            threading.Event().wait(self.delay)
        if self.calls in self.fail_on:
            raise OSError(28, "No space left on device")
        from ganeti.utils import io
        io.write_file_atomic(path, raw, mode=0o640)
        self.serials.append(serializer.loads(raw)["serial_no"])


def _wait_serial(cfg: ConfigWriter, serial: int) -> None:
    for _ in range(2000):
        if cfg.get_serial_no() >= serial:
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"serial {serial} never reached")


def _run_threads(targets: list) -> list[BaseException]:
    errs: list[BaseException] = []

    def wrap(fn):
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errs.append(exc)
        return run

    threads = [threading.Thread(target=wrap(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    return errs


def test_group_commit_many_threads_fewer_writes_and_newest_on_disk(path) -> None:
    writer = CountingWrite(delay=0.01)
    seen: list[int] = []
    cfg = ConfigWriter.initialize(path, _initial(), write_fn=writer,
                                  on_change=lambda raw, serial: seen.append(serial))
    start = cfg.get_serial_no()
    returned: list[tuple[int, int]] = []      # (serial saved by thread, on-disk serial then)

    def worker(k: int) -> None:
        for i in range(5):
            _add_node(cfg, f"g{k}-{i}.example.com", f"127.{k + 1}.1.{i}")
            mine = cfg.last_saved_serial()
            returned.append((mine, ConfigWriter(path).get_serial_no()))

    errs = _run_threads([lambda k=k: worker(k) for k in range(12)])
    assert not errs
    mutations = 60
    assert cfg.get_serial_no() == start + mutations
    assert writer.calls < mutations                       # grouped fsyncs
    assert writer.serials == sorted(set(writer.serials))  # newest only, increasing
    assert seen == writer.serials                         # on_change per write, in order
    # each mutator returned only after a write including its serial was durable
    assert all(mine > start and on_disk >= mine for mine, on_disk in returned)
    reloaded = ConfigWriter(path)
    assert reloaded.get_serial_no() == cfg.get_serial_no()
    assert reloaded.dump() == cfg.dump()


def test_failed_group_write_fails_every_carried_caller_and_rolls_back(path) -> None:
    writer = CountingWrite()
    cfg = ConfigWriter.initialize(path, _initial(), write_fn=writer)
    start = cfg.get_serial_no()
    writer.gate = threading.Event()
    writer.fail_on = {2}
    first_err: list[BaseException] = []

    def first() -> None:
        try:
            _add_node(cfg, "first.example.com", "127.0.9.1")
        except BaseException as exc:   # pragma: no cover - asserted below
            first_err.append(exc)

    lead = threading.Thread(target=first)
    lead.start()
    try:
        assert writer.entered.wait(10)          # write #1 in progress, gated
        errors_seen: list[BaseException] = []

        def late(i: int) -> None:
            try:
                _add_node(cfg, f"late{i}.example.com", f"127.0.9.{i + 10}")
            except BaseException as exc:
                errors_seen.append(exc)

        others = [threading.Thread(target=late, args=(i,)) for i in range(3)]
        for t in others:
            t.start()
        _wait_serial(cfg, start + 4)            # all three changes are in memory
    finally:
        writer.gate.set()
    lead.join(20)
    for t in others:
        t.join(20)
    assert not lead.is_alive() and not any(t.is_alive() for t in others)
    assert not first_err                        # write #1 succeeded
    assert writer.calls == 2                    # write #2 carried all three changes
    assert len(errors_seen) == 3
    assert all(isinstance(e, errors.ConfigurationError) and "No space left" in str(e)
               for e in errors_seen)
    assert ConfigWriter(path).get_serial_no() == start + 1    # disk: only write #1
    # memory went back to the disk: none of the three failed nodes is there
    assert cfg.get_serial_no() == start + 1
    assert cfg.dump() == open(path, "rb").read()
    assert all(cfg.get_node_info_by_name(f"late{i}.example.com") is None for i in range(3))
    # and the writer carries on: the next change is written
    _add_node(cfg, "after.example.com", "127.0.9.99")
    assert ConfigWriter(path).get_node_info_by_name("after.example.com") is not None
    assert cfg.get_serial_no() == start + 2


def test_on_change_error_reaches_the_caller_but_writer_stays_usable(path) -> None:
    calls: list[int] = []

    def on_change(raw: bytes, serial: int) -> None:
        calls.append(serial)
        if len(calls) == 1:
            raise errors.ConfigurationError("hook broke")

    cfg = ConfigWriter.initialize(path, _initial(), on_change=on_change)
    with pytest.raises(errors.ConfigurationError, match="hook broke"):
        _add_node(cfg, "a.example.com", "127.0.8.1")
    assert ConfigWriter(path).get_serial_no() == cfg.get_serial_no()   # written anyway
    _add_node(cfg, "b.example.com", "127.0.8.2")
    assert calls == [cfg.get_serial_no() - 1, cfg.get_serial_no()]


def test_batch_with_group_commit_waits_once(path) -> None:
    writer = CountingWrite()
    cfg = ConfigWriter.initialize(path, _initial(), write_fn=writer)
    with cfg.batch():
        for i in range(5):
            _add_node(cfg, f"b{i}.example.com", f"127.0.7.{i}")
        assert writer.calls == 0
    assert writer.calls == 1
    assert cfg.last_saved_serial() == cfg.get_serial_no()
    assert ConfigWriter(path).get_serial_no() == cfg.get_serial_no()


def test_flush_writes_the_same_objects_as_a_new_serial(path, cfg) -> None:
    seen: list[int] = []
    cfg = ConfigWriter(path, clock=Clock(), on_change=lambda data, serial: seen.append(serial))
    node = cfg.get_node_info("n1")
    node.offline = True             # an edit in place, never saved: not written
    before = serializer.loads(open(path, "rb").read())
    serial = cfg.flush()
    after = serializer.loads(open(path, "rb").read())
    assert serial == after["serial_no"] == before["serial_no"] + 1 == cfg.get_serial_no()
    assert after["nodes"] == before["nodes"] and after["cluster"] == before["cluster"]
    assert seen == [serial]
