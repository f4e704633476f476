"""Tampered exports on a real 2-node virtual cluster: what an import must refuse.

An instance is exported once (the *pristine* export, with its per-disk
SHA-256 in ``config.ini``); each test copies it to an export of its own
name on the export node, tampers with the copy on disk, and imports it
with ``gnt-backup import`` the way an operator does.  A refused import
fails the job with a message naming the export and file (never this
node's local paths), and leaves neither an instance nor a disk file;
no disk file ever ends larger than its declared size (doc/exports.md,
"Trusting an import").
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import time

import pytest
from instance_helpers import NOCHECK, disk_files, install_os, rows, status_of
from vcluster_harness import VirtualCluster

from ganeti.impexp import info as exportinfo

pytestmark = pytest.mark.timeout(300)

N1, N2 = "node1.vcluster", "node2.vcluster"
SRC = "tsrc.example.com"
MIB = 1 << 20
DISK_MIB = 1


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vct"), nodes=2, use_ssh=False) as cluster:
        cluster.ok("gnt-instance", "add", "-t", "file", "--disk", f"0:size={DISK_MIB}M",
                   "-o", "tinyos", "-n", N1, *NOCHECK, SRC)
        (disk,) = disk_files(cluster, N1, SRC)
        with open(disk, "r+b") as fh:          # recognisable content
            fh.write(bytes(range(256)) * 1024)
        cluster.ok("gnt-backup", "export", "-n", N2, SRC)
        cluster.ok("gnt-instance", "remove", "-f", SRC)
        yield cluster


def _export_dir(vc, name: str) -> str:
    return os.path.join(vc.paths(N2).export_dir, name)


def _copy(vc, name: str) -> tuple[str, exportinfo.ExportInfo, str]:
    """A copy of the pristine export as ``name``: (directory, its info, the disk 0 image)."""
    directory = _export_dir(vc, name)
    shutil.copytree(_export_dir(vc, SRC), directory)
    with open(os.path.join(directory, "config.ini")) as fh:
        info = exportinfo.parse(fh.read())
    assert info.disks[0].dump is not None
    return directory, info, os.path.join(directory, info.disks[0].dump)


def _set_key(directory: str, key: str, value: str | None) -> None:
    """Set (or with None drop) ``key`` in the ``[instance]`` section of config.ini."""
    conf = os.path.join(directory, "config.ini")
    with open(conf) as fh:
        lines = [line for line in fh.read().splitlines()
                 if not line.startswith(f"{key} =")]
    if value is not None:
        at = lines.index("[instance]") + 1
        lines.insert(at, f"{key} = {value}")
    with open(conf, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def _sha(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _import(vc, export: str, name: str, *extra: str):
    return vc.run("gnt-backup", "import", "-n", N1, "--src-node", N2, "--src-dir", export,
                  *extra, *NOCHECK, name, timeout=180)


def _refused(vc, export: str, name: str, *needles: str) -> str:
    """Import ``export`` as ``name``; assert it failed with ``needles`` and left nothing."""
    res = _import(vc, export, name)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    for needle in needles:
        assert needle in out, out
    for node in (N1, N2):       # no local path of any node in what the operator sees
        assert vc.paths(node).root not in out, out
    assert name not in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").split()
    assert disk_files(vc, N1, name) == []
    assert os.path.isdir(_export_dir(vc, export))   # the export itself is left as it was
    return out


def _no_file_larger_than_declared(vc) -> None:
    for path in glob.glob(os.path.join(vc.paths(N1).root, "srv", "**", "*.file.disk*"),
                          recursive=True):
        assert os.path.getsize(path) <= DISK_MIB * MIB, path


def test_the_pristine_export_records_checksums_and_imports(vc):
    directory, info, image = _copy(vc, "tgood")
    assert info.disks[0].sha256 == _sha(image)
    assert f"disk0_sha256 = {_sha(image)}" in open(os.path.join(directory, "config.ini")).read()
    out = _import(vc, "tgood", "tgood.example.com")
    assert out.returncode == 0, out.stdout + out.stderr
    assert status_of(vc, "tgood.example.com") == "running"
    (disk,) = disk_files(vc, N1, "tgood.example.com")
    assert _sha(disk) == _sha(image) and os.path.getsize(disk) == DISK_MIB * MIB
    vc.ok("gnt-instance", "remove", "-f", "tgood.example.com")


def test_a_flipped_byte_is_refused(vc):
    _, _, image = _copy(vc, "tflip")
    with open(image, "r+b") as fh:
        fh.seek(4242)
        byte = fh.read(1)
        fh.seek(4242)
        fh.write(bytes([byte[0] ^ 0x01]))
    _refused(vc, "tflip", "tflip.example.com", "SHA-256 mismatch",
             "export tflip, file ", "config.ini records")


def test_a_truncated_image_is_refused(vc):
    _, _, image = _copy(vc, "ttrunc")
    os.truncate(image, 300 * 1024)
    _refused(vc, "ttrunc", "ttrunc.example.com", "SHA-256 mismatch")


def test_appended_data_is_refused_also_with_a_matching_checksum(vc):
    directory, _, image = _copy(vc, "tappend")
    with open(image, "ab") as fh:
        fh.write(b"\xee" * 4096)
    _refused(vc, "tappend", "tappend.example.com", "is larger than the disk")
    # whoever appended also fixed the checksum: the size still refuses it
    _set_key(directory, "disk0_sha256", _sha(image))
    _refused(vc, "tappend", "tappend.example.com", "is larger than the disk",
             f"({DISK_MIB * MIB} bytes, its declared size)")
    _no_file_larger_than_declared(vc)


def test_an_oversized_image_on_os_import_never_grows_the_disk(vc):
    directory, _, image = _copy(vc, "tbig")
    with open(image, "ab") as fh:
        fh.write(os.urandom(7 * MIB))
    _set_key(directory, "disk0_sha256", None)   # an old export: no checksum either
    out = _refused(vc, "tbig", "tbig.example.com", "is larger than the disk")
    assert "records no checksum for disk 0" in out
    _no_file_larger_than_declared(vc)


def test_an_os_import_script_growing_the_disk_is_refused(vc):
    # the script reads a fitting image, then makes the file larger on its own
    install_os(vc, "growos", {"import": "#!/bin/sh\ncat >/dev/null\n"
                              "truncate -s 8M \"$IMPORT_DISK_PATH\"\n"})
    directory, _, _ = _copy(vc, "tgrow")
    with open(os.path.join(directory, "config.ini")) as fh:
        text = fh.read().replace("os = tinyos", "os = growos")
    with open(os.path.join(directory, "config.ini"), "w") as fh:
        fh.write(text)
    _refused(vc, "tgrow", "tgrow.example.com", "left the disk at 8388608 bytes",
             f"larger than its declared {DISK_MIB * MIB} bytes")


def _without_os(directory: str) -> None:
    """Make the export one of an instance without OS: its import copies raw."""
    conf = os.path.join(directory, "config.ini")
    with open(conf) as fh:
        text = fh.read().replace("os = tinyos", "os = ")
    with open(conf, "w") as fh:
        fh.write(text)


def test_the_raw_path_checks_the_checksum_and_the_size_too(vc):
    directory, _, image = _copy(vc, "traw")
    _without_os(directory)
    name = "traw.example.com"
    res = _import(vc, "traw", name)
    assert res.returncode == 0, res.stdout + res.stderr
    assert rows(vc, "name,os", name) == [[name, ""]]   # no OS: copied raw
    (disk,) = disk_files(vc, N1, name)
    assert _sha(disk) == _sha(image)
    vc.ok("gnt-instance", "remove", "-f", name)
    with open(image, "r+b") as fh:
        fh.seek(77)
        fh.write(b"\x00\xff")
    _refused(vc, "traw", name, "SHA-256 mismatch")
    with open(image, "ab") as fh:
        fh.write(b"\xee" * 512)
    _set_key(directory, "disk0_sha256", _sha(image))
    _refused(vc, "traw", name, "is larger than the disk")
    _no_file_larger_than_declared(vc)


def test_a_dump_name_of_another_export_is_refused(vc):
    directory, info, _ = _copy(vc, "tother")
    _set_key(directory, "disk0_dump", f"../{SRC}/{info.disks[0].dump}")
    out = _refused(vc, "tother", "tother.example.com", "key disk0_dump in [instance]",
                   "is not a file name of the export's own directory")
    assert re.search(r"config.ini line \d+, key disk0_dump", out), out


def test_a_symlink_to_another_exports_image_is_refused(vc):
    _, info, image = _copy(vc, "tlink")
    os.unlink(image)
    os.symlink(os.path.join(_export_dir(vc, SRC), str(info.disks[0].dump)), image)
    _refused(vc, "tlink", "tlink.example.com", "is a symbolic link")


def test_a_fifo_image_is_refused_at_once(vc):
    _, _, image = _copy(vc, "tfifo")
    os.unlink(image)
    os.mkfifo(image)
    # no hang (vc.run bounds it): nothing ever opens the FIFO for writing
    _refused(vc, "tfifo", "tfifo.example.com", "is a FIFO, not a regular file")


def test_a_bad_config_is_described_without_its_bytes(vc):
    directory, _, _ = _copy(vc, "tbadconf")
    conf = os.path.join(directory, "config.ini")
    with open(conf, "rb") as fh:
        data = fh.read()
    with open(conf, "wb") as fh:
        fh.write(data.replace(b"disk0_size = 1", b"disk0_size = \x1b[2J\x07SECRETBYTES"))
    out = _refused(vc, "tbadconf", "tbadconf.example.com", "key disk0_size in [instance]",
                   "invalid size of disk 0")
    assert "\x1b" not in out and "\x07" not in out
    assert re.search(r"config.ini line \d+, key disk0_size", out), out
    with open(conf, "wb") as fh:
        fh.write(data.replace(b"[instance]", b"[instance]\n\xff\xfe garbage"))
    out = _refused(vc, "tbadconf", "tbadconf.example.com", "export tbadconf, file 'config.ini'",
                   "is not UTF-8 text")
    assert "garbage" not in out


def test_an_os_export_writing_more_than_the_disk_fails(vc):
    install_os(vc, "bigexport", {"export": "#!/bin/sh\nhead -c 1100000 /dev/zero\n"})
    name = "tbigexp.example.com"
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=1M", "-o", "bigexport",
          "-n", N1, *NOCHECK, name)
    res = vc.run("gnt-backup", "export", "-n", N2, name)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "is larger than the disk (1048576 bytes" in out, out
    assert name not in vc.ok("gnt-backup", "list", "--no-headers")
    assert glob.glob(os.path.join(vc.paths(N2).export_dir, name + "*")) == []
    assert status_of(vc, name) == "running"
    vc.ok("gnt-instance", "remove", "-f", name)


def test_an_export_killed_mid_copy_ends_canceled(vc):
    """``gnt-job cancel --kill`` stops a running transfer: the job ends canceled, the
    instance runs again, no export is left."""
    slow = ("#!/bin/sh\ndd if=\"$EXPORT_DISK_PATH\" bs=65536 count=1 2>/dev/null\n"
            "i=0\nwhile [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n")
    install_os(vc, "stallos", {"export": slow})
    name = "tkill.example.com"
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=1M", "-o", "stallos", "-n", N1,
          *NOCHECK, name)
    res = vc.run("gnt-backup", "export", "--submit", "-n", N2, name)
    assert res.returncode == 0, res.stderr
    job = res.stderr.split("JobID:")[1].split()[0]
    deadline = time.monotonic() + 60
    while "disk/0: sending" not in vc.ok("gnt-job", "info", job):
        assert time.monotonic() < deadline, vc.ok("gnt-job", "info", job)
        time.sleep(0.2)
    vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", job)
    vc.run("gnt-job", "watch", job, timeout=90)
    deadline = time.monotonic() + 60
    status = ""
    while time.monotonic() < deadline:
        status = vc.ok("gnt-job", "list", "--no-headers", "-o", "status", job).strip()
        if status not in ("running", "canceling"):
            break
        time.sleep(0.2)
    assert status == "canceled", vc.ok("gnt-job", "info", job)
    assert "transfer interrupted" in vc.ok("gnt-job", "info", job)
    assert status_of(vc, name) == "running"
    assert name not in vc.ok("gnt-backup", "list", "--no-headers")
    assert glob.glob(os.path.join(vc.paths(N2).export_dir, name + ".new*")) == []
    (row,) = rows(vc, "status", name)
    assert row == ["running"]


def test_an_import_killed_mid_copy_ends_canceled_and_leaves_nothing(vc):
    """The case of the report: an import that does not progress, killed, used to stay
    ``canceling``; now it ends ``canceled`` and the new instance is gone again."""
    stall = ("#!/bin/sh\ni=0\nwhile [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n"
             "cat >/dev/null\n")
    install_os(vc, "stallimport", {"import": stall})
    directory, _, _ = _copy(vc, "tkillimp")
    conf = os.path.join(directory, "config.ini")
    with open(conf) as fh:
        text = fh.read().replace("os = tinyos", "os = stallimport")
    with open(conf, "w") as fh:
        fh.write(text)
    name = "tkillimp.example.com"
    res = vc.run("gnt-backup", "import", "--submit", "-n", N1, "--src-node", N2, "--src-dir",
                 "tkillimp", *NOCHECK, name)
    assert res.returncode == 0, res.stderr
    job = res.stderr.split("JobID:")[1].split()[0]
    deadline = time.monotonic() + 60
    while "disk/0: sending" not in vc.ok("gnt-job", "info", job):
        assert time.monotonic() < deadline, vc.ok("gnt-job", "info", job)
        time.sleep(0.2)
    vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", job)
    vc.run("gnt-job", "watch", job, timeout=90)
    deadline = time.monotonic() + 60
    status = ""
    while time.monotonic() < deadline:
        status = vc.ok("gnt-job", "list", "--no-headers", "-o", "status", job).strip()
        if status not in ("running", "canceling"):
            break
        time.sleep(0.2)
    assert status == "canceled", vc.ok("gnt-job", "info", job)
    assert name not in vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").split()
    assert disk_files(vc, N1, name) == []
