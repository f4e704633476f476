"""A real kvm guest fetches its own documents from ``ganeti-metad`` (doc/images.md, "The
metadata service").

A 1-node kvm virtual cluster in a network namespace the test makes (its
own loopback, tap and routes; the host's network is never touched), and
the node's real ``ganeti-metad`` bound to the namespace's own address
(``10.63.0.1`` on its loopback, a free port; not 169.254.169.254:80, which
the communication tap carries in production: the service is the same,
only its address differs).

The instance is purely image-based (``--os-image``, no OS definition): the
image is a 32 MiB raw disk of the ``tinylinux`` guest (busybox: ``ip``,
``wget``), made by the test with that OS definition's own ``create``
script, so the guest boots from the very disk the node wrote, and the
instance carries the OS parameter ``os-image`` that makes the node build
its seed and its metadata entry at every start.  It has a private
user-data document.  Its NIC is routed with the static address
``10.63.0.9`` (the node routes that address to the tap and answers ARP on
it).

Inside the guest (serial console) the test gives eth0 that address and a
route to the service, then busybox ``wget`` prints the instance's
meta-data (UUID, name), its private user-data and its network-config
(MAC, address).  Busybox ``wget`` cannot choose its source address, so
the guest sends from a second address (``10.63.0.10``, routed back to the
tap by the test) by a route with ``src``: the same guest, from an address
that is no NIC's, gets ``403`` and none of the data; back on its own
address, ``200`` again.  What no test does: boot a guest whose cloud-init
reads the service (``ds=nocloud-net``).

Skips (naming the reason) only when qemu cannot run, qemu-img or
genisoimage is missing (``make debian-deps``) or the test is not root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from guest_helpers import SerialConsole, wait_for_line
from instance_helpers import NOCHECK, rows
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
from test.integration import host_helpers
from tools.harness import tinylinux, vcluster


def _reason() -> str:
    if os.geteuid() != 0:
        return "tap devices and a network namespace need root"
    if shutil.which("qemu-img") is None or shutil.which("genisoimage") is None:
        return "needs qemu-img (qemu-utils) and genisoimage (make debian-deps)"
    return host_helpers.qemu_reason()


pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(_reason()), reason=_reason() or "runs")]


N1 = "node1.vcluster"
METAD_ADDRESS = "10.63.0.1"     # the namespace's own address (its loopback)
GUEST_IP = "10.63.0.9"          # the instance's NIC
STRANGER = "10.63.0.10"         # the guest's second address: no NIC's
NAME = "metaguest.example.com"
USER_DATA = "#cloud-config\nruncmd:\n  - echo guest-secret-doc\n"


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    """A 32 MiB raw disk image of the tinylinux guest, made as its OS definition's
    ``create`` script makes a disk (FAT, syslinux, kernel, initramfs): a boot sector on
    the whole disk, so the node recognises it as a raw image."""
    tmp = tmp_path_factory.mktemp("vkmetad-image")
    osdir = str(tmp / "tinylinux")
    shutil.copytree(os.path.join(vcluster.REPO_ROOT, "tools", "os", "tinylinux"), osdir)
    # built first, while packages can still be fetched (cached after)
    tinylinux.install(tinylinux.build(), os.path.join(osdir, "guest"))
    path = str(tmp / "tinylinux.img")
    with open(path, "wb") as fh:
        fh.truncate(32 * 1024 * 1024)
    env = {**os.environ, "DISK_COUNT": "1", "DISK_0_PATH": path, "DISK_0_SIZE": "32",
           "INSTANCE_NAME": NAME}
    res = subprocess.run([os.path.join(osdir, "create")], env=env, capture_output=True,
                         text=True, check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    return path


@pytest.fixture(scope="module")
def netns(image) -> Iterator[None]:
    with host_helpers.network_namespace(METAD_ADDRESS):
        yield


@pytest.fixture(scope="module")
def vc(tmp_path_factory, netns) -> Iterator[VirtualCluster]:
    with VirtualCluster(tmp_path_factory.mktemp("vkmetad"), nodes=1, use_ssh=False,
                        hypervisor=constants.HT_KVM) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def metad(vc) -> Iterator[str]:
    """The base URL of the node's ``ganeti-metad``."""
    port = vcluster.pick_free_port([METAD_ADDRESS])
    paths = vc.paths(N1)
    daemonctl.start_metad(paths, METAD_ADDRESS, port, env=vc.env(N1))
    try:
        yield f"http://{METAD_ADDRESS}:{port}"
    finally:
        daemonctl.stop_daemon(paths, constants.METAD, timeout=10.0)


