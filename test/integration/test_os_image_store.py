"""The OS image store through the real daemons (doc/images.md, "The image store").

A 2-node virtual cluster: images are added to the master's store (a master's
file and an http URL), listed, installed by name on the second node (pushed
once, then taken from the node's cache), refused when the stored file is
damaged, and removed; through RAPI too; and copied to a master candidate,
which serves installs from it once it is the master.  Real ``qemu-img``.  No
guest boots here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from typing import Any

import pytest
from instance_helpers import NOCHECK, disk_files, fail_unchanged
from failover_helpers import failover
from vcluster_harness import VirtualCluster

from test.integration import host_helpers
import rapi_helpers

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("qemu-img") is None or shutil.which("genisoimage") is None,
                       reason="needs qemu-img (qemu-utils) and genisoimage (make debian-deps)"),
]

N1, N2 = "node1.vcluster", "node2.vcluster"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcstore"), nodes=2) as cluster:
        rapi_helpers.add_writer(cluster)
        # node2 starts as a plain node: the store is copied to master candidates only
        # (the last test promotes it), so installs there show a push, then the cache
        cluster.ok("gnt-cluster", "modify", "--candidate-pool-size", "1")
        cluster.ok("gnt-node", "modify", "--master-candidate=no", N2)
        yield cluster


_rapi = rapi_helpers.call


def _rapi_create(vc, name: str, osparams: dict[str, str]) -> dict[str, Any]:
    job_id = _rapi(vc, "POST", "/2/instances", {
        "__version__": 1, "mode": "create", "name": name, "disk_template": "file",
        "disks": [{"size": 8}], "nics": [{}], "pnode": N2, "name_check": False,
        "ip_check": False, "start": False, "osparams": osparams})
    return rapi_helpers.wait_job(vc, job_id)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A directory of images, also served over HTTP: ``(dir, base URL)``."""
    top = tmp_path_factory.mktemp("storeimg")
    with host_helpers.serve_directory(str(top)) as url:
        yield top, url


def _raw(path, size: int = 4 * MIB) -> bytes:
    data = bytearray(os.urandom(size))
    data[510:512] = b"\x55\xaa"
    path.write_bytes(bytes(data))
    return bytes(data)


def _store_files(vc) -> list[str]:
    top = os.path.join(vc.paths(N1).os_image_store_dir, "images")
    return sorted(os.listdir(top))


def _node_dir(vc, node, which) -> list[str]:
    top = getattr(vc.paths(node), which)
    return sorted(os.listdir(top)) if os.path.isdir(top) else []


def _disk0(vc, node, name) -> bytes:
    (path,) = disk_files(vc, node, name)
    with open(path, "rb") as fh:
        return fh.read()


def _add(vc, name, node, *extra) -> str:
    return vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", node,
                 "--no-start", *NOCHECK, *extra, name)


