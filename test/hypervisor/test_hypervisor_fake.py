"""Tests for ganeti.hypervisor (registry, base checks, the fake)."""

from __future__ import annotations

import os

import pytest

from ganeti import constants, errors, hypervisor, pathutils, serializer
from ganeti.hypervisor import base
from ganeti.hypervisor.fake import ENV_FAKE_MEMORY, FakeHypervisor
from fakes.clock import FakeClock


Clock = FakeClock


def make_hv(root, memory: int = 4096, clock=None) -> FakeHypervisor:
    paths = pathutils.Paths(root=str(root))
    return FakeHypervisor(paths, node_memory=memory, dom0_memory=512,
                          cpu_total=4, clock=clock or Clock())


def spec(name: str = "inst1.example.com", memory: int = 512, **kw) -> base.InstanceSpec:
    return base.InstanceSpec(name=name, uuid=f"uuid-{name}", memory=memory, vcpus=2,
                             hvparams={"migration_mode": "live"}, beparams={"maxmem": memory},
                             nics=(base.NicSpec(mac="aa:00:00:11:22:33", link="br0"),), **kw)


def test_registry_builds_fake(tmp_path):
    hv = hypervisor.get_hypervisor(constants.HT_FAKE, pathutils.Paths(root=str(tmp_path)))
    assert isinstance(hv, FakeHypervisor)


def test_registry_refuses_unknown(tmp_path):
    with pytest.raises(errors.HypervisorError, match="lxc"):
        hypervisor.get_hypervisor(constants.HT_LXC, pathutils.Paths(root=str(tmp_path)))


def test_check_parameter_syntax():
    FakeHypervisor.check_parameter_syntax({"migration_mode": "non-live"})
    with pytest.raises(errors.ParameterError, match="migration_mode"):
        FakeHypervisor.check_parameter_syntax({"migration_mode": "fast"})
    with pytest.raises(errors.ParameterError, match="kernel_path"):
        FakeHypervisor.check_parameter_syntax({"kernel_path": "/boot/vmlinuz"})


def test_validate_parameters_raises_hypervisor_error(tmp_path):
    with pytest.raises(errors.HypervisorError, match="migration_mode"):
        make_hv(tmp_path).validate_parameters({"migration_mode": 3})


def test_start_info_stop(tmp_path):
    clock = Clock()
    hv = make_hv(tmp_path, clock=clock)
    disk = tmp_path / "disk0"
    disk.write_bytes(b"")
    hv.start_instance(spec(), [str(disk)])
    clock.now += 42
    info = hv.get_instance_info("inst1.example.com")
    assert info == {"name": "inst1.example.com", "memory": 512, "vcpus": 2,
                    "state": base.HV_STATE_RUNNING, "time": 42}
    record = hv.get_instance_state("inst1.example.com")
    assert record["disks"] == [str(disk)]
    assert record["nics"][0]["mac"] == "aa:00:00:11:22:33"
    assert hv.list_instances() == ["inst1.example.com"]
    hv.stop_instance("inst1.example.com", timeout=5)
    assert hv.list_instances() == []
    assert hv.get_instance_info("inst1.example.com") is None


def test_state_survives_new_object(tmp_path):
    make_hv(tmp_path).start_instance(spec(), [])
    again = make_hv(tmp_path)  # a restarted node daemon
    assert again.list_instances() == ["inst1.example.com"]
    assert again.get_all_instances_info()["inst1.example.com"]["state"] == "running"
    path = os.path.join(again.state_dir, "inst1.example.com.json")
    assert serializer.loads(open(path).read())["hvparams"] == {"migration_mode": "live"}


def test_start_refuses_duplicate(tmp_path):
    hv = make_hv(tmp_path)
    hv.start_instance(spec(), [])
    with pytest.raises(errors.HypervisorError, match="already running"):
        hv.start_instance(spec(), [])


