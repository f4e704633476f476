"""The node's side of image installs and cloud-init seeds (ganeti/backend/osimage.py).

Real tools: ``qemu-img`` (Debian qemu-utils) converts, ``genisoimage`` builds
the seed and ``isoinfo`` (both Debian genisoimage) reads it back.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import shutil
import subprocess
import threading

import pytest

from ganeti import errors, serializer
from ganeti.backend import blockdev, osimage
from ganeti.objects import Disk
from ganeti.storage.filestorage import file_logical_id

MIB = 1024 * 1024
INST = "img1.example.com"
needs_qemu_img = pytest.mark.skipif(shutil.which("qemu-img") is None,
                                    reason="qemu-img (Debian qemu-utils) is not installed")
needs_geniso = pytest.mark.skipif(shutil.which("genisoimage") is None
                                  or shutil.which("isoinfo") is None,
                                  reason="genisoimage/isoinfo (Debian genisoimage) not installed")


def _disk(ctx, size_mib: int = 4) -> dict:
    lid = list(file_logical_id("/srv/ganeti/file-storage", INST, "d1", 0))
    disk = serializer.to_data(Disk(uuid="d1", dev_type="file", size=size_mib, logical_id=lid))
    blockdev.blockdev_create(ctx, disk, size_mib, INST, True, "", False)
    return disk


def _raw_image(path: str, size: int = MIB) -> bytes:
    data = bytearray(os.urandom(size))
    data[510:512] = b"\x55\xaa"
    with open(path, "wb") as fh:
        fh.write(data)
    return bytes(data)


def _push(ctx, path: str) -> None:
    with open(path, "rb") as fh:
        data = fh.read()
    half = len(data) // 2
    osimage.os_image_put_chunk(ctx, INST, 0, base64.b64encode(data[:half]).decode())
    osimage.os_image_put_chunk(ctx, INST, half, base64.b64encode(data[half:]).decode())


def _disk_bytes(ctx, disk: dict) -> bytes:
    with open(blockdev._file_path(ctx, disk), "rb") as fh:
        return fh.read()


@needs_qemu_img
def test_raw_image_pushed_inspected_and_written(ctx, tmp_path):
    disk = _disk(ctx)
    data = _raw_image(str(tmp_path / "raw.img"))
    _push(ctx, str(tmp_path / "raw.img"))
    facts = osimage.os_image_inspect(ctx, INST)
    assert facts["format"] == "raw" and facts["size"] == MIB == facts["virtual_size"]
    assert facts["sha256"] == hashlib.sha256(data).hexdigest()
    assert osimage.os_image_write(ctx, INST, disk, "raw") == 4 * MIB
    written = _disk_bytes(ctx, disk)
    assert written[:MIB] == data and written[MIB:] == bytes(3 * MIB)   # kept at its size
    assert os.listdir(ctx.paths.os_image_dir) == []                     # staging gone


@needs_qemu_img
def test_qcow2_image_is_converted(ctx, tmp_path):
    disk = _disk(ctx)
    data = _raw_image(str(tmp_path / "raw.img"))
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(tmp_path / "raw.img"),
                    str(tmp_path / "img.qcow2")], check=True)
    _push(ctx, str(tmp_path / "img.qcow2"))
    facts = osimage.os_image_inspect(ctx, INST)
    assert facts["format"] == "qcow2" and facts["virtual_size"] == MIB
    osimage.os_image_write(ctx, INST, disk, "qcow2")
    assert _disk_bytes(ctx, disk)[:MIB] == data


def test_fetch_over_http_and_unreachable_url(ctx, tmp_path):
    data = _raw_image(str(tmp_path / "raw.img"))
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/raw.img"
        assert osimage.os_image_fetch(ctx, INST, url, 2 * MIB) == MIB
        assert osimage.os_image_inspect(ctx, INST)["sha256"] == hashlib.sha256(data).hexdigest()
        with pytest.raises(errors.StorageError, match="larger than the disk"):
            osimage.os_image_fetch(ctx, INST, url, MIB // 2)
        assert os.listdir(ctx.paths.os_image_dir) == []
        with pytest.raises(errors.StorageError, match="Cannot fetch OS image"):
            osimage.os_image_fetch(ctx, INST, f"http://127.0.0.1:{server.server_port}/none", MIB)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(errors.StorageError, match="Cannot fetch OS image"):
        osimage.os_image_fetch(ctx, INST, url, MIB)        # nobody listens any more
    assert os.listdir(ctx.paths.os_image_dir) == []


def _iso_file(iso: str, name: str) -> str:
    return subprocess.run(["isoinfo", "-i", iso, "-R", "-x", f"/{name}"], check=True,
                          capture_output=True, text=True).stdout


@needs_geniso
def test_seed_iso_read_back(ctx):
    path = osimage.instance_seed_build(
        ctx, INST, "uuid-1", [["aa:00:00:00:00:01", "192.0.2.5/24", "192.0.2.1"]],
        {"user": "alice", "ssh_authorized_keys": "ssh-ed25519 AAAA k"}, {})
    assert path == ctx.paths.cloud_init_seed(INST)
    info = subprocess.run(["isoinfo", "-d", "-i", path], check=True, capture_output=True,
                          text=True).stdout
    assert "Volume id: cidata" in info
    assert _iso_file(path, "meta-data") == (
        'instance-id: "uuid-1"\nlocal-hostname: "img1.example.com"\n')
    assert '      - "192.0.2.5/24"\n' in _iso_file(path, "network-config")
    assert _iso_file(path, "user-data") == (
        '#cloud-config\nsystem_info:\n  default_user:\n    name: "alice"\n'
        'ssh_authorized_keys:\n  - "ssh-ed25519 AAAA k"\n')
    # rebuilt with the private document, which replaces the generated one
    doc = "#cloud-config\nruncmd:\n  - [echo, hi]\n"
    osimage.instance_seed_build(ctx, INST, "uuid-1", [], {"user": "alice"}, {"user_data": doc})
    assert _iso_file(path, "user-data") == doc
    assert sorted(os.listdir(ctx.paths.cloud_init_dir)) == [f"{INST}.iso"]
    osimage.instance_seed_remove(ctx, INST)
    assert not os.path.exists(path)


def test_fetch_a_file_of_this_node(ctx, tmp_path):
    # Ganeti 3.0's meaning of a path: the primary node's file (used when the master has none)
    data = _raw_image(str(tmp_path / "local.img"))
    assert osimage.os_image_fetch(ctx, INST, str(tmp_path / "local.img"), 2 * MIB) == MIB
    assert osimage.os_image_inspect(ctx, INST)["sha256"] == hashlib.sha256(data).hexdigest()
    with pytest.raises(errors.StorageError, match="Cannot read OS image .*nor on node"):
        osimage.os_image_fetch(ctx, INST, str(tmp_path / "none.img"), MIB)
    with pytest.raises(errors.StorageError, match="only http, https and ftp"):
        osimage.os_image_fetch(ctx, INST, "ftps://h/x.img", MIB)
    assert os.listdir(ctx.paths.os_image_dir) == []


@needs_geniso
def test_seed_build_writes_the_metadata_entry_and_remove_drops_it(ctx):
    from ganeti.impexp import metadata
    doc = "#cloud-config\nruncmd:\n  - [echo, secret]\n"
    path = osimage.instance_seed_build(
        ctx, INST, "uuid-1", [["aa:00:00:00:00:01", "192.0.2.5/24", "192.0.2.1"],
                              ["aa:00:00:00:00:02", None, None]], {}, {"user_data": doc})
    entry_path = ctx.paths.metadata_entry(INST)
    assert os.stat(entry_path).st_mode & 0o777 == 0o600
    with open(entry_path, encoding="utf-8") as fh:
        entry = metadata.parse_entry(fh.read())
    assert entry.addresses == ("192.0.2.5",)
    for name in ("meta-data", "user-data", "network-config"):    # the seed's very bytes
        assert entry.documents[name] == _iso_file(path, name)
    assert entry.documents["user-data"] == doc
    # an instance left with no static address gets no entry
    osimage.instance_seed_build(ctx, INST, "uuid-1", [["aa:00:00:00:00:01", None, None]], {}, {})
    assert not os.path.exists(entry_path)
    osimage.instance_seed_build(ctx, INST, "uuid-1", [["aa:00:00:00:00:01", "192.0.2.5/24",
                                                       None]], {}, {})
    osimage.metadata_forget(ctx, INST)
    assert not os.path.exists(entry_path) and os.path.exists(path)
    osimage.instance_seed_build(ctx, INST, "uuid-1", [["aa:00:00:00:00:01", "192.0.2.5/24",
                                                       None]], {}, {})
    osimage.instance_seed_remove(ctx, INST)
    assert not os.path.exists(entry_path) and not os.path.exists(path)
    assert os.listdir(ctx.paths.metadata_dir) == []
