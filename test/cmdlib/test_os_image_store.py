"""The master's image store on real files (ganeti/cmdlib/os_image_store.py) and
how an ``os-image`` naming a store image is checked (ganeti/cmdlib/os_image.py)."""

from __future__ import annotations

import hashlib
import http.server
import os
import threading

import pytest

from ganeti import errors
from ganeti.cmdlib import os_image, os_image_store
from ganeti.pathutils import Paths

MIB = 1024 * 1024


@pytest.fixture
def paths(tmp_path) -> Paths:
    return Paths(root=str(tmp_path / "master"))


def _raw(path, size: int = MIB, fill: bytes = b"A") -> bytes:
    data = bytearray(fill * size)
    data[510:512] = b"\x55\xaa"
    path.write_bytes(bytes(data))
    return bytes(data)


def _store_files(paths: Paths) -> list[str]:
    top = os.path.join(paths.os_image_store_dir, "images")
    return sorted(os.listdir(top)) if os.path.isdir(top) else []


def test_add_copies_checks_and_indexes(paths, tmp_path):
    data = _raw(tmp_path / "d.raw")
    digest = hashlib.sha256(data).hexdigest()
    entry = os_image_store.add_image(paths, "deb", str(tmp_path / "d.raw"), f"sha256:{digest}",
                                     now=1700000000.0)
    assert entry == {"name": "deb", "format": "raw", "size": MIB, "virtual_size": MIB,
                     "sha256": digest, "source": str(tmp_path / "d.raw"), "added": 1700000000.0}
    assert os_image_store.read_index(paths) == {"deb": entry}
    with open(os_image_store.image_path(paths, "deb"), "rb") as fh:
        assert fh.read() == data
    assert _store_files(paths) == ["deb"]
    assert os_image_store.lookup(paths, "deb") == entry


@pytest.mark.parametrize("make,checksum,match", [
    (lambda p: _raw(p), "sha256:" + "0" * 64, "checksum mismatch"),
    (lambda p: p.write_bytes(b"not an image" * 1000), None, "neither a qcow2"),
])
def test_a_refused_image_leaves_nothing(paths, tmp_path, make, checksum, match):
    make(tmp_path / "bad")
    with pytest.raises(errors.OpPrereqError, match=match):
        os_image_store.add_image(paths, "bad", str(tmp_path / "bad"), checksum)
    assert _store_files(paths) == []
    assert os_image_store.read_index(paths) == {}


def test_bad_sources_and_names(paths, tmp_path):
    _raw(tmp_path / "d.raw")
    with pytest.raises(errors.OpPrereqError, match="absolute path"):
        os_image_store.add_image(paths, "x", "d.raw", None)
    with pytest.raises(errors.OpPrereqError, match="Cannot copy"):
        os_image_store.add_image(paths, "x", str(tmp_path / "missing"), None)
    with pytest.raises(errors.OpPrereqError, match="only http"):
        os_image_store.add_image(paths, "x", "ftp://example.invalid/x", None)
    with pytest.raises(errors.OpPrereqError, match="Invalid image name"):
        os_image_store.add_image(paths, "../x", str(tmp_path / "d.raw"), None)
    with pytest.raises(errors.OpPrereqError, match="Invalid OS image checksum"):
        os_image_store.add_image(paths, "x", str(tmp_path / "d.raw"), "md5:00")
    assert _store_files(paths) == [] and os_image_store.read_index(paths) == {}


def test_duplicate_name_is_refused_and_the_first_kept(paths, tmp_path):
    first = _raw(tmp_path / "a.raw")
    _raw(tmp_path / "b.raw", fill=b"B")
    os_image_store.add_image(paths, "img", str(tmp_path / "a.raw"), None)
    with pytest.raises(errors.OpPrereqError, match="already in the store"):
        os_image_store.add_image(paths, "img", str(tmp_path / "b.raw"), None)
    with open(os_image_store.image_path(paths, "img"), "rb") as fh:
        assert fh.read() == first
    assert _store_files(paths) == ["img"]


