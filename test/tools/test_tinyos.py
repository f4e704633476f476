"""The tinyos OS definition's export/import scripts (tools/os/tinyos/README), run as
the node runs them: environment in, disk data on stdin/stdout."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

TINYOS = pathlib.Path(__file__).resolve().parents[2] / "tools" / "os" / "tinyos"
MIB = 1 << 20


def _run(script: str, env: dict[str, str], data: bytes = b"") -> bytes:
    res = subprocess.run(["sh", str(TINYOS / script)], input=data, capture_output=True,
                         env={"PATH": os.environ["PATH"], "INSTANCE_NAME": "inst1", **env},
                         check=False)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


def _disk(tmp_path: pathlib.Path, name: str, size: int) -> str:
    path = tmp_path / name
    with open(path, "wb") as fh:
        fh.truncate(size)
    return str(path)


@pytest.mark.parametrize("variant, exported", [("default", 4 * MIB), ("compact", MIB)])
def test_export_writes_the_whole_disk_or_the_compact_image(tmp_path, variant, exported):
    disk = _disk(tmp_path, "d0", 4 * MIB)
    _run("create", {"DISK_COUNT": "1", "DISK_0_PATH": disk, "OS_VARIANT": variant})
    with open(disk, "r+b") as fh:           # data past the image: only a whole-disk export has it
        fh.seek(3 * MIB)
        fh.write(b"user data")
    out = _run("export", {"EXPORT_DISK_PATH": disk, "EXPORT_INDEX": "0",
                          "OS_VARIANT": variant})
    assert len(out) == exported and out.startswith(b"TINYOS-BOOT")
    assert f"variant={variant}".encode() in out[4096:4608]
    assert (b"user data" in out) is (variant == "default")


def test_a_compact_export_of_a_grown_disk_imports_into_a_smaller_one(tmp_path):
    grown = _disk(tmp_path, "grown", 40 * MIB)
    _run("create", {"DISK_COUNT": "1", "DISK_0_PATH": grown, "OS_VARIANT": "compact"})
    image = _run("export", {"EXPORT_DISK_PATH": grown, "OS_VARIANT": "compact"})
    small = _disk(tmp_path, "small", 32 * MIB)
    _run("import", {"IMPORT_DISK_PATH": small, "IMPORT_INDEX": "0", "OS_VARIANT": "compact"},
         image)
    with open(small, "rb") as fh:
        assert fh.read(MIB) == image
    assert os.path.getsize(small) == 32 * MIB