def test_start_refuses_missing_disk(tmp_path):
    hv = make_hv(tmp_path)
    with pytest.raises(errors.HypervisorError, match="does not exist"):
        hv.start_instance(spec(), [str(tmp_path / "nope")])
    assert hv.list_instances() == []


def test_memory_refusal(tmp_path):
    hv = make_hv(tmp_path, memory=2048)  # 1536 MiB usable after dom0
    hv.start_instance(spec("a", memory=1024), [])
    with pytest.raises(errors.HypervisorError, match="Not enough memory"):
        hv.start_instance(spec("b", memory=1024), [])
    assert hv.list_instances() == ["a"]
    assert hv.get_node_info()["memory_free"] == 512
    hv.start_instance(spec("b", memory=512), [])
    assert hv.get_node_info()["memory_free"] == 0


def test_node_memory_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_FAKE_MEMORY, "3000")
    hv = FakeHypervisor(pathutils.Paths(root=str(tmp_path)))
    info = hv.get_node_info()
    assert info["memory_total"] == 3000
    assert set(info) >= {"memory_total", "memory_free", "memory_dom0", "cpu_total",
                         "cpu_nodes", "cpu_sockets"}


def test_stop_unknown_instance(tmp_path):
    with pytest.raises(errors.HypervisorError, match="not running"):
        make_hv(tmp_path).stop_instance("ghost")


def test_reboot_resets_uptime(tmp_path):
    clock = Clock()
    hv = make_hv(tmp_path, clock=clock)
    hv.start_instance(spec(), [])
    clock.now += 100
    hv.reboot_instance("inst1.example.com")
    clock.now += 1
    assert hv.get_instance_info("inst1.example.com")["time"] == 1


def test_user_shutdown_and_restart(tmp_path):
    hv = make_hv(tmp_path)
    hv.start_instance(spec(), [])
    hv.simulate_user_shutdown("inst1.example.com")
    assert hv.get_instance_info("inst1.example.com")["state"] == base.HV_STATE_SHUTDOWN
    with pytest.raises(errors.HypervisorError, match="Cannot reboot"):
        hv.reboot_instance("inst1.example.com")
    hv.start_instance(spec(), [])  # a stopped guest can be started again
    assert hv.get_instance_info("inst1.example.com")["state"] == base.HV_STATE_RUNNING
    hv.simulate_crash("inst1.example.com")
    assert hv.get_instance_info("inst1.example.com")["state"] == base.HV_STATE_CRASHED


def test_balloon(tmp_path):
    hv = make_hv(tmp_path, memory=2048)
    hv.start_instance(spec(memory=512), [])
    hv.balloon_instance_memory("inst1.example.com", 1024)
    assert hv.get_instance_info("inst1.example.com")["memory"] == 1024
    with pytest.raises(errors.HypervisorError, match="Not enough memory"):
        hv.balloon_instance_memory("inst1.example.com", 4096)


def test_console_and_verify(tmp_path):
    hv = make_hv(tmp_path)
    cons = hv.get_console(spec(), "node1")
    assert cons["kind"] == base.CONS_MESSAGE
    assert cons["instance"] == "inst1.example.com"
    assert hv.verify() is None


def _migrate(src, dst, name, success=True):
    info = src.migration_info(name)
    info = serializer.loads(serializer.dumps(info))  # as RPC would carry it
    dst.accept_instance(spec(name), info, "192.0.2.2")
    assert dst.get_instance_info(name)["state"] == base.HV_STATE_INCOMING
    src.migrate_instance(name, "node2", "192.0.2.2", True)
    assert src.get_instance_info(name)["state"] == base.HV_STATE_MIGRATING
    status = src.get_migration_status(name)
    assert status["status"] == base.MIGRATION_STATUS_COMPLETED
    assert status["transferred_ram"] == status["total_ram"] == 512
    dst.finalize_migration_dst(spec(name), info, success)
    src.finalize_migration_src(name, success, True)


