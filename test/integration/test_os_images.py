"""Image-based installs and cloud-init seeds through the real daemons (doc/images.md).

A 2-node virtual cluster; the instances live on the second node, so a
master's image file is pushed over node RPC and a URL is fetched by that
node (from an HTTP server of the test).  Real ``qemu-img`` and
``genisoimage``/``isoinfo``.  No guest boots here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess

import pytest
from instance_helpers import NOCHECK, disk_files, fail_unchanged, rows
from vcluster_harness import VirtualCluster

from test.integration import host_helpers
import rapi_helpers

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("qemu-img") is None or shutil.which("genisoimage") is None
                       or shutil.which("isoinfo") is None,
                       reason="needs qemu-img (qemu-utils) and genisoimage (make debian-deps)"),
]

N1, N2 = "node1.vcluster", "node2.vcluster"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcimg"), nodes=2) as cluster:
        rapi_helpers.add_writer(cluster)
        yield cluster


_rapi = rapi_helpers.call


_rapi_job = rapi_helpers.wait_job


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A directory of images, also served over HTTP: ``(dir, base URL)``."""
    top = tmp_path_factory.mktemp("images")
    with host_helpers.serve_directory(str(top)) as url:
        yield top, url


def _raw(path, size: int = MIB, fill: bytes = b"A") -> bytes:
    data = bytearray(fill * size)
    data[510:512] = b"\x55\xaa"
    with open(path, "wb") as fh:
        fh.write(data)
    return bytes(data)


def _qcow2(raw_path, path) -> None:
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw_path),
                    str(path)], check=True)


def _add(vc, name, *extra) -> str:
    return vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", N2,
                 "--no-start", *NOCHECK, *extra, name)


def _seed(vc, name, node=N2) -> str:
    return vc.paths(node).cloud_init_seed(name)


def _iso(path, member) -> str:
    return subprocess.run(["isoinfo", "-i", path, "-R", "-x", f"/{member}"], check=True,
                          capture_output=True, text=True).stdout


def _leftovers(vc) -> list[str]:
    found = []
    for node in vc.names:
        for top in (vc.paths(node).os_image_dir, vc.paths(node).cloud_init_dir,
                    vc.paths(node).metadata_dir):
            if os.path.isdir(top):
                found += [os.path.join(top, f) for f in os.listdir(top)]
    return found


def _disk0(vc, name) -> bytes:
    (path,) = disk_files(vc, N2, name)
    with open(path, "rb") as fh:
        return fh.read()


def test_add_from_a_masters_raw_file_with_checksum_and_seed(vc, images):
    top, _ = images
    data = _raw(top / "raw.img")
    digest = hashlib.sha256(data).hexdigest()
    name = "img-raw.example.com"
    out = _add(vc, name, "--os-image", str(top / "raw.img"),
               "--os-image-checksum", f"sha256:{digest}",
               "-O", "user=alice,ssh_authorized_keys=ssh-ed25519 AAAAkey1 a@b")
    assert "writing the OS image" in out, out
    disk = _disk0(vc, name)
    assert len(disk) == 8 * MIB and disk[:MIB] == data and disk[MIB:] == bytes(7 * MIB)
    seed = _seed(vc, name)
    uuid = rows(vc, "uuid", name)[0][0]
    assert _iso(seed, "meta-data") == (f'instance-id: "{uuid}"\n'
                                       f'local-hostname: "{name}"\n')
    mac = rows(vc, "nic.macs", name)[0][0]
    assert f'macaddress: "{mac}"' in _iso(seed, "network-config")
    assert _iso(seed, "user-data") == ('#cloud-config\nsystem_info:\n  default_user:\n'
                                       '    name: "alice"\nssh_authorized_keys:\n'
                                       '  - "ssh-ed25519 AAAAkey1 a@b"\n')
    assert os.listdir(vc.paths(N2).os_image_dir) == []
    # the job log has typed progress entries for the image
    job = vc.ok("gnt-job", "list", "--no-headers", "-o", "id", "--running", "--finished"
                ).split()[-1]
    info = vc.ok("gnt-job", "info", job)
    assert "progress, 'image: done" in info or "progress, image: done" in info, info

    # rename: the seed follows the name
    vc.ok("gnt-instance", "rename", *NOCHECK, name, "img-raw2.example.com")
    assert not os.path.exists(seed)
    assert 'local-hostname: "img-raw2.example.com"' in _iso(_seed(vc, "img-raw2.example.com"),
                                                           "meta-data")
    vc.ok("gnt-instance", "remove", "-f", "img-raw2.example.com")
    assert _leftovers(vc) == []


