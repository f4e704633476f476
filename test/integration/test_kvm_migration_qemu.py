"""kvm migration on real qemu: two node roots on one host, over loopback.

Two :class:`KvmHypervisor` objects with their own roots act as source and
target node, and the steps the master drives (ganeti/hypervisor/base.py,
"Migration") are called one by one.  The guest is test/fakes/tickguest.py:
it fills part of its memory, keeps dirtying some and prints a numbered tick
every second, so "the guest keeps running" is checked as: the ticks of the
source's and the target's serial logs together count up without a gap or a
restart.  TCG is forced (fast for this guest where KVM is nested).
"""

from __future__ import annotations

import os
import random
import signal
import socket

import guest_helpers
import pytest

from fakes import tickguest
from ganeti import constants, errors, parameters, pathutils
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import cmdline, migration
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

NAME = "mig1.example.com"
ADDRESS = "127.0.0.1"


def _wait(predicate, what: str, timeout: float = 90.0):
    return guest_helpers.wait_for(predicate, what, timeout, poll=0.1)


def _free_port() -> int:
    """A free port below the kernel's ephemeral range (32768 and up): no
    outgoing connection of another process takes it meanwhile."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind((ADDRESS, port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 20000-31999")


def _spec(port: int, memory: int = 64, **hvp) -> base.InstanceSpec:
    params = parameters.defaults("hv", constants.HT_KVM)
    params.update(migration_port=port, **hvp)
    return base.InstanceSpec(name=NAME, uuid="6f1c3a52-9d55-4f0b-8c44-1b2a3c4d5e6f",
                             memory=memory, vcpus=1, hvparams=params,
                             nics=(base.NicSpec(mac="aa:00:00:00:00:02", link="no-such-br"),))


def _log(hv: KvmHypervisor) -> bytes:
    try:
        with open(hv.serial_log(NAME), "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return b""


@pytest.fixture
def nodes(tmp_path):
    made = []
    for node in ("src", "dst"):
        paths = pathutils.Paths(root=str(tmp_path / (f"{node}-root-" + "y" * 70)))
        made.append(KvmHypervisor(paths, kvm_device=str(tmp_path / "no-kvm")))
    yield made[0], made[1], tmp_path
    guest_helpers.stop_all(made)


def _boot(src: KvmHypervisor, tmp, spec: base.InstanceSpec, fill_mib: int,
          dirty_kib: int = 64) -> str:
    disk = tickguest.disk_image(str(tmp / "shared-disk0"), fill_mib=fill_mib,
                                dirty_kib=dirty_kib)
    src.start_instance(spec, [disk])
    _wait(lambda: len(tickguest.ticks(_log(src))) >= 2, "two ticks on the source")
    return disk


def test_a_live_migration_with_kvm_copies_while_the_guest_runs(tmp_path):
    """Under KVM (the kernel tracks the guest's writes) a live migration is
    live: the source still runs while qemu copies; the target goes on counting."""
    hvs = [KvmHypervisor(pathutils.Paths(root=str(tmp_path / f"{n}-root"))) for n in ("s", "d")]
    src, dst = hvs
    if src.acceleration() != cmdline.ACCEL_KVM:
        pytest.skip(f"no usable {src.kvm_device} here: TCG copies paused (doc/kvm.md)")
    spec = _spec(_free_port(), migration_bandwidth=8)
    try:
        disk = _boot(src, tmp_path, spec, fill_mib=32)
        assert src.get_instance_info(NAME)["accel"] == cmdline.ACCEL_KVM
        info = src.migration_info(NAME)
        accepted = dst.accept_instance(spec, info, ADDRESS, [disk])
        src.migrate_instance(NAME, "dst", ADDRESS, True, accepted)
        # 32 MiB at 8 MiB/s: seconds of copying, with the guest running meanwhile
        assert src.get_migration_status(NAME)["status"] in migration.IN_PROGRESS
        assert src.qmp_command(NAME, "query-status")["status"] == "running"
        seen = len(tickguest.ticks(_log(src)))
        _wait(lambda: len(tickguest.ticks(_log(src))) > seen, "ticks during the copy")
        status = _until_done(src)
        assert status["status"] == base.MIGRATION_STATUS_COMPLETED, status
        assert not status.get("paused_copy")
        before = tickguest.ticks(_log(src))
        dst.finalize_migration_dst(spec, info, True)
        src.finalize_migration_src(NAME, True, True)
        _wait(lambda: len(tickguest.ticks(_log(dst))) >= 2, "ticks on the target")
        assert tickguest.ticks(_log(dst))[0] > before[-1] - 2
    finally:
        guest_helpers.stop_all(hvs)


def _until_done(src: KvmHypervisor) -> dict:
    return _wait(lambda: (s := src.get_migration_status(NAME))["status"]
                 not in migration.IN_PROGRESS and s, "the end of the migration", 120)


@pytest.mark.parametrize("live", [True, False], ids=["live", "non-live"])
def test_migration_moves_the_running_guest(nodes, live):
    src, dst, tmp = nodes
    spec = _spec(_free_port())
    disk = _boot(src, tmp, spec, fill_mib=32)
    info = src.migration_info(NAME)
    accepted = dst.accept_instance(spec, info, ADDRESS, [disk])
    assert accepted == {"address": ADDRESS, "port": spec.hvparams["migration_port"]}
    assert dst.get_instance_info(NAME)["state"] == base.HV_STATE_INCOMING
    # a node-daemon restart on the target knows the qemu is an incoming one
    assert KvmHypervisor(dst.paths).migration_state(NAME)["port"] == accepted["port"]
    with pytest.raises(errors.HypervisorError, match="migrate --cleanup"):
        dst.accept_instance(spec, info, ADDRESS, [disk])

    src.migrate_instance(NAME, "dst", ADDRESS, live, accepted)
    if not live:   # paused before the copy (or already sent)
        assert src.qmp_command(NAME, "query-status")["status"] != "running"
    status = _until_done(src)
    assert status["status"] == base.MIGRATION_STATUS_COMPLETED, status
    assert status["ram"]["transferred"] >= 32 * 1024 * 1024    # the filled memory went
    assert status["ram"]["total"] >= 64 * 1024 * 1024
    assert isinstance(status["downtime_ms"], int) and status["total_time_ms"] > 0
    assert status.get("paused_copy", False) is live   # TCG here: a live one is copied paused
    before = tickguest.ticks(_log(src))    # the source's guest has stopped for good

    # the source's guest is not an incoming one: a failed "dst" finalize keeps it
    with pytest.raises(errors.HypervisorError, match="not an incoming migration"):
        src.finalize_migration_dst(spec, info, False)
    dst.finalize_migration_dst(spec, info, True)
    src.finalize_migration_src(NAME, True, live)
    assert src.list_instances() == [] and src._pid(NAME) is None
    assert dst.get_instance_info(NAME)["state"] == base.HV_STATE_RUNNING
    assert dst.migration_state(NAME) is None
    _wait(lambda: len(tickguest.ticks(_log(dst))) >= 2, "ticks on the target")
    after = tickguest.ticks(_log(dst))
    # one guest: the target goes on counting where the source stopped
    assert after[0] > 1
    both = before + after
    assert both == list(range(both[0], both[0] + len(both)))


@pytest.mark.parametrize("live", [True, False], ids=["live", "non-live"])
def test_killed_target_leaves_the_source_running(nodes, live):
    src, dst, tmp = nodes
    # 1 MiB/s for 48 MiB of filled memory: the transfer is still going when killed
    spec = _spec(_free_port(), migration_bandwidth=1)
    disk = _boot(src, tmp, spec, fill_mib=48)
    info = src.migration_info(NAME)
    accepted = dst.accept_instance(spec, info, ADDRESS, [disk])
    src.migrate_instance(NAME, "dst", ADDRESS, live, accepted)
    _wait(lambda: src.get_migration_status(NAME).get("ram", {}).get("transferred", 0)
          > 1024 * 1024, "the transfer under way")
    os.kill(dst.get_instance_info(NAME)["pid"], signal.SIGKILL)
    status = _until_done(src)
    assert status["status"] == base.MIGRATION_STATUS_FAILED and status["info"]
    assert dst.get_instance_info(NAME)["state"] == base.HV_STATE_CRASHED

    dst.finalize_migration_dst(spec, info, False)
    src.finalize_migration_src(NAME, False, live)
    assert dst.list_instances() == [] and not os.path.exists(dst.instance_dir(NAME))
    assert src.get_instance_info(NAME)["state"] == base.HV_STATE_RUNNING
    assert src.migration_state(NAME) is None
    seen = len(tickguest.ticks(_log(src)))
    _wait(lambda: len(tickguest.ticks(_log(src))) > seen, "the source ticking again")


def test_abandoned_transfer_is_cancelled_and_resumed(nodes):
    src, dst, tmp = nodes
    spec = _spec(_free_port(), migration_bandwidth=1)
    disk = _boot(src, tmp, spec, fill_mib=48)
    info = src.migration_info(NAME)
    accepted = dst.accept_instance(spec, info, ADDRESS, [disk])
    src.migrate_instance(NAME, "dst", ADDRESS, False, accepted)
    assert src.get_migration_status(NAME)["status"] in migration.IN_PROGRESS
    # the master gives up (e.g. a timeout): the source cancels and runs again
    src.finalize_migration_src(NAME, False, False)
    assert src.get_migration_status(NAME)["status"] == base.MIGRATION_STATUS_CANCELLED
    assert src.qmp_command(NAME, "query-status")["status"] == "running"
    dst.finalize_migration_dst(spec, info, False)
    assert dst.list_instances() == []


def _free_range(count: int) -> list[socket.socket]:
    """Listening sockets on ``count`` consecutive free ports (bounded tries)."""
    for _ in range(50):
        first = _free_port()
        held = []
        for port in range(first, first + count):
            sock = socket.socket()
            try:
                sock.bind((ADDRESS, port))
            except OSError:
                sock.close()
                break
            sock.listen()
            held.append(sock)
        if len(held) == count:
            return held
        for sock in held:
            sock.close()
    raise AssertionError(f"no {count} consecutive free ports")


def test_ports_in_use_are_skipped_and_a_full_range_refused(nodes):
    src, dst, tmp = nodes
    dst = KvmHypervisor(dst.paths, kvm_device=dst.kvm_device, migration_ports=3)
    held = _free_range(3)
    first = held[0].getsockname()[1]
    spec = _spec(first)
    try:
        disk = _boot(src, tmp, spec, fill_mib=1)
        info = src.migration_info(NAME)
        held.pop().close()
        # the first two are taken: the target listens on the third
        assert dst.accept_instance(spec, info, ADDRESS, [disk])["port"] == first + 2
        dst.finalize_migration_dst(spec, info, False)
        held += _bound(first + 2)
        with pytest.raises(errors.HypervisorError,
                           match=f"No free migration port.*{first}-{first + 2}"):
            dst.accept_instance(spec, info, ADDRESS, [disk])
    finally:
        for sock in held:
            sock.close()
    # the refused target left nothing behind
    assert dst.list_instances() == [] and not os.path.exists(dst.instance_dir(NAME))
    assert src.get_instance_info(NAME)["state"] == base.HV_STATE_RUNNING


def _bound(port: int) -> list[socket.socket]:
    """A listening socket on ``port`` (free again once the killed qemu exited)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((ADDRESS, port))
    sock.listen()
    return [sock]