def test_store_add_list_install_cache_corruption_remove(vc, images):
    top, url = images
    data = _raw(top / "deb.raw")
    sha = hashlib.sha256(data).hexdigest()
    qdata = _raw(top / "q.raw", size=2 * MIB)
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(top / "q.raw"),
                    str(top / "q.qcow2")], check=True)

    # add: a master's file (checksum given) and an http URL
    vc.ok("gnt-os", "image", "add", "--checksum", f"sha256:{sha}", "deb", str(top / "deb.raw"))
    vc.ok("gnt-os", "image", "add", "cloud", f"{url}/q.qcow2")
    assert _store_files(vc) == ["cloud", "deb"]
    with open(os.path.join(vc.paths(N1).os_image_store_dir, "images", "deb"), "rb") as fh:
        assert fh.read() == data
    lines = vc.ok("gnt-os", "image", "list").splitlines()
    assert lines[0].split() == ["Name", "Format", "Size", "Checksum", "Added"]
    assert lines[1].split()[:4] == ["cloud", "qcow2", lines[1].split()[2],
                                    lines[1].split()[3]]
    assert lines[2].split()[:4] == ["deb", "raw", "4.0M", f"sha256:{sha[:12]}"]
    assert vc.ok("gnt-os", "image", "list", "--no-headers", "-o", "name,sha256,source",
                 "--separator=|", "deb").strip() == f"deb|{sha}|{top / 'deb.raw'}"
    assert "OS_IMAGE_ADD(deb)" in vc.ok("gnt-job", "list")

    # bad input: a clear error, nothing changed in the store
    index = open(os.path.join(vc.paths(N1).os_image_store_dir, "index.json")).read()
    (top / "text.img").write_bytes(b"not an image\n" * 1000)
    for argv, expect in [
        (["../evil", str(top / "deb.raw")], "Invalid image name"),
        (["deb", str(top / "q.raw")], "already in the store"),
        (["other", str(top / "text.img")], "neither a qcow2 image nor a raw"),
        (["--checksum", "sha256:" + "0" * 64, "other", str(top / "deb.raw")],
         "checksum mismatch"),
        (["other", f"{url}/missing.raw"], "Cannot fetch OS image"),
    ]:
        res = vc.run("gnt-os", "image", "add", *argv)
        out = res.stdout + res.stderr
        assert res.returncode != 0 and expect in out and "Traceback" not in out, (argv, out)
        assert _store_files(vc) == ["cloud", "deb"]
        assert open(os.path.join(vc.paths(N1).os_image_store_dir, "index.json")).read() == index

    # install by name: pushed to node2 once, then its cached copy is used
    out = _add(vc, "st1.example.com", N2, "--os-image", "deb")
    assert "sending OS image deb" in out, out
    assert _disk0(vc, N2, "st1.example.com")[:4 * MIB] == data
    assert _node_dir(vc, N2, "os_image_cache_dir") == [sha]
    out = _add(vc, "st2.example.com", N2, "--os-image", "deb",
               "--os-image-checksum", f"sha256:{sha}")
    assert "has a copy" in out and "sending OS image" not in out, out
    assert _disk0(vc, N2, "st2.example.com")[:4 * MIB] == data
    out = vc.ok("gnt-instance", "reinstall", "-f", "--os-image", "cloud", "st2.example.com")
    assert "sending OS image cloud" in out
    assert _disk0(vc, N2, "st2.example.com")[:2 * MIB] == qdata
    assert _node_dir(vc, N2, "os_image_dir") == []

    # through RAPI: the OS parameter os-image names the store image (Ganeti 3.0's clients)
    job = _rapi_create(vc, "st4.example.com", {"os-image": "deb"})
    assert job["status"] == "success", job["opresult"]
    assert _disk0(vc, N2, "st4.example.com")[:4 * MIB] == data
    job = _rapi_create(vc, "st5.example.com", {"os-image": "nosuch"})
    assert job["status"] == "error" and "not in the image store" in str(job["opresult"])

    # a checksum not the store's is refused on the master
    fail_unchanged(vc, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", N2,
                   "--no-start", *NOCHECK, "--os-image", "deb", "--os-image-checksum",
                   "sha256:" + "1" * 64, "st3.example.com", expect="checksum mismatch")

    # a damaged stored file: refused on node1 by the recorded checksum, nothing left there
    stored = os.path.join(vc.paths(N1).os_image_store_dir, "images", "deb")
    with open(stored, "r+b") as fh:
        fh.seek(2 * MIB)
        byte = fh.read(1)
        fh.seek(2 * MIB)
        fh.write(bytes([byte[0] ^ 0xFF]))
    out = fail_unchanged(vc, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n",
                         N1, "--no-start", *NOCHECK, "--os-image", "deb", "st3.example.com",
                         expect="checksum mismatch")
    assert f"expected sha256:{sha}" in out, out
    assert disk_files(vc, N1, "st3.example.com") == []
    assert _node_dir(vc, N1, "os_image_dir") == [] and _node_dir(vc, N1, "os_image_cache_dir") == []
    # node2's checked copy still serves installs there
    assert "has a copy" in _add(vc, "st3.example.com", N2, "--os-image", "deb")
    assert _disk0(vc, N2, "st3.example.com")[:4 * MIB] == data

    # remove: unknown names refused; the store entry, file and node copies go
    res = vc.run("gnt-os", "image", "remove", "nosuch")
    assert res.returncode != 0 and "not in the image store" in res.stdout + res.stderr
    vc.ok("gnt-os", "image", "remove", "deb")
    assert _store_files(vc) == ["cloud"]
    assert vc.ok("gnt-os", "image", "list", "--no-headers", "-o", "name").split() == ["cloud"]
    assert sha not in _node_dir(vc, N2, "os_image_cache_dir")
    fail_unchanged(vc, "gnt-instance", "reinstall", "-f", "--os-image", "deb", "st1.example.com",
                   expect="not in the image store")
    vc.ok("gnt-os", "image", "remove", "cloud")
    assert _store_files(vc) == [] and _node_dir(vc, N2, "os_image_cache_dir") == []
    for name in ("st1.example.com", "st2.example.com", "st3.example.com", "st4.example.com"):
        vc.ok("gnt-instance", "remove", "-f", name)