def test_add_from_a_qcow2_url_then_reinstall_with_another_key(vc, images):
    top, url = images
    data = _raw(top / "q.raw", fill=b"Q")
    _qcow2(top / "q.raw", top / "q.qcow2")
    name = "img-qcow.example.com"
    _add(vc, name, "--os-image", f"{url}/q.qcow2", "-O", "ssh_authorized_keys=ssh-rsa KEY1")
    assert _disk0(vc, name)[:MIB] == data
    assert "KEY1" in _iso(_seed(vc, name), "user-data")
    data2 = _raw(top / "r.raw", fill=b"R")
    vc.ok("gnt-instance", "reinstall", "-f", "--os-image", str(top / "r.raw"),
          "-O", "ssh_authorized_keys=ssh-rsa KEY2", name)
    assert _disk0(vc, name)[:MIB] == data2
    user_data = _iso(_seed(vc, name), "user-data")
    assert "KEY2" in user_data and "KEY1" not in user_data
    # a refused image changes nothing: not the disk, the seed or the configuration
    (top / "junk.img").write_bytes(b"junk" * 1000)
    fail_unchanged(vc, "gnt-instance", "reinstall", "-f", "--os-image", f"{url}/junk.img",
                   name, expect="neither a qcow2 image nor a raw")
    assert _leftovers(vc) == [_seed(vc, name)]
    assert _disk0(vc, name)[:MIB] == data2
    vc.ok("gnt-instance", "remove", "-f", name)
    assert _leftovers(vc) == []


def test_a_moved_instance_leaves_no_seed_on_its_old_node(vc, images):
    """The seed and metadata entry go with the instance: none stays behind on
    the node it left (the new node builds its own when it starts there)."""
    top, _ = images
    _raw(top / "m.raw", fill=b"M")
    name = "img-move.example.com"
    _add(vc, name, "--os-image", str(top / "m.raw"), "-O", "ssh_authorized_keys=ssh-rsa KEYM")
    assert _leftovers(vc) == [_seed(vc, name)]
    vc.ok("gnt-instance", "move", "-f", "-n", N1, name)
    assert _leftovers(vc) == []                   # not started: no seed anywhere yet
    vc.ok("gnt-instance", "startup", name)
    assert _leftovers(vc) == [_seed(vc, name, node=N1)]
    assert "KEYM" in _iso(_seed(vc, name, node=N1), "user-data")
    vc.ok("gnt-instance", "remove", "-f", name)
    assert _leftovers(vc) == []


def test_private_user_data_document_stays_private(vc, images):
    top, _ = images
    _raw(top / "p.img")
    name = "img-private.example.com"
    doc = "#cloud-config\nruncmd:\n  - echo s3cr3t-token-4711\n"    # no comma: -O syntax
    _add(vc, name, "--os-image", str(top / "p.img"), "--os-parameters-private",
         f"user_data={doc}")
    assert _iso(_seed(vc, name), "user-data") == doc
    assert "s3cr3t-token-4711" not in vc.ok("gnt-instance", "info", name)
    assert "s3cr3t-token-4711" not in vc.ok("gnt-instance", "list", "-o",
                                            "name,osparams,custom_osparams", name)
    for node in vc.names:       # job files, and every daemon's and OS script's log
        for top in (vc.paths(node).queue_dir, vc.paths(node).log_dir):
            for dirpath, _dirs, files in os.walk(top):
                for fname in files:
                    with open(os.path.join(dirpath, fname), "rb") as fh:
                        assert b"s3cr3t-token-4711" not in fh.read(), fname
    vc.ok("gnt-instance", "remove", "-f", name)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_bad_images_are_refused_and_leave_nothing(vc, images):
    top, url = images
    (top / "text.img").write_bytes(b"this is not a disk image\n" * 100)
    big = _raw(top / "big.img", size=9 * MIB)
    _raw(top / "big.raw", size=16 * MIB)
    subprocess.run(["qemu-img", "resize", "-f", "raw", str(top / "big.raw"), "64M"], check=True)
    _qcow2(top / "big.raw", top / "big.qcow2")          # small file, 64 MiB virtual
    good = _raw(top / "good.img")
    cases = [
        (["--os-image", str(top / "text.img")], "neither a qcow2 image nor a raw"),
        (["--os-image", f"{url}/text.img"], "neither a qcow2 image nor a raw"),
        (["--os-image", str(top / "good.img"), "--os-image-checksum", "sha256:" + "0" * 64],
         "checksum mismatch"),
        (["--os-image", f"{url}/good.img", "--os-image-checksum", "sha256:" + "0" * 64],
         "checksum mismatch"),
        (["--os-image", f"http://127.0.0.1:{_closed_port()}/x.img"], "Cannot fetch OS image"),
        (["--os-image", f"{url}/missing.img"], "Cannot fetch OS image"),
        (["--os-image", str(top / "big.img")], "larger than the first disk"),
        (["--os-image", f"{url}/big.qcow2"], "larger than the first disk"),
        (["--os-image", str(top / "none.img")], "Cannot read OS image"),
    ]
    assert len(big) > 8 * MIB and good
    for extra, expect in cases:
        name = "img-bad.example.com"
        fail_unchanged(vc, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n",
                       N2, "--no-start", *NOCHECK, *extra, name, expect=expect)
        assert rows(vc, "name") == [] or name not in [r[0] for r in rows(vc, "name")]
        assert _leftovers(vc) == [], extra
        assert disk_files(vc, N2, name) == []


