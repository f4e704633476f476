"""A boot-sector guest for "no lost writes" tests: it writes numbered records to its disk.

Like test/fakes/bootsector.py, one hand-assembled 512-byte boot sector (16-bit
real mode, every byte commented).  First it fills ``fill_mib`` MiB of memory
from 1 MiB upward with a non-zero pattern (64 KiB at a time through the
BIOS's int 15h AH=87h, "move extended memory"), so that a migration has that
much to send: qemu sends zero pages as a flag only; the guest needs
``fill_mib + 2`` MiB of memory.  Then it loops forever; pass k (k = 1, 2, ...):

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
_GDT_AT = 0x100          # the descriptors of the memory fill (48 bytes)
_DAP_AT = 0x180          # disk address packet (16 bytes)
_K_AT = 0x190            # the write counter k (dword)
_DRIVE_AT = 0x194        # the boot drive (byte, from DL at entry)
_WROTE_AT = 0x198        # "wrote \0"
_FAIL_AT = 0x1A0         # "fail \0"
_BUFFER = 0x8000
_FILL_START = 0x100000
_PATTERN = 0xA5A55A5A
_ACK = re.compile(rb"wrote ([0-9A-F]{8})\r\n")


def _w(value: int) -> bytes:
    return struct.pack("<H", value)


def _u32(value: int) -> bytes:
    return struct.pack("<I", value)


def boot_sector(span: int = SPAN, fill_mib: int = 0) -> bytes:
    """The 512 bytes (see the module docstring for what they do)."""
    if span < 1 or span & (span - 1) or span > 1 << 24:
        raise ValueError("span must be a power of two, at most 2**24")
    if not 0 <= fill_mib <= 256:
        raise ValueError("fill_mib must be 0..256")
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
        b"\xE8" + _w(0x99 - 0x15),             # 12: call fill
        b"\x66\xFF\x06" + _w(k),               # 15: loop: inc dword [k]
        b"\x66\xA1" + _w(k),                   # 1a: mov eax, [k]
        b"\x66\x48",                           # 1e: dec eax
        b"\x66\x25" + _u32(span - 1),          # 20: and eax, span - 1
        b"\x66\x05" + _u32(1),                 # 26: add eax, 1       (after the boot sector)
        b"\x66\xA3" + _w(dap + 8),             # 2c: mov [dap.lba], eax
        b"\xC7\x06" + _w(dap + 2) + _w(1),     # 30: mov word [dap.count], 1
        b"\xBF" + _w(_BUFFER),                 # 36: mov di, 0x8000   (the buffer)
        b"\xB9" + _w(64),                      # 39: mov cx, 64       (records in a sector)
        b"\x66\xB8" + MAGIC,                   # 3c: rec: mov eax, "GNTW"
        b"\x66\xAB",                           # 42: stosd
        b"\x66\xA1" + _w(k),                   # 44: mov eax, [k]
        b"\x66\xAB",                           # 48: stosd
        b"\xE2\xF0",                           # 4a: loop rec
        b"\xB8\x00\x43",                       # 4c: mov ax, 0x4300   (extended write, no verify)
        b"\x8A\x16" + _w(_LOAD + _DRIVE_AT),   # 4f: mov dl, [drive]
        b"\xBE" + _w(dap),                     # 53: mov si, dap
        b"\xCD\x13",                           # 56: int 0x13
        b"\x72\x08",                           # 58: jc fail
        b"\xBE" + _w(_LOAD + _WROTE_AT),       # 5a: mov si, "wrote "
        b"\xE8" + _w(0x6C - 0x60),             # 5d: call print
        b"\xEB\xB3",                           # 60: jmp loop
        b"\xBE" + _w(_LOAD + _FAIL_AT),        # 62: fail: mov si, "fail "
        b"\xE8" + _w(0x6C - 0x68),             # 65: call print
        b"\xFA",                               # 68: cli
        b"\xF4",                               # 69: halt: hlt
        b"\xEB\xFD",                           # 6a: jmp halt
        b"\xBA\xF8\x03",                       # 6c: print: mov dx, 0x3f8 (COM1)
        b"\xAC",                               # 6f: p: lodsb
        b"\x84\xC0",                           # 70: test al, al
        b"\x74\x03",                           # 72: jz hex
        b"\xEE",                               # 74: out dx, al
        b"\xEB\xF8",                           # 75: jmp p
        b"\x66\x8B\x1E" + _w(k),               # 77: hex: mov ebx, [k]
        b"\xB9\x08\x00",                       # 7c: mov cx, 8
        b"\x66\xC1\xC3\x04",                   # 7f: h: rol ebx, 4
        b"\x88\xD8",                           # 83: mov al, bl
        b"\x24\x0F",                           # 85: and al, 0x0f
        b"\x04\x30",                           # 87: add al, '0'
        b"\x3C\x39",                           # 89: cmp al, '9'
        b"\x76\x02",                           # 8b: jbe ok
        b"\x04\x07",                           # 8d: add al, 7        ('A'..'F')
        b"\xEE",                               # 8f: ok: out dx, al
        b"\xE2\xED",                           # 90: loop h
        b"\xB0\x0D",                           # 92: mov al, 13
        b"\xEE",                               # 94: out dx, al
        b"\xB0\x0A",                           # 95: mov al, 10
        b"\xEE",                               # 97: out dx, al
        b"\xC3",                               # 98: ret
        b"\xBD" + _w(fill_mib * 16),           # 99: fill: mov bp, blocks (of 64 KiB)
        b"\x85\xED",                           # 9c: test bp, bp
        b"\x74\x2E",                           # 9e: jz done
        b"\xB8\x00\x10",                       # a0: mov ax, 0x1000
        b"\x8E\xC0",                           # a3: mov es, ax
        b"\x31\xFF",                           # a5: xor di, di       (es:di = 64 KiB at 0x10000)
        b"\xB9\x00\x40",                       # a7: mov cx, 0x4000   (dwords)
        b"\x66\xB8" + _u32(_PATTERN),          # aa: mov eax, pattern
        b"\xF3\x66\xAB",                       # b0: rep stosd
        b"\x31\xC0",                           # b3: xor ax, ax
        b"\x8E\xC0",                           # b5: mov es, ax       (es:si = the move's GDT)
        b"\xB4\x87",                           # b7: m: mov ah, 0x87  (move extended memory)
        b"\xB9\x00\x80",                       # b9: mov cx, 0x8000   (words: 64 KiB)
        b"\xBE" + _w(_LOAD + _GDT_AT),         # bc: mov si, gdt
        b"\xCD\x15",                           # bf: int 0x15
        b"\x80\x06" + _w(_LOAD + _GDT_AT + 0x1C) + b"\x01",  # c1: add byte [dst.base2], 1
        b"\x80\x16" + _w(_LOAD + _GDT_AT + 0x1F) + b"\x00",  # c6: adc byte [dst.base3], 0
        b"\x4D",                               # cb: dec bp
        b"\x75\xE9",                           # cc: jnz m
        b"\xC3",                               # ce: done: ret
    ])
    assert len(code) == 0xCF, hex(len(code))
    code = code.ljust(_GDT_AT, b"\0")
    # the GDT of int 15h AH=87h: null, its own and the BIOS's entries (the BIOS fills
    # them), the source (64 KiB at 0x10000) and the destination (from 1 MiB up, its base
    # moved on 64 KiB at every call); bytes: limit, base 0-23, access, limit/flags, base 24-31
    code += b"\0" * 16
    code += b"\xFF\xFF" + (0x10000).to_bytes(3, "little") + b"\x93\0\0"
    code += b"\xFF\xFF" + (_FILL_START).to_bytes(3, "little") + b"\x93\0\0"
    code += b"\0" * 16
    code = code.ljust(_DAP_AT, b"\0")
    # the disk address packet: its size, reserved, sector count, buffer offset:segment,
    # the 64-bit LBA (its low half rewritten before every write)
    code += struct.pack("<BBHHHQ", 16, 0, 1, _BUFFER, 0, 0)
    code += _u32(0)                             # k, 0 until the first write
    code += b"\0".ljust(_WROTE_AT - _DRIVE_AT, b"\0")      # the drive, padding
    code += b"wrote \0".ljust(_FAIL_AT - _WROTE_AT, b"\0")
    code += b"fail \0"
    return code.ljust(510, b"\0") + b"\x55\xaa"


def disk_image(path: str, size: int = 64 * 1024 * 1024, span: int = SPAN,
               fill_mib: int = 0) -> str:
    """Write a raw disk image of ``size`` bytes booting :func:`boot_sector`."""
    if size < (span + 1) * 512:
        raise ValueError("the disk must hold the boot sector and span sectors")
    with open(path, "wb") as fh:
        fh.write(boot_sector(span, fill_mib))
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
