"""``gnt-instance migrate --cleanup`` and a kvm instance's UEFI/TPM state (real qemu, OVMF, swtpm).

A ``diskless`` instance with ``firmware=uefi`` and ``tpm=tpm2`` and no
kernel (OVMF finds nothing to boot and waits: no guest needed, the state
files are what counts) on a 2-node kvm virtual cluster.  Each migration is
held mid-way by stopping the target's qemu (SIGSTOP: the transfer stalls
whatever the guest's memory), so the state was already copied to the
target.  First the target's qemu is killed: the job fails, the instance
keeps running on the source, and ``--cleanup`` ("nothing to clean up")
removes the target's copy while the source keeps its own.  Then both node
daemons go away under a held migration: the job fails, the daemons come
back, the transfer is let finish on the qemu level, and ``--cleanup``
finishes the migration: the target keeps the state and the source's copy
goes (doc/kvm.md, "UEFI and TPM").  ``gnt-cluster verify`` warns about the
target's stale copy before the first cleanup, and about a state directory
of an instance that does not exist, and no more after.
Skips only when qemu-system-x86_64 cannot run or OVMF/swtpm are missing.
"""

from __future__ import annotations

import os
import re
import signal

import pytest
from failover_helpers import submit
from guest_helpers import wait_for
from instance_helpers import NOCHECK, rows
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

from ganeti import constants, daemonctl
from ganeti.hypervisor.kvm import firmware
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import vcluster
from test.integration import host_helpers

_MISSING = host_helpers.uefi_reason()
pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(_MISSING), reason=_MISSING or "qemu, OVMF and swtpm run")]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "uefic1.example.com"
#: a file of our own in the state directory: it travels with the state (firmware.pack)
MARKER = "marker"
#: the state directory of an instance that does not exist
GONE = "0badc0de-0000-4000-8000-000000000000"
_ORPHAN = re.compile(r"- WARNING:ENODEORPHANFIRMWARE:node:([^:]+):orphan UEFI/TPM state (.*)$")


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vuefic"), nodes=2, use_ssh=False,
                        hypervisor=constants.HT_KVM,
                        masterd_args=SHORT_RPC_TIMEOUTS) as cluster:
        yield cluster


def _hv(vc, node: str) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(node))


def _state_dir(vc, node: str) -> str:
    (uuid,) = rows(vc, "uuid", INST)[0]
    return firmware.state_dir(vc.paths(node).kvm_firmware_dir, uuid)


def _has_state(vc, node: str) -> bool:
    sdir = _state_dir(vc, node)
    return os.path.isfile(os.path.join(sdir, firmware.VARS_FILE)) and \
        os.path.isdir(os.path.join(sdir, firmware.TPM_STATE_DIR))


def _marker(vc, node: str) -> str | None:
    try:
        with open(os.path.join(_state_dir(vc, node), MARKER)) as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _state_key(vc) -> str:
    return os.path.basename(_state_dir(vc, N1))


def _orphans(vc) -> list[tuple[str, str]]:
    """``(node, what)`` of each orphaned UEFI/TPM state ``gnt-cluster verify`` warns about."""
    res = vc.run("gnt-cluster", "verify", "--error-codes")
    found = []
    for line in (res.stdout + res.stderr).splitlines():
        if ":ENODEORPHANFIRMWARE:" in line:
            match = _ORPHAN.search(line)
            assert match, line
            found.append((match.group(1), match.group(2)))
    return sorted(found)


def _job_status(vc, job: int) -> str:
    vc.run("gnt-job", "wait", str(job), timeout=180)
    return vc.ok("gnt-job", "list", "--no-headers", "-o", "status", str(job)).strip()


def _held_migration(vc, src: str, dst: str, *extra: str) -> tuple[int, int]:
    """Submit a migration ``src`` -> ``dst`` (``extra`` options) and stop the target's qemu
    as soon as bytes flow (the transfer stalls there); ``(job id, target qemu pid)``."""
    job, out = submit(vc, src, "gnt-instance", "migrate", "-f", *extra, "-n", dst, INST)
    assert job is not None, out
    wait_for(lambda: _hv(vc, dst).migration_state(INST) is not None
             and _hv(vc, dst)._pid(INST) is not None
             and _hv(vc, src).qmp_command(INST, "query-migrate").get("status") == "active",
             "the transfer under way", 60, poll=0.05)
    pid = _hv(vc, dst)._pid(INST)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    return job, pid