def test_migration_moves_state(tmp_path):
    src, dst = make_hv(tmp_path / "node1"), make_hv(tmp_path / "node2")
    src.start_instance(spec(), [])
    _migrate(src, dst, "inst1.example.com")
    assert src.list_instances() == []
    assert dst.list_instances() == ["inst1.example.com"]
    assert dst.get_instance_info("inst1.example.com")["state"] == base.HV_STATE_RUNNING
    assert dst.get_instance_state("inst1.example.com")["migration"] is None


def test_failed_migration_keeps_source(tmp_path):
    src, dst = make_hv(tmp_path / "node1"), make_hv(tmp_path / "node2")
    src.start_instance(spec(), [])
    _migrate(src, dst, "inst1.example.com", success=False)
    assert dst.list_instances() == []
    assert src.get_instance_info("inst1.example.com")["state"] == base.HV_STATE_RUNNING


def _throttled(tmp_path, bandwidth=128):
    clock = Clock(0.0)
    src, dst = make_hv(tmp_path / "node1", clock=clock), make_hv(tmp_path / "node2", clock=clock)
    name = "inst1.example.com"
    sp = base.InstanceSpec(name=name, uuid="u1", memory=512, vcpus=1,
                           hvparams={"migration_bandwidth": bandwidth}, beparams={})
    src.start_instance(sp, [])
    info = serializer.loads(serializer.dumps(src.migration_info(name)))
    dst.accept_instance(sp, info, "192.0.2.2")
    src.migrate_instance(name, "node2", "192.0.2.2", True)
    return clock, src, name


def test_throttled_migration_reports_progress_and_a_runtime_job(tmp_path):
    clock, src, name = _throttled(tmp_path)
    clock.advance(1)
    status = src.get_migration_status(name)
    assert status["status"] == base.MIGRATION_STATUS_ACTIVE
    assert status["ram"] == {"transferred": 128 << 20, "remaining": 384 << 20,
                             "total": 512 << 20}
    assert status["mbps"] == pytest.approx(128 * 1.048576 * 8, abs=0.1)
    jobs = src.get_instance_info(name)["jobs"]
    assert jobs == [{"state": "normal", "info": {
        "jobType": "migration", "cur": 128 << 20, "end": 512 << 20, "bandwidth": 128,
        "rate": float(128 << 20), "eta": 3.0}}]
    assert src.get_all_instances_info()[name]["jobs"] == jobs
    clock.advance(3)
    assert src.get_migration_status(name)["status"] == base.MIGRATION_STATUS_COMPLETED
    assert "jobs" not in src.get_instance_info(name)


def test_simulated_migration_failure(tmp_path):
    clock, src, name = _throttled(tmp_path)
    clock.advance(2)
    src.simulate_migration_failure(name, "link down")
    clock.advance(5)
    status = src.get_migration_status(name)
    assert status["status"] == base.MIGRATION_STATUS_FAILED and status["info"] == "link down"
    assert status["ram"]["transferred"] == 256 << 20
    assert "jobs" not in src.get_instance_info(name)
    src.finalize_migration_src(name, False, True)
    assert src.get_instance_info(name)["state"] == base.HV_STATE_RUNNING
    with pytest.raises(errors.HypervisorError, match="not being migrated"):
        src.simulate_migration_failure(name)


def test_accept_refuses_without_memory(tmp_path):
    src, dst = make_hv(tmp_path / "node1"), make_hv(tmp_path / "node2", memory=768)
    src.start_instance(spec(), [])
    with pytest.raises(errors.HypervisorError, match="Not enough memory"):
        dst.accept_instance(spec(), src.migration_info("inst1.example.com"), "x")
    assert dst.list_instances() == []


def test_migration_info_refuses_stopped(tmp_path):
    hv = make_hv(tmp_path)
    hv.start_instance(spec(), [])
    hv.simulate_user_shutdown("inst1.example.com")
    with pytest.raises(errors.HypervisorError, match="Cannot migrate"):
        hv.migration_info("inst1.example.com")


