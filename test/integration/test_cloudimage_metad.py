"""cloud-init inside the cloud image reads ``ganeti-metad`` instead of a seed drive
(doc/images.md, "Where the guest reads it").

An instance with the kvm parameter ``cloud_init_source=metad`` gets no seed
cdrom: qemu's SMBIOS serial number says ``ds=nocloud-net;s=http://169.254.169.254/``,
so the guest's cloud-init (NoCloud over the network) asks the metadata
service for its meta-data and user-data.  The guest must have its address
before cloud-init's network stage: with no seed it takes cloud-init's
fallback network configuration (DHCP on its first NIC), so the test runs a
DHCP server (busybox ``udhcpd``) handing out the NIC's own address by its
MAC, and the service recognises the instance by that source address.

A 1-node kvm virtual cluster in a network namespace of the test's own: the
namespace's loopback holds 169.254.169.254, where the node's real
``ganeti-metad`` listens on port 80 (free inside the namespace), and the
instance's routed NIC's tap the gateway address ``10.64.0.1`` (where
``udhcpd`` answers and the guest's default route leads).  Inside the guest
(serial console): ``cloud-init status --long`` is done with
``DataSourceNoCloudNet`` seeded from the service's URL, no ``cidata`` drive
exists, the hostname is the instance's and the SSH key given with ``-O`` is
in the default user's ``authorized_keys``; the service's log names the
instance's requests.

Marked ``soak``: a third full Debian boot under TCG beside test_cloudimage_boot.py's
two (in ``make test``), which cover the seed the node builds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from guest_helpers import SerialConsole, wait_for_line
from instance_helpers import NOCHECK, rows
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers
from tools.harness import cloudimage


def _reason() -> str:
    if os.geteuid() != 0:
        return "tap devices and a network namespace need root"
    if shutil.which("qemu-img") is None or shutil.which("genisoimage") is None:
        return "needs qemu-img (qemu-utils) and genisoimage (make debian-deps)"
    if shutil.which("busybox") is None:
        return "needs busybox (its udhcpd; make debian-deps)"
    return host_helpers.qemu_reason()


pytestmark = [pytest.mark.soak, pytest.mark.timeout(1500),
              pytest.mark.skipif(bool(_reason()), reason=_reason() or "runs")]

N1 = "node1.vcluster"
INST = "cloud3.example.com"
MAC = "52:54:00:6a:10:09"
GUEST_IP, GATEWAY = "10.64.0.9", "10.64.0.1"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG1ldGFkYXRhc2VydmljZWtleWZvcmNsb3VkaW5pdA meta@ganeti"


@pytest.fixture(scope="module")
def image():
    host_helpers.skip_unless(cloudimage.problem())
    built = cloudimage.build(log=print)
    return cloudimage.qcow2(built)      # made before the namespace: no network needed after


@pytest.fixture(scope="module")
def netns(image) -> Iterator[None]:
    with host_helpers.network_namespace(constants.METAD_ADDRESS):
        yield


@pytest.fixture(scope="module")
def vc(tmp_path_factory, netns) -> Iterator[VirtualCluster]:
    with VirtualCluster(tmp_path_factory.mktemp("vcmetad"), nodes=1, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def metad(vc) -> Iterator[None]:
    """The node's ``ganeti-metad`` where the guest is told to look: 169.254.169.254:80."""
    paths = vc.paths(N1)
    daemonctl.start_metad(paths, constants.METAD_ADDRESS, 80, env=vc.env(N1))
    try:
        yield
    finally:
        daemonctl.stop_daemon(paths, constants.METAD, timeout=10.0)


def _argv(hv: KvmHypervisor, name: str) -> list[str]:
    return [str(w) for w in (hv.read_runtime(name) or {}).get("argv") or []]


def _tap(hv: KvmHypervisor, name: str) -> str:
    (tap,) = [part.split("=", 1)[1] for word in _argv(hv, name) for part in word.split(",")
              if part.startswith("ifname=")]
    return tap


