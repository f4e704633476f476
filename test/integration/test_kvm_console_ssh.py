"""``gnt-instance console`` away from the primary: the serial console over the cluster's SSH.

A 2-node kvm virtual cluster *with* SSH servers (tools/harness/sshserver.py,
which runs commands on a pty after ``pty-req``); a tinylinux instance on
node2; ``gnt-instance console`` runs on node1 (the master) on a pty of its
own, reaches node2 over SSH with the cluster key, runs socat there on a
remote pty, and the guest's shell answers a command.  ``--show-cmd`` prints
an OpenSSH command line that does the same (run here with the system's
``ssh`` when there is one); an unknown host key is refused with a clear
message and a non-zero exit code (doc/kvm.md, "Lifecycle").  Skips only when
qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest
from guest_helpers import BOOT_LINE, talk_on_a_pty, wait_for_line
from instance_helpers import NOCHECK
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm import consoles
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from tools.harness import vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1, N2 = "node1.vcluster", "node2.vcluster"
INST = "con1.example.com"
GNT_INSTANCE = os.path.join(vcluster.REPO_ROOT, "scripts", "gnt-instance")


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vconsole"), nodes=2, use_ssh=True,
                        hypervisor=constants.HT_KVM) as cluster:
        cluster.ok("gnt-instance", "add", "-t", "file", "-s", "64M", "-o", "tinylinux",
                   "-n", N2, *NOCHECK, INST)
        assert wait_for_line(KvmHypervisor(cluster.paths(N2)).serial_log(INST)) == \
            f"{BOOT_LINE} {INST}"
        yield cluster


def test_console_from_the_other_node_reaches_the_guest_shell(vc):
    code, seen = talk_on_a_pty([GNT_INSTANCE, "console", INST], vc.env(N1), "@@SSH1@@")
    assert code == 0, seen
    # the guest's shell answered: its prompt came through the two terminals
    assert b"tinylinux# " in seen


def test_show_cmd_prints_the_ssh_command_line(vc):
    out = vc.ok("gnt-instance", "console", "--show-cmd", INST, node=N1)
    argv = shlex.split(out.strip())
    port = vc.cluster.ssh_port
    n2 = vc.cluster.node(N2)
    assert argv[0] == "ssh" and argv[-2] == n2.ip
    assert f"-p{port}" in argv and "-t" in argv and "-lroot" in argv
    assert argv[argv.index("-i") + 1] == vc.paths(N1).ssh_key_file
    assert f"-oUserKnownHostsFile={vc.paths(N1).known_hosts_file}" in argv
    remote = shlex.split(argv[-1])
    assert remote == consoles.serial_command(KvmHypervisor(vc.paths(N2)).serial_socket(INST))


@pytest.mark.skipif(not os.path.exists("/usr/bin/ssh"), reason="no OpenSSH client")
def test_the_shown_command_works_with_openssh(vc):
    argv = shlex.split(vc.ok("gnt-instance", "console", "--show-cmd", INST, node=N1).strip())
    code, seen = talk_on_a_pty(argv, vc.env(N1), "@@SSH2@@")
    assert code == 0, seen


def test_an_unknown_host_key_is_refused_clearly(vc):
    path = vc.paths(N1).known_hosts_file
    with open(path) as fh:
        saved = fh.read()
    n2 = vc.cluster.node(N2)
    name = f"[{n2.ip}]:{vc.cluster.ssh_port}"
    assert name in saved
    try:
        with open(path, "w") as fh:
            fh.writelines(line for line in saved.splitlines(keepends=True)
                          if not line.startswith(name + " "))
        res = subprocess.run([GNT_INSTANCE, "console", INST], env=vc.env(N1),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=120)
    finally:
        with open(path, "w") as fh:
            fh.write(saved)
    assert res.returncode == 1
    assert f"Cannot attach to the console of {INST} on its primary node {N2} over SSH" \
        in res.stderr
    assert f"Host key of {name} is unknown" in res.stderr
    assert f"'gnt-cluster command -n {N2} true'" in res.stderr
