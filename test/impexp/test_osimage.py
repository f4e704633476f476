"""Recognising OS images and their checksums (ganeti/impexp/osimage.py)."""

from __future__ import annotations

import struct

import pytest

from ganeti import errors
from ganeti.impexp import osimage


def _at(offset: int, data: bytes, size: int = osimage.HEADER_SIZE) -> bytes:
    buf = bytearray(size)
    buf[offset:offset + len(data)] = data
    return bytes(buf)


def test_qcow2_and_its_virtual_size():
    header = b"QFI\xfb" + struct.pack(">I", 3) + bytes(16) + struct.pack(">Q", 5 << 30)
    assert osimage.detect_format(header) == "qcow2"
    assert osimage.virtual_size(header, 1234) == 5 << 30


@pytest.mark.parametrize("offset,magic", [(510, b"\x55\xaa"), (512, b"EFI PART"),
                                          (1080, b"\x53\xef"), (0, b"XFSB"),
                                          (32769, b"CD001")])
def test_raw_is_a_partition_table_or_a_file_system(offset, magic):
    header = _at(offset, magic)
    assert osimage.detect_format(header) == "raw"
    assert osimage.virtual_size(header, 4096) == 4096


def test_anything_else_is_refused():
    assert osimage.detect_format(bytes(osimage.HEADER_SIZE)) is None
    assert osimage.detect_format(b"\x1f\x8b\x08" + bytes(600)) is None   # gzip
    assert osimage.facts(b"hello", 5, "ab")["format"] is None


def test_checksum_syntax():
    digest = "AB" * 32
    assert osimage.parse_checksum(f"sha256:{digest}") == digest.lower()
    for bad in ("md5:" + "a" * 32, "sha256:xyz", "a" * 64):
        with pytest.raises(errors.OpPrereqError, match="Invalid OS image checksum"):
            osimage.parse_checksum(bad)