def test_add_from_http(paths, tmp_path):
    data = _raw(tmp_path / "d.raw")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        entry = os_image_store.add_image(paths, "web", f"{url}/d.raw", None)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        with pytest.raises(errors.OpPrereqError, match="Cannot fetch"):
            os_image_store.add_image(paths, "gone", f"{url}/missing.raw", None)
    finally:
        server.shutdown()
        server.server_close()
    assert _store_files(paths) == ["web"]


def test_remove(paths, tmp_path):
    _raw(tmp_path / "d.raw")
    os_image_store.add_image(paths, "img", str(tmp_path / "d.raw"), None)
    with pytest.raises(errors.OpPrereqError, match="not in the image store"):
        os_image_store.remove_image(paths, "other")
    with os_image_store.using("img"):
        with pytest.raises(errors.OpPrereqError, match="being installed from"):
            os_image_store.remove_image(paths, "img")
    assert os_image_store.remove_image(paths, "img")["name"] == "img"
    assert _store_files(paths) == [] and os_image_store.read_index(paths) == {}


def test_check_local_image_resolves_store_names(paths, tmp_path):
    data = _raw(tmp_path / "d.raw", size=2 * MIB)
    digest = hashlib.sha256(data).hexdigest()
    os_image_store.add_image(paths, "img", str(tmp_path / "d.raw"), None)
    facts = os_image.check_local_image("img", None, 8, paths)
    assert (facts["format"], facts["sha256"], facts["virtual_size"]) == ("raw", digest, 2 * MIB)
    assert os_image.check_local_image("img", f"sha256:{digest}", 8, paths)["sha256"] == digest
    with pytest.raises(errors.OpPrereqError, match="checksum mismatch"):
        os_image.check_local_image("img", "sha256:" + "1" * 64, 8, paths)
    with pytest.raises(errors.OpPrereqError, match="larger than the first disk"):
        os_image.check_local_image("img", None, 1, paths)
    with pytest.raises(errors.OpPrereqError, match="not in the image store"):
        os_image.check_local_image("nosuch", None, 8, paths)
    with pytest.raises(errors.OpPrereqError, match="Invalid image name"):
        os_image.check_local_image("-bad", None, 8, paths)
    # a path and a URL are what they were
    assert os_image.check_local_image(str(tmp_path / "d.raw"), None, 8, paths)["sha256"] == digest
    assert os_image.check_local_image("http://x/y.raw", None, 8, paths) == {}


def test_a_failure_mid_copy_leaves_no_partial_file(paths, tmp_path, monkeypatch):
    # e.g. the store's disk filling up: the temporary copy goes, nothing is entered
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, fh):
            self.fh, self.written = fh, 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, block):
            self.written += len(block)
            if self.written > MIB:
                raise OSError(28, "No space left on device")
            return self.fh.write(block)

    monkeypatch.setattr(os_image_store.os, "fdopen", lambda fd, mode: FullDisk(
        real_fdopen(fd, mode)))
    _raw(tmp_path / "d.raw", size=3 * MIB)
    with pytest.raises(errors.OpPrereqError, match="No space left on device"):
        os_image_store.add_image(paths, "img", str(tmp_path / "d.raw"), None)
    assert _store_files(paths) == [] and os_image_store.read_index(paths) == {}


def test_stored_file_falls_back_to_the_replicated_cache_copy(paths, tmp_path):
    # a master that took the role over has the index and the node cache's copy
    # (doc/images.md, "Replication"), not images/<name>
    data = _raw(tmp_path / "d.raw")
    entry = os_image_store.add_image(paths, "deb", str(tmp_path / "d.raw"), None)
    assert os_image_store.stored_file(paths, "deb", entry) == \
        os_image_store.image_path(paths, "deb")
    os.makedirs(paths.os_image_cache_dir)
    cached = os.path.join(paths.os_image_cache_dir, entry["sha256"])
    os.rename(os_image_store.image_path(paths, "deb"), cached)
    assert os_image_store.stored_file(paths, "deb", entry) == cached
    with open(cached, "rb") as fh:
        assert fh.read() == data
    os.unlink(cached)
    with pytest.raises(errors.OpPrereqError, match="this master has no copy"):
        os_image_store.stored_file(paths, "deb", entry)
