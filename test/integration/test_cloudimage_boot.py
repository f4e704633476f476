"""The cloud image (tools/harness/cloudimage.py) boots as an image-based kvm instance (doc/images.md).

``gnt-instance add --os-image`` writes the image built here (its qcow2
copy, checked against the SHA-256 the builder recorded) to a ``file``
disk larger than the image, the instance on a network (``gnt-network``, a
gateway) with a static address; the node's NoCloud seed gives it the
instance's name, that address and an SSH key.  Inside the guest (root is
logged in on the serial console): ``cloud-init status --long`` reports
done with the NoCloud data source, the hostname is the instance's, the key
is in the default user's ``authorized_keys``, the address and default
route are the seed's ``network-config``, and cloud-init grew the file
system to the disk.  After a ``reinstall`` with another key the guest has
that key only.

In ``make test`` since the node guests and this image boot with
``norandmaps`` (doc/vcluster.md, "Where a guest cluster's CPU goes";
doc/images.md, "The test image"): under TCG the code translated for one
process then serves the next, which took a guest DRBD test from 125-158 to
79 CPU seconds of qemu and made room in the 25-minute budget; before, it
was a ``soak`` test (four runs in ``make test`` took 25:46 to 26:17).  The
image is made to be booted under TCG (a minimal Debian, cloud-init's
modules cut to those the checks and common user-data need; doc/images.md,
"The test image", has the CPU figures), and the checks are typed on the
console after cloud-init's end, with one start of cloud-init each.  Under
root (``GANETI_TEST_REQUIRE_DEBOOTSTRAP=1``) a missing builder tool fails
the test instead of skipping it.
"""

from __future__ import annotations

import json

import pytest
from guest_helpers import SerialConsole, log_lines, wait_for_line
from instance_helpers import NOCHECK, status_of
from vcluster_harness import VirtualCluster

from ganeti import constants
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers
from tools.harness import cloudimage

pytestmark = [pytest.mark.timeout(1200),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]

N1 = "node1.vcluster"
INST = "cloud1.example.com"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGFuZXRpdGVzdGtleWZvcmNsb3VkaW5pdGJvb3Q test@ganeti"
KEY2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNlY29uZGtleWZvcnRoZXJlaW5zdGFsbHRlc3Rz other@ganeti"
NET, ADDRESS, GATEWAY = "cloudnet", "10.62.0.9", "10.62.0.1"


@pytest.fixture(scope="module")
def image():
    host_helpers.skip_unless(cloudimage.problem(), required_by=host_helpers.REQUIRE_DEBOOTSTRAP,
                             why_required="make test as root has the cloud image's builder tools")
    return cloudimage.build(log=print)


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcloud"), nodes=1, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


def _after_boot(vc, name: str, boots_seen: int, first: bool = True) -> dict[str, str]:
    """Wait for the guest's root prompt number ``boots_seen + 1`` and cloud-init's end;
    what the guest says about itself (on its serial console).  After the first boot
    also its host name, cloud-init's meta-data, default route and root file system
    size (later boots of a reinstall: its key and address only)."""
    hv = KvmHypervisor(vc.paths(N1))
    short = name.split(".")[0]
    wait_for_line(hv.serial_log(name), f"root@{short}:", count=boots_seen + 1, timeout=900)
    with SerialConsole(hv.serial_socket(name), timeout=120) as con:
        con.run("dmesg -n 1")      # no kernel messages amid the answers
        status = con.run("cloud-init status --wait --long", timeout=600)
        assert "status: done" in status and "DataSourceNoCloud" in status, status
        seen = {"addresses": con.run("ip -4 -o address show scope global"),
                "keys": con.run("cat /home/debian/.ssh/authorized_keys")}
        if first:
            seen.update(hostname=con.run("hostname"),
                        meta=con.run(cloudimage.META_DATA_COMMAND),
                        route=con.run("ip -4 route show default"),
                        root_kib=con.run("df -k --output=size / | tail -n 1"))
        return seen


def test_cloud_init_configures_the_guest_and_a_reinstall_gives_it_another_key(vc, image):
    vc.ok("gnt-network", "add", "--network", "10.62.0.0/24", "--gateway", GATEWAY, NET)
    vc.ok("gnt-network", "connect", "-N", "mode=routed,link=main", NET)
    try:
        # the compressed copy: the master sends the image to the node over RPC
        path, digest = cloudimage.qcow2(image)
        vc.ok("gnt-instance", "add", "-t", "file", "-s", "2G", "-n", N1, "-B", "memory=512M",
              "--net", f"0:network={NET},ip={ADDRESS}", "--os-image", path,
              "--os-image-checksum", f"sha256:{digest}", "-O", f"ssh_authorized_keys={KEY}",
              *NOCHECK, INST, timeout=900)
        assert status_of(vc, INST) == "running"
        seen = _after_boot(vc, INST, 0)
        assert seen["hostname"] == INST.split(".")[0]
        assert json.loads(seen["meta"])["local-hostname"] == INST, seen["meta"]
        assert KEY in seen["keys"].splitlines(), seen["keys"]
        assert f"{ADDRESS}/24" in seen["addresses"], seen["addresses"]
        assert seen["route"].split()[:3] == ["default", "via", GATEWAY], seen["route"]
        # the file system was grown from the image's 1 GiB to the 2 GiB disk
        assert int(seen["root_kib"]) > 1800 * 1024, seen["root_kib"]
        # reinstalled from the same image with another key: a new disk, a new seed
        serial = KvmHypervisor(vc.paths(N1)).serial_log(INST)
        # the image has no logind to act on the power button: no ACPI wait
        vc.ok("gnt-instance", "shutdown", "--timeout=0", INST, timeout=300)
        # the prompts the log holds now (none when the stop removed the run directory)
        prompts = len(log_lines(serial, f"root@{INST.split('.')[0]}:"))
        vc.ok("gnt-instance", "reinstall", "-f", "--os-image", path,
              "-O", f"ssh_authorized_keys={KEY2}", INST, timeout=900)
        vc.ok("gnt-instance", "startup", INST, timeout=300)
        seen = _after_boot(vc, INST, prompts, first=False)
        assert KEY2 in seen["keys"].splitlines() and KEY not in seen["keys"], seen["keys"]
        assert f"{ADDRESS}/24" in seen["addresses"], seen["addresses"]
    finally:
        vc.run("gnt-instance", "remove", "-f", "--shutdown-timeout=0", INST, timeout=300)
        vc.run("gnt-network", "disconnect", NET)
        vc.run("gnt-network", "remove", NET)