@pytest.mark.parametrize("name", ["../evil", ".hidden", ""], ids=["dotdot", "dot", "empty"])
def test_bad_instance_names(tmp_path, name):
    with pytest.raises(errors.HypervisorError):
        make_hv(tmp_path).start_instance(spec(name), [])


def test_instance_spec_round_trips_through_serializer():
    s = spec()
    assert serializer.from_data(base.InstanceSpec, serializer.loads(serializer.dumps(s))) == s


def test_powercycle_removes_every_guest_and_records_the_cycle(tmp_path):
    clock = Clock(5000.0)
    hv = make_hv(tmp_path, clock=clock)
    hv.start_instance(spec("a.example.com"), [])
    hv.start_instance(spec("b.example.com"), [])
    assert hv.powercycles() == []
    hv.powercycle_node({})
    assert hv.list_instances() == []
    assert hv.get_node_info()["memory_free"] == make_hv(tmp_path).get_node_info()["memory_free"]
    clock.advance(10)
    hv.powercycle_node({})
    assert hv.powercycles() == [
        {"time": 5000.0, "instances": ["a.example.com", "b.example.com"]},
        {"time": 5010.0, "instances": []}]
    hv.start_instance(spec("a.example.com"), [])   # the record is no guest
    assert hv.list_instances() == ["a.example.com"]


def test_base_hypervisor_refuses_powercycle_by_default(tmp_path):
    class Bare(FakeHypervisor):
        NAME = "bare"
        powercycle_node = base.BaseHypervisor.powercycle_node

    with pytest.raises(errors.HypervisorError, match="bare cannot power-cycle"):
        Bare(pathutils.Paths(root=str(tmp_path))).powercycle_node({})


def _age_state_files(hv: FakeHypervisor, only: str | None = None, seconds: float = 60.0) -> None:
    """Make the state files (or that of ``only``) look old enough to be kept in the cache."""
    for entry in os.listdir(hv.state_dir):
        if entry.endswith(".json") and only in (None, entry[:-5]):
            path = os.path.join(hv.state_dir, entry)
            old = os.stat(path).st_mtime - seconds
            os.utime(path, (old, old))


def test_all_instances_info_reuses_parsed_states_of_unchanged_files(tmp_path, monkeypatch):
    clock = Clock()
    hv = make_hv(tmp_path, clock=clock)
    for idx in range(3):
        hv.start_instance(spec(f"inst{idx}.example.com", memory=256), [])
    fresh = hv.get_all_instances_info()
    assert sorted(fresh) == ["inst0.example.com", "inst1.example.com", "inst2.example.com"]
    cache_file = os.path.join(hv.state_dir, ".states-cache")
    assert serializer.loads(open(cache_file).read())["files"] == {}   # too new to keep
    _age_state_files(hv)
    assert hv.get_all_instances_info() == fresh
    assert len(serializer.loads(open(cache_file).read())["files"]) == 3
    reads: list[str] = []
    real_read = FakeHypervisor._read
    monkeypatch.setattr(FakeHypervisor, "_read",
                        lambda self, name: reads.append(name) or real_read(self, name))
    clock.now += 5
    again = hv.get_all_instances_info()
    assert reads == [] and again == {n: {**i, "time": i["time"] + 5} for n, i in fresh.items()}
    # a file replaced (even with an old time stamp), one removed, one added: those are read
    hv.reboot_instance("inst1.example.com")
    _age_state_files(hv, "inst1.example.com")
    hv.stop_instance("inst2.example.com")
    reads.clear()
    hv.start_instance(spec("inst3.example.com", memory=128), [])   # its memory check reads too
    info = hv.get_all_instances_info()
    assert sorted(set(reads)) == ["inst1.example.com", "inst3.example.com"]
    assert sorted(info) == ["inst0.example.com", "inst1.example.com", "inst3.example.com"]
    assert info["inst1.example.com"]["time"] == 0.0 and info["inst3.example.com"]["memory"] == 128
    assert info == {s["name"]: hv._info(s) for s in hv._all_states()}
    # a corrupt cache is rebuilt
    with open(cache_file, "w") as fh:
        fh.write("{not json")
    assert hv.get_all_instances_info() == info
    assert serializer.loads(open(cache_file).read())["version"] == 1