def test_the_store_through_rapi_add_list_remove(vc, images):
    # doc/rapi.md (the resources list): each request is a job, as gnt-os image's
    top, url = images
    data = _raw(top / "r.raw", size=2 * MIB)
    sha = hashlib.sha256(data).hexdigest()
    job = rapi_helpers.wait_job(vc, _rapi(vc, "POST", "/2/os/images", {
        "name": "viarapi", "source": f"{url}/r.raw", "checksum": f"sha256:{sha}"}))
    assert job["status"] == "success", job["opresult"]
    assert "viarapi" in _store_files(vc)
    job = rapi_helpers.wait_job(vc, _rapi(vc, "GET", "/2/os/images?names=viarapi"))
    assert job["status"] == "success", job["opresult"]
    (entries,) = job["opresult"]
    assert [(e["name"], e["format"], e["sha256"], e["source"]) for e in entries] == \
        [("viarapi", "raw", sha, f"{url}/r.raw")]
    # the same gnt-os image list shows
    assert vc.ok("gnt-os", "image", "list", "--no-headers", "-o", "name,sha256",
                 "--separator=|", "viarapi").strip() == f"viarapi|{sha}"
    # a wrong checksum: the job fails, the store is unchanged
    job = rapi_helpers.wait_job(vc, _rapi(vc, "POST", "/2/os/images", {
        "name": "other", "source": f"{url}/r.raw", "checksum": "sha256:" + "0" * 64}))
    assert job["status"] == "error" and "checksum mismatch" in str(job["opresult"])
    assert "other" not in _store_files(vc)
    job = rapi_helpers.wait_job(vc, _rapi(vc, "DELETE", "/2/os/images/viarapi"))
    assert job["status"] == "success", job["opresult"]
    assert "viarapi" not in _store_files(vc)
    job = rapi_helpers.wait_job(vc, _rapi(vc, "DELETE", "/2/os/images/viarapi"))
    assert job["status"] == "error" and "not in the image store" in str(job["opresult"])


def _index(vc, node) -> str | None:
    try:
        with open(vc.paths(node).os_image_store_index) as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def test_the_store_follows_the_master_role(vc, images):
    # doc/images.md, "Replication": bytes in the candidates' node caches, then the index
    top, url = images
    first = _raw(top / "one.raw", size=2 * MIB)
    second = _raw(top / "two.raw", size=2 * MIB)
    sha1, sha2 = (hashlib.sha256(d).hexdigest() for d in (first, second))
    vc.ok("gnt-os", "image", "add", "one", str(top / "one.raw"))
    assert sha1 not in _node_dir(vc, N2, "os_image_cache_dir")      # not a candidate yet
    assert _index(vc, N2) is None
    # promoted (here by the pool size): it gets the bytes, then the index
    out = vc.ok("gnt-cluster", "modify", "--candidate-pool-size", "10")
    assert "OS image one: copied to master candidate node2.vcluster" in out, out
    assert sha1 in _node_dir(vc, N2, "os_image_cache_dir")
    assert _index(vc, N2) == _index(vc, N1)
    # a copy the candidate lost: gnt-cluster redist-conf sends it again
    os.unlink(os.path.join(vc.paths(N2).os_image_cache_dir, sha1))
    out = vc.ok("gnt-cluster", "redist-conf")
    assert "OS image one: copied to master candidate node2.vcluster" in out, out
    with open(os.path.join(vc.paths(N2).os_image_cache_dir, sha1), "rb") as fh:
        assert fh.read() == first
    # an image added now goes to the candidate at once, the index after it
    out = vc.ok("gnt-os", "image", "add", "two", str(top / "two.raw"))
    assert "OS image two: copied to master candidate node2.vcluster" in out, out
    assert sha2 in _node_dir(vc, N2, "os_image_cache_dir")
    assert _index(vc, N2) == _index(vc, N1) and '"two"' in _index(vc, N2)
    with open(os.path.join(vc.paths(N2).os_image_cache_dir, sha2), "rb") as fh:
        assert fh.read() == second
    # node2 takes the master role over: it lists the store and installs from it on node1
    code, text = failover(vc, N2)
    assert code == 0, text
    assert vc.ok("gnt-os", "image", "list", "--no-headers", "-o", "name,sha256",
                 "--separator=|", node=N2).split() == [f"one|{sha1}", f"two|{sha2}"]
    out = vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", N1,
                "--no-start", *NOCHECK, "--os-image", "two", "rep1.example.com", node=N2)
    assert _disk0(vc, N1, "rep1.example.com")[:2 * MIB] == second
    # a removal on the new master reaches the old one's index (now a candidate)
    vc.ok("gnt-os", "image", "remove", "one", node=N2)
    assert '"one"' not in _index(vc, N1) and _index(vc, N1) == _index(vc, N2)
    vc.ok("gnt-instance", "remove", "-f", "rep1.example.com", node=N2)
    code, text = failover(vc, N1)
    assert code == 0, text