def test_add_a_uefi_instance_with_a_tpm(vc):
    vc.ok("gnt-instance", "add", "-t", "diskless", "-o", "tinyos", "--no-install",
          "-B", "maxmem=128,minmem=128", "-n", N1, *NOCHECK,
          "-H", "kvm:firmware=uefi,machine_version=q35,tpm=tpm2,migration_bandwidth=1", INST)
    assert rows(vc, "pnode,status", INST) == [[N1, "running"]]
    assert _has_state(vc, N1) and not os.path.exists(_state_dir(vc, N2))
    with open(os.path.join(_state_dir(vc, N1), MARKER), "w") as fh:
        fh.write("from node1\n")


def test_cleanup_after_a_failed_migration_removes_the_targets_copy(vc):
    job, pid = _held_migration(vc, N1, N2)
    # the state went to the target before its qemu started
    assert _has_state(vc, N2) and _marker(vc, N2) == "from node1\n"
    os.kill(pid, signal.SIGKILL)
    assert _job_status(vc, job) == "error"
    assert rows(vc, "pnode,status", INST) == [[N1, "running"]]
    wait_for(lambda: not firmware.users(_state_dir(vc, N2)), "the target's swtpm gone", 30)
    before = _marker(vc, N1)
    # the target's stale copy, and one of an instance that does not exist, are orphans
    os.makedirs(os.path.join(vc.paths(N1).kvm_firmware_dir, GONE))
    assert _orphans(vc) == [
        (N1, f"kvm-firmware/{GONE} (no such instance)"),
        (N2, f"kvm-firmware/{_state_key(vc)} (instance {INST} is not on this node)")]
    out = vc.ok("gnt-instance", "migrate", "-f", "--cleanup", "-n", N2, INST)
    assert "nothing to clean up" in out, out
    assert not os.path.exists(_state_dir(vc, N2))
    os.rmdir(os.path.join(vc.paths(N1).kvm_firmware_dir, GONE))
    assert _orphans(vc) == []
    # the node it runs on keeps its state, its qemu and swtpm still use it
    assert _has_state(vc, N1) and _marker(vc, N1) == before == "from node1\n"
    assert firmware.users(_state_dir(vc, N1))


def test_cleanup_that_finishes_a_migration_removes_the_sources_copy(vc):
    job, pid = _held_migration(vc, N1, N2, "--non-live")
    # the job loses both nodes mid-way: the target's first, since the job polls only
    # the source; a target node daemon still up when the source's went away would be
    # asked to give up the incoming instance, and kill the qemu held here
    for node in (N2, N1):
        daemonctl.stop_daemon(vc.paths(node), constants.NODED, timeout=10.0)
    try:
        assert _job_status(vc, job) == "error"
    finally:
        for node in (N1, N2):
            vcluster.start(vc.cluster, node)
    # let the qemus finish the transfer on their own: the source fully sent, the target paused
    os.kill(pid, signal.SIGCONT)
    _hv(vc, N1).qmp_command(INST, "migrate-set-parameters", **{"max-bandwidth": 1 << 30})
    wait_for(lambda: _hv(vc, N1).qmp_command(INST, "query-status")["status"] == "postmigrate",
             "the memory sent", 120)
    assert rows(vc, "pnode", INST) == [[N1]]
    assert _has_state(vc, N1) and _has_state(vc, N2)
    out = wait_for(lambda: (r := vc.run("gnt-instance", "migrate", "-f", "--cleanup", "-n", N2,
                                        INST)).returncode == 0 and r.stdout,
                   "the cleanup (node daemons back)", 60)
    assert "finishing the migration" in out, out
    assert rows(vc, "pnode,status", INST) == [[N2, "running"]]
    assert _hv(vc, N2).qmp_command(INST, "query-status")["status"] == "running"
    # the node it runs on now keeps the state it was given, the node it left none
    assert _has_state(vc, N2) and _marker(vc, N2) == "from node1\n"
    assert firmware.users(_state_dir(vc, N2))
    assert not os.path.exists(_state_dir(vc, N1))


def test_remove(vc):
    states = [_state_dir(vc, N1), _state_dir(vc, N2)]
    vc.ok("gnt-instance", "remove", "-f", "--shutdown-timeout", "0", INST)
    for state in states:
        assert not os.path.exists(state)
