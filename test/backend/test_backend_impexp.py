"""Export directories and the receiving side of a disk stream, on a temporary node root."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time

import pytest

from ganeti import errors, serializer
from ganeti.impexp import stream as diskstream
from ganeti.backend import blockdev, impexp
from ganeti.objects import Disk
from ganeti.storage.filestorage import file_logical_id


def _stream(data: bytes, *, sha: str | None = None, size: int | None = None,
            end: bool = True, abort: str | None = None, name: str = "i1") -> bytes:
    out = diskstream.encode_json(diskstream.HEADER, {
        "dest": {"kind": "export", "instance_name": name, "file": "img.disk0"},
        "total": len(data)})
    for i in range(0, len(data), 1000):
        out += diskstream.encode(diskstream.DATA, data[i:i + 1000])
    if abort is not None:
        out += diskstream.encode_json(diskstream.ABORT, {"error": abort})
    elif end:
        out += diskstream.encode_json(diskstream.END, {
            "size": len(data) if size is None else size,
            "sha256": sha or hashlib.sha256(data).hexdigest()})
    return out


def _receive(ctx, raw: bytes) -> list:
    chunks = [raw[i:i + 777] for i in range(777, len(raw), 777)]
    return impexp.receive_stream(ctx, raw[:777], lambda n: chunks.pop(0) if chunks else b"")


def _staging(ctx) -> str:
    return os.path.join(ctx.paths.export_dir, "i1.new")


def test_a_good_stream_is_renamed_into_place(ctx) -> None:
    impexp.export_stage(ctx, "i1", True)
    data = os.urandom(5000)
    assert _receive(ctx, _stream(data)) == [True, {"size": 5000,
                                                   "sha256": hashlib.sha256(data).hexdigest()}]
    assert os.listdir(_staging(ctx)) == ["img.disk0"]
    assert open(os.path.join(_staging(ctx), "img.disk0"), "rb").read() == data


@pytest.mark.parametrize("kwargs, message", [
    ({"sha": "0" * 64}, "Checksum mismatch"),
    ({"size": 1}, "Checksum mismatch"),
    ({"end": False}, "before its end frame"),
    ({"abort": "OS export script failed"}, "The sender gave up: OS export script failed"),
], ids=["checksum", "size", "cut-short", "aborted"])
def test_a_bad_stream_leaves_no_image(ctx, kwargs, message) -> None:
    impexp.export_stage(ctx, "i1", True)
    ok, why = _receive(ctx, _stream(os.urandom(3000), **kwargs))
    assert not ok and message in why
    assert os.listdir(_staging(ctx)) == []


def test_a_stream_without_export_in_progress_is_refused(ctx) -> None:
    ok, why = _receive(ctx, _stream(b"x"))
    assert not ok and "No export of i1 in progress" in why


def test_export_list_hides_staging_and_finalize_replaces(ctx) -> None:
    impexp.export_stage(ctx, "i1", True)
    assert impexp.export_list(ctx) == []
    assert impexp.finalize_export(ctx, "i1", "[export]\n") == "/srv/ganeti/export/i1"
    assert impexp.export_list(ctx) == ["i1"]
    assert impexp.export_info(ctx, "i1") == "[export]\n"
    impexp.export_stage(ctx, "i1", True)
    open(os.path.join(_staging(ctx), "new.img"), "w").close()
    impexp.finalize_export(ctx, "i1", "[export]\nversion = 0\n")
    assert sorted(os.listdir(os.path.join(ctx.paths.export_dir, "i1"))) == ["config.ini",
                                                                           "new.img"]
    assert os.listdir(ctx.paths.export_dir) == ["i1"]
    impexp.export_remove(ctx, "i1")
    assert impexp.export_list(ctx) == []
    with pytest.raises(errors.OpExecError, match="No export named i1"):
        impexp.export_remove(ctx, "i1")


@pytest.mark.parametrize("name", ["../x", ".hidden", "a/b", ""])
def test_bad_export_names_are_refused(ctx, name) -> None:
    with pytest.raises(errors.OpExecError, match="Invalid"):
        impexp.export_remove(ctx, name)


def test_export_info_stays_inside_the_export_dir(ctx) -> None:
    with pytest.raises(errors.OpExecError, match="not inside"):
        impexp.export_info(ctx, "/var/lib/ganeti")


def test_a_dead_sender_is_reported_failed(ctx) -> None:
    directory = os.path.join(ctx.paths.import_export_dir, "t1")
    os.makedirs(directory)
    proc = subprocess.Popen(["true"])
    proc.wait()
    with open(os.path.join(directory, impexp.PID_FILE), "w") as fh:
        fh.write(str(proc.pid))
    with open(os.path.join(directory, "worker.log"), "w") as fh:
        fh.write("Traceback: boom\n")
    (status,) = impexp.impexp_status(ctx, ["t1"])
    assert status["state"] == "failed" and "died" in status["error"] and "boom" in status["error"]
    assert impexp.impexp_status(ctx, ["nope"]) == [None]
    impexp.impexp_cleanup(ctx, "t1")
    assert not os.path.exists(directory)


def test_cleanup_waits_for_a_stopped_transfer_that_still_writes(ctx) -> None:
    """A transfer process that writes its last status as it stops (as the worker does on
    SIGTERM) is waited for: its state directory goes whole."""
    directory = os.path.join(ctx.paths.import_export_dir, "t2")
    os.makedirs(directory)
    script = ("import os, signal, sys, time\n"
              "def stop(*_):\n"
              "    time.sleep(0.3)\n"
              "    open(os.path.join(sys.argv[1], 'status.json.tmp'), 'w').write('{}')\n"
              "    sys.exit(0)\n"
              "signal.signal(signal.SIGTERM, stop)\n"
              "open(os.path.join(sys.argv[1], 'ready'), 'w').close()\n"
              "while True: time.sleep(1)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, directory], start_new_session=True)
    try:
        while not os.path.exists(os.path.join(directory, "ready")):
            assert proc.poll() is None
            time.sleep(0.01)
        with open(os.path.join(directory, impexp.PID_FILE), "w") as fh:
            fh.write(str(proc.pid))
        impexp.impexp_cleanup(ctx, "t2")
        assert not os.path.exists(directory)
        assert proc.wait(5) == 0     # it stopped by itself, after its last write
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- reading an export: its own files only, regular files only -----------------------------

def _export(ctx, name: str = "e1", files: dict[str, bytes] | None = None) -> str:
    directory = os.path.join(ctx.paths.export_dir, name)
    os.makedirs(directory)
    for fname, data in (files or {}).items():
        with open(os.path.join(directory, fname), "wb") as fh:
            fh.write(data)
    return directory


def test_an_export_file_opens_with_its_size_and_label(ctx) -> None:
    _export(ctx, files={"img": b"x" * 300})
    fh, size, label = impexp.open_export_file(ctx, "e1", "img")
    with fh:
        assert (fh.read(), size, label) == (b"x" * 300, 300, "export e1, file 'img'")
    fh, _, label = impexp.open_export_file(ctx, "/srv/ganeti/export/e1", "img")
    fh.close()
    assert label == "export e1, file 'img'"


def _special(ctx, kind: str, path: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
        sock.close()
    elif kind == "symlink":
        os.symlink(os.path.join(ctx.paths.export_dir, "e2", "img"), path)


@pytest.mark.parametrize("kind, message", [
    ("fifo", "is a FIFO, not a regular file"),
    ("directory", "is a directory, not a regular file"),
    ("socket", "is a socket or device without a reader"),
    ("symlink", "is a symbolic link"),
])
def test_special_files_are_refused_at_once(ctx, kind, message) -> None:
    directory = _export(ctx)
    _export(ctx, "e2", {"img": b"other export"})
    _special(ctx, kind, os.path.join(directory, "img"))
    with pytest.raises(errors.OpExecError, match=message) as exc:
        impexp.open_export_file(ctx, "e1", "img")   # a FIFO does not block
    assert str(exc.value).startswith("export e1, file 'img' ")
    assert ctx.paths.root not in str(exc.value)


@pytest.mark.parametrize("name", ["../e2/img", "/srv/ganeti/export/e2/img", ".img", ""])
def test_image_names_stay_in_their_export(ctx, name) -> None:
    _export(ctx, files={"img": b"x"})
    _export(ctx, "e2", {"img": b"other export"})
    with pytest.raises(errors.OpExecError, match="not a file name of the export's own"):
        impexp.open_export_file(ctx, "e1", name)


def test_an_export_directory_linking_out_is_refused(ctx) -> None:
    outside = os.path.join(ctx.paths.root, "elsewhere")
    os.makedirs(outside)
    with open(os.path.join(outside, "config.ini"), "w") as fh:
        fh.write("[export]\n")
    os.makedirs(ctx.paths.export_dir)
    os.symlink(outside, os.path.join(ctx.paths.export_dir, "e1"))
    with pytest.raises(errors.OpExecError, match="not inside the export directory") as exc:
        impexp.export_info(ctx, "e1")
    assert ctx.paths.root not in str(exc.value)


def test_a_config_that_is_not_utf8_names_the_line_only(ctx) -> None:
    _export(ctx, files={"config.ini": b"[export]\nversion = 0\nos = \xff\xfe\x1b[2J\n"})
    with pytest.raises(errors.OpExecError) as exc:
        impexp.export_info(ctx, "e1")
    assert str(exc.value) == "export e1, file 'config.ini': line 3 is not UTF-8 text"


def test_a_missing_export_names_it_relative(ctx) -> None:
    os.makedirs(ctx.paths.export_dir)
    with pytest.raises(errors.OpExecError, match="export e9, file 'config.ini' cannot be"
                       " opened: No such file") as exc:
        impexp.export_info(ctx, "e9")
    assert ctx.paths.root not in str(exc.value)


# --- receiving an import: the declared size and the recorded checksum ------------------------

MIB = 1024 * 1024


def _import_stream(ctx, data: bytes, *, sha: str | None, total: int | None = None,
                   size_mib: int = 1) -> tuple[list, str]:
    lid = list(file_logical_id("/srv/ganeti/file-storage", "imp1", "d1", 0))
    disk = serializer.to_data(Disk(uuid="d1", dev_type="file", size=size_mib, logical_id=lid))
    blockdev.blockdev_create(ctx, disk, size_mib, "imp1", True, "", False)
    instance = {"name": "imp1", "os": None, "disks_info": [disk]}
    out = diskstream.encode_json(diskstream.HEADER, {
        "dest": {"kind": "import", "instance": instance, "index": 0, "sha256": sha,
                 "label": "disk/0 (export e1, file img)"},
        "total": len(data) if total is None else total})
    for i in range(0, len(data), diskstream.MAX_DATA):
        out += diskstream.encode(diskstream.DATA, data[i:i + diskstream.MAX_DATA])
    out += diskstream.encode_json(diskstream.END, {"size": len(data),
                                                   "sha256": hashlib.sha256(data).hexdigest()})
    _, path = blockdev.assemble_disk(ctx, disk, "imp1", 0)
    return _receive(ctx, out), path


def test_an_image_with_its_recorded_checksum_is_written(ctx) -> None:
    data = os.urandom(5000)
    (ok, _), path = _import_stream(ctx, data, sha=hashlib.sha256(data).hexdigest())
    assert ok
    with open(path, "rb") as fh:
        assert fh.read(5000) == data
    assert os.path.getsize(path) == MIB


def test_an_image_not_matching_its_recorded_checksum_is_refused(ctx) -> None:
    data = os.urandom(5000)
    (ok, why), _ = _import_stream(ctx, data, sha=hashlib.sha256(b"other").hexdigest())
    assert not ok
    assert why.startswith("disk/0 (export e1, file img): SHA-256 mismatch") and "refused" in why


@pytest.mark.parametrize("total", [MIB + 1, 0], ids=["announced", "unannounced"])
def test_an_image_larger_than_the_disk_is_refused(ctx, total) -> None:
    (ok, why), path = _import_stream(ctx, b"y" * (MIB + 1), sha=None, total=total)
    assert not ok and "is larger than the disk (1048576 bytes" in why
    assert os.path.getsize(path) == MIB          # never grown


def test_check_total_is_pure() -> None:
    impexp.check_total(MIB, MIB, "x")
    impexp.check_total(None, MIB, "x")
    impexp.check_total(5 * MIB, None, "x")
    with pytest.raises(errors.OpExecError, match="x: the image"):
        impexp.check_total(MIB + 1, MIB, "x")
    assert impexp.disk_bytes({"size": 2}) == 2 * MIB and impexp.disk_bytes({}) is None


def test_an_export_image_larger_than_its_disk_is_refused(ctx) -> None:
    impexp.export_stage(ctx, "i1", True)
    raw = diskstream.encode_json(diskstream.HEADER, {
        "dest": {"kind": "export", "instance_name": "i1", "file": "img.disk0", "limit": 2000,
                 "label": "disk/0"}, "total": 2000})
    raw += diskstream.encode(diskstream.DATA, b"z" * 1500) * 2
    ok, why = _receive(ctx, raw)
    assert not ok and why == ("disk/0: the image is larger than the disk (2000 bytes, its"
                              " declared size); refused")
    assert os.listdir(_staging(ctx)) == []


# --- a kvm instance's UEFI/TPM state between clusters (doc/exports.md) ---

FW_UUID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"


def _firmware_stream(data: bytes, uuid: str = FW_UUID, sha: str | None = None) -> bytes:
    out = diskstream.encode_json(diskstream.HEADER, {
        "dest": {"kind": "firmware", "instance_uuid": uuid}, "total": len(data)})
    for i in range(0, len(data), 1000):
        out += diskstream.encode(diskstream.DATA, data[i:i + 1000])
    return out + diskstream.encode_json(diskstream.END, {
        "size": len(data), "sha256": sha or hashlib.sha256(data).hexdigest()})


def test_the_firmware_state_travels_as_a_stream_and_is_unpacked(ctx, tmp_path) -> None:
    from ganeti.backend.context import NodeContext
    from ganeti.pathutils import Paths
    src = NodeContext(paths=Paths(str(tmp_path / "src")), hostname="src")
    sdir = impexp.firmware_state_dir(src, {"instance_uuid": "src-uuid"})
    os.makedirs(os.path.join(sdir, "tpm"))
    files = {"OVMF_VARS.fd": b"vars\0" * 300, "tpm/tpm2-00.permall": b"tpm state"}
    for name, data in files.items():
        with open(os.path.join(sdir, name), "wb") as fh:
            fh.write(data)
    data = impexp.firmware_state_bytes(src, {"kind": "firmware", "instance_uuid": "src-uuid"})
    assert _receive(ctx, _firmware_stream(data))[0] is True
    dst = os.path.join(ctx.paths.kvm_firmware_dir, FW_UUID)
    for name, content in files.items():
        with open(os.path.join(dst, name), "rb") as fh:
            assert fh.read() == content
    # a source without state sends nothing: nothing is made here
    assert impexp.firmware_state_bytes(src, {"instance_uuid": "other"}) == b""
    assert _receive(ctx, _firmware_stream(b"", uuid="other-uuid"))[0] is True
    assert not os.path.exists(os.path.join(ctx.paths.kvm_firmware_dir, "other-uuid"))


def test_a_bad_firmware_stream_changes_nothing(ctx) -> None:
    ok, why = _receive(ctx, _firmware_stream(b"not a tar.gz"))
    assert ok is False and "Bad firmware state archive" in str(why)
    assert not os.path.exists(os.path.join(ctx.paths.kvm_firmware_dir, FW_UUID))
    ok, why = _receive(ctx, _firmware_stream(b"x", uuid="../escape"))
    assert ok is False and "Bad firmware state destination" in str(why)
