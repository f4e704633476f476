"""A boot-sector guest for "no lost writes" tests: it writes numbered records to its disk.

Like test/fakes/bootsector.py, one hand-assembled 512-byte boot sector (16-bit
real mode, every byte commented).  It loops forever; pass k (k = 1, 2, ...):

1. fills a 512-byte buffer at 0x8000 with 64 records ``GNTW`` + k (k as a
   little-endian 32-bit number, so a record is 8 bytes);
2. writes that buffer to disk sector :func:`sector` (k) through the BIOS
   (int 13h extended write, AH=43h, with a disk address packet: SeaBIOS
   answers it for virtio-blk, IDE and SCSI disks alike), on the drive the BIOS
   booted from;
3. once the BIOS call returned without error, prints ``wrote XXXXXXXX`` (k,
   8 hex digits) on COM1: that line is the acknowledgement of write k.  A
   failed write prints ``fail XXXXXXXX`` and the guest halts.

Write k goes to sector ``1 + (k - 1) % span`` (sector 0 is the boot sector):
the first ``span`` writes (65536 by default, 32 MiB of disk) each have a
sector of their own; after that the writes wrap and write k overwrites write
k - span.  So "acknowledged write k is on the disk" means: its sector holds a
record of k or of a later write k + n * span (:func:`lost`).  The counter
lives in the guest's memory, so it travels with a live migration: the target's
serial log goes on from the next number, a reboot would start again at 1.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable

__all__ = ["boot_sector", "disk_image", "sector", "records", "acks", "lost", "MAGIC",
           "SPAN"]

MAGIC = b"GNTW"
SPAN = 65536
_LOAD = 0x7C00
_DAP_AT = 0x180          # disk address packet (16 bytes)
_K_AT = 0x190            # the write counter k (dword)
_DRIVE_AT = 0x194        # the boot drive (byte, from DL at entry)
_WROTE_AT = 0x198        # "wrote \0"
_FAIL_AT = 0x1A0         # "fail \0"
_BUFFER = 0x8000
_ACK = re.compile(rb"wrote ([0-9A-F]{8})\r\n")


def _w(value: int) -> bytes:
    return struct.pack("<H", value)


def _u32(value: int) -> bytes:
    return struct.pack("<I", value)


def boot_sector(span: int = SPAN) -> bytes:
    """The 512 bytes (see the module docstring for what they do)."""
    if span < 1 or span & (span - 1) or span > 1 << 24:
        raise ValueError("span must be a power of two, at most 2**24")
    k = _LOAD + _K_AT
    dap = _LOAD + _DAP_AT
    code = b"".join([
        b"\xFA",                               # 00: cli
        b"\x31\xC0",                           # 01: xor ax, ax
        b"\x8E\xD8",                           # 03: mov ds, ax
        b"\x8E\xC0",                           # 05: mov es, ax
        b"\x8E\xD0",                           # 07: mov ss, ax
        b"\xBC" + _w(_LOAD),                   # 09: mov sp, 0x7c00
        b"\xFB",                               # 0c: sti              (the BIOS may wait on IRQs)
        b"\xFC",                               # 0d: cld
        b"\x88\x16" + _w(_LOAD + _DRIVE_AT),   # 0e: mov [drive], dl  (the boot drive)
        b"\x66\xFF\x06" + _w(k),               # 12: loop: inc dword [k]
        b"\x66\xA1" + _w(k),                   # 17: mov eax, [k]
        b"\x66\x48",                           # 1b: dec eax
        b"\x66\x25" + _u32(span - 1),          # 1d: and eax, span - 1
        b"\x66\x05" + _u32(1),                 # 23: add eax, 1       (after the boot sector)
        b"\x66\xA3" + _w(dap + 8),             # 29: mov [dap.lba], eax
        b"\xC7\x06" + _w(dap + 2) + _w(1),     # 2d: mov word [dap.count], 1
        b"\xBF" + _w(_BUFFER),                 # 33: mov di, 0x8000   (the buffer)
        b"\xB9" + _w(64),                      # 36: mov cx, 64       (records in a sector)
        b"\x66\xB8" + MAGIC,                   # 39: fill: mov eax, "GNTW"
        b"\x66\xAB",                           # 3f: stosd
        b"\x66\xA1" + _w(k),                   # 41: mov eax, [k]
        b"\x66\xAB",                           # 45: stosd
        b"\xE2\xF0",                           # 47: loop fill
        b"\xB8\x00\x43",                       # 49: mov ax, 0x4300   (extended write, no verify)
        b"\x8A\x16" + _w(_LOAD + _DRIVE_AT),   # 4c: mov dl, [drive]
        b"\xBE" + _w(dap),                     # 50: mov si, dap
        b"\xCD\x13",                           # 53: int 0x13
        b"\x72\x08",                           # 55: jc fail
        b"\xBE" + _w(_LOAD + _WROTE_AT),       # 57: mov si, "wrote "
        b"\xE8" + _w(0x69 - 0x5D),             # 5a: call print
        b"\xEB\xB3",                           # 5d: jmp loop
        b"\xBE" + _w(_LOAD + _FAIL_AT),        # 5f: fail: mov si, "fail "
        b"\xE8" + _w(0x69 - 0x65),             # 62: call print
        b"\xFA",                               # 65: cli
        b"\xF4",                               # 66: halt: hlt
        b"\xEB\xFD",                           # 67: jmp halt
        b"\xBA\xF8\x03",                       # 69: print: mov dx, 0x3f8 (COM1)
        b"\xAC",                               # 6c: p: lodsb
        b"\x84\xC0",                           # 6d: test al, al
        b"\x74\x03",                           # 6f: jz hex
        b"\xEE",                               # 71: out dx, al
        b"\xEB\xF8",                           # 72: jmp p
        b"\x66\x8B\x1E" + _w(k),               # 74: hex: mov ebx, [k]
        b"\xB9\x08\x00",                       # 79: mov cx, 8
        b"\x66\xC1\xC3\x04",                   # 7c: h: rol ebx, 4
        b"\x88\xD8",                           # 80: mov al, bl
        b"\x24\x0F",                           # 82: and al, 0x0f
        b"\x04\x30",                           # 84: add al, '0'
        b"\x3C\x39",                           # 86: cmp al, '9'
        b"\x76\x02",                           # 88: jbe ok
        b"\x04\x07",                           # 8a: add al, 7        ('A'..'F')
        b"\xEE",                               # 8c: ok: out dx, al
        b"\xE2\xED",                           # 8d: loop h
        b"\xB0\x0D",                           # 8f: mov al, 13
        b"\xEE",                               # 91: out dx, al
        b"\xB0\x0A",                           # 92: mov al, 10
        b"\xEE",                               # 94: out dx, al
        b"\xC3",                               # 95: ret
    ])
    assert len(code) == 0x96, hex(len(code))
    code = code.ljust(_DAP_AT, b"\0")
    # the disk address packet: its size, reserved, sector count, buffer offset:segment,
    # the 64-bit LBA (its low half rewritten before every write)
    code += struct.pack("<BBHHHQ", 16, 0, 1, _BUFFER, 0, 0)
    code += _u32(0)                             # k, 0 until the first write
    code += b"\0".ljust(_WROTE_AT - _DRIVE_AT, b"\0")      # the drive, padding
    code += b"wrote \0".ljust(_FAIL_AT - _WROTE_AT, b"\0")
    code += b"fail \0"
    return code.ljust(510, b"\0") + b"\x55\xaa"


def disk_image(path: str, size: int = 64 * 1024 * 1024, span: int = SPAN) -> str:
    """Write a raw disk image of ``size`` bytes booting :func:`boot_sector`."""
    if size < (span + 1) * 512:
        raise ValueError("the disk must hold the boot sector and span sectors")
    with open(path, "wb") as fh:
        fh.write(boot_sector(span))
        fh.truncate(size)
    return path


def sector(k: int, span: int = SPAN) -> int:
    """The disk sector (LBA) that write ``k`` goes to."""
    return 1 + (k - 1) % span


def records(data: bytes) -> list[int]:
    """The write number held by each 512-byte sector of ``data`` (0: no whole record
    there, as in a sector never written or torn)."""
    found = []
    for at in range(0, len(data) - 511, 512):
        first = data[at:at + 8]
        k = struct.unpack_from("<I", first, 4)[0]
        whole = first[:4] == MAGIC and data[at:at + 512] == first * 64
        found.append(k if whole and k else 0)
    return found


def acks(log: bytes) -> list[int]:
    """The acknowledged write numbers in a serial log, in order."""
    return [int(m.group(1), 16) for m in _ACK.finditer(log)]


def lost(acked: Iterable[int], on_disk: list[int], span: int = SPAN) -> list[int]:
    """The acknowledged writes whose sector holds neither them nor a later write of
    that sector.  ``on_disk`` is :func:`records` of the disk from sector 1 on."""
    missing = []
    for k in acked:
        slot = sector(k, span) - 1
        held = on_disk[slot] if slot < len(on_disk) else 0
        if held < k or (held - k) % span:
            missing.append(k)
    return missing