def _five_cached(tmp_path, monkeypatch) -> tuple[FakeHypervisor, list[str]]:
    """Five running instances, all in the state cache; the names of the
    state files read from then on are recorded in the list."""
    hv = make_hv(tmp_path, memory=4096)
    for idx in range(5):
        hv.start_instance(spec(f"inst{idx}.example.com", memory=256), [])
    _age_state_files(hv)
    hv.get_all_instances_info()                     # the cache now holds the five
    reads: list[str] = []
    real_read = FakeHypervisor._read
    monkeypatch.setattr(FakeHypervisor, "_read",
                        lambda self, name: reads.append(name) or real_read(self, name))
    return hv, reads


def test_the_memory_check_of_a_start_does_not_read_every_state_file(tmp_path, monkeypatch):
    """Starting one more instance reads its own file only, not every running one's
    (it was O(N) per start, so starting N instances cost O(N^2))."""
    hv, reads = _five_cached(tmp_path, monkeypatch)
    hv.start_instance(spec("inst5.example.com", memory=256), [])
    assert reads == ["inst5.example.com"]
    with pytest.raises(errors.HypervisorError, match="available 2048 MiB"):
        hv.start_instance(spec("big.example.com", memory=4096), [])   # still counted right


def test_listing_and_stopping_do_not_read_every_state_file(tmp_path, monkeypatch):
    """A shutdown asks for the instance list: that list reads only the files
    not in the cache (stopping N instances cost O(N^2) when it read them all)."""
    hv, reads = _five_cached(tmp_path, monkeypatch)
    assert sorted(hv.list_instances()) == [f"inst{i}.example.com" for i in range(5)]
    assert reads == []
    hv.stop_instance("inst3.example.com")
    assert reads == ["inst3.example.com"]
    assert "inst3.example.com" not in hv.list_instances()


def test_the_memory_check_needs_only_the_small_memory_cache(tmp_path, monkeypatch):
    """A start's memory check parses ``.memory-cache`` (name and memory per
    file), not the whole states of every instance (O(N) parsing per start)."""
    hv, reads = _five_cached(tmp_path, monkeypatch)
    memory_cache = os.path.join(hv.state_dir, ".memory-cache")
    assert sorted(serializer.loads(open(memory_cache).read())["files"]) == [
        f"inst{i}.example.com.json" for i in range(5)]
    os.remove(os.path.join(hv.state_dir, ".states-cache"))
    hv.start_instance(spec("inst5.example.com", memory=256), [])
    assert reads == ["inst5.example.com"]
    with pytest.raises(errors.HypervisorError, match="available 2048 MiB"):
        hv.start_instance(spec("big.example.com", memory=4096), [])
    # a corrupt memory cache is only a cache: the files are read, the count is right
    with open(memory_cache, "w") as fh:
        fh.write("{not json")
    with pytest.raises(errors.HypervisorError, match="available 2048 MiB"):
        hv.start_instance(spec("big.example.com", memory=4096), [])
    assert serializer.loads(open(memory_cache).read())["version"] == 1


def test_list_instances_reads_only_the_directory(tmp_path, monkeypatch):
    hv, reads = _five_cached(tmp_path, monkeypatch)
    parsed: list[int] = []
    real_loads = serializer.loads
    monkeypatch.setattr(serializer, "loads", lambda raw: parsed.append(1) or real_loads(raw))
    assert hv.list_instances() == [f"inst{i}.example.com" for i in range(5)]
    assert reads == [] and parsed == []