def test_static_nic_on_a_network_and_the_seed_made_again_at_start(vc, images):
    # the node rebuilds the seed from the instance before starting it (and before
    # receiving a migration, and before a reboot), so whichever node runs the instance
    # has it, made from the configuration of the moment
    top, _ = images
    _raw(top / "n.img")
    vc.ok("gnt-network", "add", "--network", "198.51.100.0/24", "--gateway", "198.51.100.1",
          "imgnet")
    vc.ok("gnt-network", "connect", "-N", "mode=bridged,link=br0", "imgnet")
    name = "img-net.example.com"
    _add(vc, name, "--os-image", str(top / "n.img"), "--net",
         "0:network=imgnet,ip=198.51.100.20", "--net", "1:mac=aa:00:00:12:34:56")
    mac0 = rows(vc, "nic.macs", name)[0][0].split(",")[0]
    expected = ("version: 2\nethernets:\n"
                f'  nic0:\n    match:\n      macaddress: "{mac0}"\n'
                '    dhcp4: false\n    addresses:\n      - "198.51.100.20/24"\n'
                '    gateway4: "198.51.100.1"\n'
                '  nic1:\n    match:\n      macaddress: "aa:00:00:12:34:56"\n'
                "    dhcp4: true\n")
    seed = _seed(vc, name)
    assert _iso(seed, "network-config") == expected
    os.unlink(seed)
    vc.ok("gnt-instance", "startup", name)
    assert _iso(seed, "network-config") == expected
    # and before a reboot (a soft one keeps the qemu; the metadata service has it at once)
    for kind in ("soft", "hard"):
        os.unlink(seed)
        vc.ok("gnt-instance", "reboot", "--type", kind, name)
        assert _iso(seed, "network-config") == expected, kind
    vc.ok("gnt-instance", "remove", "-f", name)
    assert _leftovers(vc) == []


def test_an_image_and_an_os_the_scripts_run_on_the_written_disk(vc, images):
    # as Ganeti 3.0: the image is written, then the OS definition's create script runs
    top, _ = images
    _raw(top / "o.img", fill=b"O")
    name = "img-os.example.com"
    out = _add(vc, name, "-o", "tinyos", "--os-image", str(top / "o.img"))
    assert out.index("writing the OS image") < out.index("running the instance OS create"), out
    assert rows(vc, "os", name) == [["tinyos"]]
    assert os.path.exists(_seed(vc, name))
    vc.ok("gnt-instance", "reinstall", "-f", "--os-image", str(top / "o.img"), name)
    vc.ok("gnt-instance", "remove", "-f", name)
    assert _leftovers(vc) == []


def test_rapi_create_with_the_os_parameter_os_image(vc, images):
    # what Ganeti 3.0's RAPI clients send: the image as the OS parameter, no OS
    top, url = images
    data = _raw(top / "rapi.img", fill=b"P")
    name = "img-rapi.example.com"
    job_id = _rapi(vc, "POST", "/2/instances", {
        "__version__": 1, "mode": "create", "name": name, "disk_template": "file",
        "disks": [{"size": 8}], "nics": [{}], "pnode": N2, "name_check": False,
        "ip_check": False, "start": False, "osparams": {"os-image": f"{url}/rapi.img"}})
    job = _rapi_job(vc, int(job_id))
    assert job["status"] == "success", job["opresult"]
    assert _disk0(vc, name)[:MIB] == data
    assert os.path.exists(_seed(vc, name))
    vc.ok("gnt-instance", "remove", "-f", name)
    assert _leftovers(vc) == []
