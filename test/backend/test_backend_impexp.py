"""Export directories and the receiving side of a disk stream, on a temporary node root."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

from ganeti import diskstream, errors
from ganeti.backend import impexp


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
