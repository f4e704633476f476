"""gnt-instance on a 1-node virtual cluster made with ``--hypervisor kvm`` (real qemu).

The instance is a ``file`` instance of the shipped ``tinyos`` OS; its disk
is then overwritten with a boot-sector guest (test/fakes/bootsector.py) so
that the guest prints a console line, and later powers itself off.  Covers
add, console command, shutdown, startup, a node-daemon restart finding the
running qemu again, a killed qemu (ERROR_down), a guest power-off (USER_down)
and remove.  Skips only when qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import glob
import os
import shlex
import signal

import guest_helpers
import pytest
from instance_helpers import NOCHECK, status_of
from vcluster_harness import VirtualCluster

from fakes import bootsector
from ganeti import constants, daemonctl
from ganeti.hypervisor.kvm import consoles
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

NODE = "node1.vcluster"
INST = "kvm1.example.com"


def _wait(predicate, what: str, timeout: float = 90.0):
    return guest_helpers.wait_for(predicate, what, timeout, poll=0.2)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vkvm"), nodes=1, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def _hv(vc) -> KvmHypervisor:
    return KvmHypervisor(vc.paths(NODE))


def _pid(vc) -> int | None:
    return _hv(vc)._pid(INST)


def _disk(vc) -> str:
    (path,) = glob.glob(os.path.join(vc.paths(NODE).file_storage_dir, INST, "*disk0"))
    return path


def _write_guest(vc, poweroff: bool) -> None:
    with open(_disk(vc), "r+b") as fh:
        fh.write(bootsector.boot_sector(poweroff=poweroff))


def _console_lines(vc) -> int:
    try:
        with open(_hv(vc).serial_log(INST), "rb") as fh:
            return fh.read().count(bootsector.MESSAGE)
    except FileNotFoundError:
        return 0


def test_add_runs_a_qemu(vc):
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-o", "tinyos",
          "-n", NODE, *NOCHECK, INST)
    assert status_of(vc, INST) == "running"
    assert vc.ok("gnt-instance", "list", "--no-headers", "-o", "hypervisor,oper_vcpus",
                 INST).split() == ["kvm", "1"]
    pid = _pid(vc)
    assert pid is not None
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        words = fh.read().split(b"\0")
    assert os.fsencode(_disk(vc)) in b" ".join(words)
    out = vc.ok("gnt-instance", "console", "--show-cmd", INST)
    assert shlex.join(consoles.serial_command(_hv(vc).serial_socket(INST))) in out
    assert os.path.exists(_hv(vc).serial_socket(INST))


def test_shutdown_then_start_a_booting_guest(vc):
    vc.ok("gnt-instance", "shutdown", "--timeout", "1", INST)
    assert status_of(vc, INST) == "ADMIN_down"
    assert _pid(vc) is None
    _write_guest(vc, poweroff=False)
    vc.ok("gnt-instance", "startup", INST)
    _wait(lambda: _console_lines(vc) >= 1, "the guest's console line")
    assert status_of(vc, INST) == "running"


def test_node_daemon_restart_finds_the_instance(vc):
    pid = _pid(vc)
    daemonctl.stop_daemon(vc.paths(NODE), constants.NODED, timeout=10.0)
    vcluster.start(vc.cluster, NODE)
    assert _pid(vc) == pid
    _wait(lambda: vc.run("gnt-instance", "list", "--no-headers", "-o", "status",
                         INST).stdout.strip() == "running", "the instance listed again")


def test_killed_qemu_is_error_down(vc):
    os.kill(_pid(vc), signal.SIGKILL)
    _wait(lambda: _pid(vc) is None, "qemu gone")
    assert status_of(vc, INST) == "ERROR_down"


def test_guest_poweroff_is_user_down(vc):
    _write_guest(vc, poweroff=True)
    vc.ok("gnt-instance", "startup", "--force", INST)
    _wait(lambda: status_of(vc, INST) == "USER_down", "USER_down")


def test_remove_stops_qemu_and_cleans_up(vc):
    vc.ok("gnt-instance", "remove", "-f", INST)
    assert _pid(vc) is None
    assert not os.path.exists(_hv(vc).instance_dir(INST))
    assert _hv(vc).list_instances() == []