def _tap(hv: KvmHypervisor, name: str) -> str:
    argv = [str(w) for w in (hv.read_runtime(name) or {}).get("argv") or []]
    (tap,) = [part.split("=", 1)[1] for word in argv for part in word.split(",")
              if part.startswith("ifname=")]
    return tap


def _address(con: SerialConsole) -> None:
    """The guest's NIC up with its address, and a route to the service through it."""
    con.run(f"ip link set eth0 up && ip addr add {GUEST_IP}/32 dev eth0"
            f" && ip route add {METAD_ADDRESS}/32 dev eth0")


def _fetch(con: SerialConsole, url: str) -> str:
    """What busybox ``wget`` printed for ``url`` (stdout and stderr) and its exit status.

    No ``-T``: the guest's busybox ``wget`` (1.35) dies of a segmentation fault
    with it; the console's timeout bounds the wait."""
    return con.run(f"wget -q -O - {url} 2>&1; echo wget-status=$?", timeout=90)


def test_the_guest_fetches_its_own_documents_and_another_source_is_refused(vc, metad, image):
    hv = KvmHypervisor(vc.paths(N1))
    try:
        vc.ok("gnt-instance", "add", "-t", "file", "-s", "64M", "-n", N1,
              "--os-image", image, "--net", f"0:mode=routed,link=,ip={GUEST_IP}",
              "--os-parameters-private", f"user_data={USER_DATA}", *NOCHECK, NAME)
        wait_for_line(hv.serial_log(NAME))
        uuid, mac = rows(vc, "uuid,nic.macs", NAME)[0]
        assert os.path.exists(vc.paths(N1).metadata_entry(NAME))
        with SerialConsole(hv.serial_socket(NAME)) as con:
            _address(con)
            # its own documents, asked from inside the guest
            assert _fetch(con, f"{metad}/meta-data").splitlines() == [
                f'instance-id: "{uuid}"', f'local-hostname: "{NAME}"', "wget-status=0"]
            assert _fetch(con, f"{metad}/user-data").splitlines() == [
                *USER_DATA.splitlines(), "wget-status=0"]
            netconf = _fetch(con, f"{metad}/network-config")
            assert f'macaddress: "{mac}"' in netconf and f'"{GUEST_IP}/32"' in netconf
            assert netconf.endswith("wget-status=0")

            # the same guest from an address that is no NIC's: refused, nothing of the data
            subprocess.run(["ip", "route", "add", f"{STRANGER}/32", "dev", _tap(hv, NAME)],
                           check=True, timeout=30)
            con.run(f"ip addr add {STRANGER}/32 dev eth0"
                    f" && ip route replace {METAD_ADDRESS}/32 dev eth0 src {STRANGER}")
            for path in ("/meta-data", "/user-data", "/network-config"):
                out = _fetch(con, f"{metad}{path}")
                assert "403" in out and out.endswith("wget-status=1"), out
                assert "guest-secret" not in out and NAME not in out and uuid not in out
            # back on its own address: served again
            con.run(f"ip route replace {METAD_ADDRESS}/32 dev eth0 src {GUEST_IP}")
            assert "guest-secret-doc" in _fetch(con, f"{metad}/user-data")
        with open(vc.paths(N1).daemon_log_file(constants.METAD), encoding="utf-8") as fh:
            log = fh.read()
        assert f"GET /user-data from {GUEST_IP} ({NAME}): 200" in log
        assert f"GET /user-data from {STRANGER} (no instance): 403" in log
    finally:
        vc.run("gnt-instance", "remove", "-f", NAME)
    assert not os.path.exists(vc.paths(N1).metadata_entry(NAME))