def _udhcpd(directory: str, tap: str) -> subprocess.Popen[bytes]:
    """busybox ``udhcpd`` on ``tap``, giving the NIC's MAC its address and the gateway."""
    conf = os.path.join(directory, "udhcpd.conf")
    with open(conf, "w", encoding="utf-8") as fh:
        fh.write(f"start {GUEST_IP}\nend {GUEST_IP}\ninterface {tap}\nmax_leases 1\n"
                 f"lease_file {directory}/udhcpd.leases\npidfile {directory}/udhcpd.pid\n"
                 f"static_lease {MAC} {GUEST_IP}\nopt subnet 255.255.255.0\n"
                 f"opt router {GATEWAY}\nopt lease 86400\n")
    return subprocess.Popen(["busybox", "udhcpd", "-f", conf], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(directory, "udhcpd.log"), "wb"))


def test_cloud_init_reads_the_metadata_service_without_a_seed_drive(vc, metad, image,
                                                                     tmp_path):
    path, digest = image
    hv = KvmHypervisor(vc.paths(N1))
    short = INST.split(".")[0]
    dhcp = None
    started = time.monotonic()
    try:
        vc.ok("gnt-instance", "add", "-t", "file", "-s", "2G", "-n", N1, "-B", "memory=512M",
              "-H", "cloud_init_source=metad",
              "--net", f"0:mode=routed,link=,ip={GUEST_IP},mac={MAC}",
              "--os-image", path, "--os-image-checksum", f"sha256:{digest}",
              "-O", f"ssh_authorized_keys={KEY}", *NOCHECK, INST, timeout=900)
        added = time.monotonic()
        argv = _argv(hv, INST)
        assert "type=1,serial=ds=nocloud-net;s=http://169.254.169.254/" in argv, argv
        assert not [w for w in argv if "cidata" in w], argv
        # the node built the seed (the service's entry comes with it); qemu does not get it
        assert os.path.exists(vc.paths(N1).cloud_init_seed(INST))
        tap = _tap(hv, INST)
        subprocess.run(["ip", "addr", "add", f"{GATEWAY}/32", "dev", tap], check=True,
                       timeout=30)
        dhcp = _udhcpd(str(tmp_path), tap)
        (uuid,) = rows(vc, "uuid", INST)[0]

        wait_for_line(hv.serial_log(INST), "root@", timeout=600)
        with SerialConsole(hv.serial_socket(INST), timeout=120) as con:
            con.run("dmesg -n 1")      # no kernel messages amid the answers
            status = con.run("cloud-init status --wait --long", timeout=300)
            done = time.monotonic()
            assert "status: done" in status, status
            assert "DataSourceNoCloudNet" in status, status
            assert f"http://{constants.METAD_ADDRESS}/" in status, status
            assert con.run("blkid -L cidata || echo no-seed-drive") == "no-seed-drive"
            assert con.run("hostname") == short
            meta = json.loads(con.run("cloud-init query ds.meta_data"))
            assert meta["local-hostname"] == INST and meta["instance-id"] == uuid, meta
            keys = con.run("cat /home/debian/.ssh/authorized_keys")
            assert KEY in keys.splitlines(), keys
            assert f"{GUEST_IP}/24" in con.run("ip -4 -o address show scope global")
        print(f"\ncloud-init via ganeti-metad: add {added - started:.0f} s, add to"
              f" cloud-init done {done - started:.0f} s")
        with open(vc.paths(N1).daemon_log_file(constants.METAD), encoding="utf-8") as fh:
            log = fh.read()
        for doc in ("meta-data", "user-data"):
            assert f"GET /{doc} from {GUEST_IP} ({INST}): 200" in log, log
    finally:
        if dhcp is not None:
            dhcp.terminate()
            dhcp.wait(timeout=30)
        # no ACPI power-off to wait for: the image has no logind to act on the button
        vc.run("gnt-instance", "remove", "-f", "--shutdown-timeout=0", INST, timeout=300)
