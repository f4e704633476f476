"""OS images: what an image file is, and its checksum (pure; doc/images.md).

An image is recognised from its first :data:`HEADER_SIZE` bytes:

* ``qcow2``: the magic ``QFI\\xfb`` at offset 0; its virtual size (what it
  becomes once converted to raw) is the big-endian 64-bit field at 24;
* ``raw``: a whole-disk image, recognised by a partition table (an MBR boot
  signature ``55 aa`` at 510, or a GPT header ``EFI PART`` at 512) or a
  file system written to the whole disk (ext2/3/4, XFS, ISO 9660); its
  virtual size is its size.

Anything else (a tarball, a compressed image, text) is refused: written to a
disk it would not boot, and the mistake is cheaper to see before.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from ganeti import errors

__all__ = ["OS_IMAGE_PARAM", "CHECKSUM_PARAM", "HEADER_SIZE", "FORMATS", "URL_SCHEMES",
           "detect_format", "virtual_size", "parse_checksum", "is_url", "describe", "facts"]

#: the OS parameter naming an instance's image (Ganeti 3.0's name)
OS_IMAGE_PARAM = "os-image"
#: the OS parameter holding the image's expected ``sha256:HEX`` (ours)
CHECKSUM_PARAM = "os-image-checksum"
#: bytes of an image's start read to recognise it (ISO 9660's descriptor is at 32769)
HEADER_SIZE = 34816
FORMATS = ("raw", "qcow2")

_QCOW2_MAGIC = b"QFI\xfb"
_RAW_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (512, b"EFI PART", "GPT partition table"),
    (1080, b"\x53\xef", "ext2/3/4 file system"),
    (0, b"XFSB", "XFS file system"),
    (32769, b"CD001", "ISO 9660 file system"),
    (510, b"\x55\xaa", "MBR partition table"),
)
_CHECKSUM_RE = re.compile(r"^sha256:([0-9a-fA-F]{64})$")


def detect_format(header: bytes) -> str | None:
    """``"qcow2"``, ``"raw"`` or None (neither) from an image's first bytes."""
    if header[:4] == _QCOW2_MAGIC:
        return "qcow2"
    for offset, magic, _ in _RAW_SIGNATURES:
        if header[offset:offset + len(magic)] == magic:
            return "raw"
    return None


def describe(header: bytes) -> str:
    """A few words on what was recognised (for the job log)."""
    if header[:4] == _QCOW2_MAGIC:
        return "qcow2 image"
    for offset, magic, what in _RAW_SIGNATURES:
        if header[offset:offset + len(magic)] == magic:
            return f"raw image ({what})"
    return "unknown data"


def virtual_size(header: bytes, size: int) -> int:
    """Bytes the image takes once written to a disk (``size``: the file's size)."""
    if header[:4] == _QCOW2_MAGIC:
        if len(header) < 32:
            raise errors.OpPrereqError("Truncated qcow2 header", errors.ECODE_INVAL)
        return int(struct.unpack(">Q", header[24:32])[0])
    return size


def parse_checksum(text: str) -> str:
    """The lower-case hex digest of ``sha256:HEX``; :class:`errors.OpPrereqError` else."""
    match = _CHECKSUM_RE.match(text.strip())
    if match is None:
        raise errors.OpPrereqError(f"Invalid OS image checksum {text!r}: expected"
                                   " sha256: and 64 hex digits", errors.ECODE_INVAL)
    return match.group(1).lower()


#: URL schemes the node fetches images with (Python's urllib); Ganeti also
#: names ftps, which is refused with a clear error
URL_SCHEMES = ("http://", "https://", "ftp://")


def is_url(image: str) -> bool:
    """Whether the image is fetched (a URL) rather than a file."""
    return image.startswith(URL_SCHEMES + ("ftps://",))


def facts(header: bytes, size: int, sha256: str) -> dict[str, Any]:
    """What the checks need of an image: format (None: refused), sizes, digest."""
    fmt = detect_format(header)
    return {"format": fmt, "size": size, "sha256": sha256, "what": describe(header),
            "virtual_size": virtual_size(header, size) if fmt else size}
