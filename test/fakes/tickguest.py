"""A boot-sector guest for migration tests: it fills memory, dirties it and ticks.

Like test/fakes/bootsector.py, one hand-assembled 512-byte boot sector, but
it switches to 32-bit protected mode (A20 through port 0x92, a flat GDT) so
that it can reach all of the machine's memory, then:

1. fills ``fill_mib`` MiB from 1 MiB upward with a non-zero pattern, so a
   migration has that much to send (qemu sends zero pages as a flag only);
2. loops forever: rewrites the first ``dirty_kib`` KiB of that area with the
   loop counter (memory the guest keeps dirtying while it is migrated), and
   whenever the RTC's seconds change prints ``tick XXXXXXXX`` (the number of
   ticks so far, 8 hex digits) on COM1.

The tick number lives in a register, so it travels with the machine's state:
after a live migration the target's serial log goes on from the next number
(:func:`ticks` parses a log).  The guest needs at least ``fill_mib + 2`` MiB
of memory.
"""

from __future__ import annotations

import re
import struct

__all__ = ["boot_sector", "disk_image", "ticks", "PREFIX"]

PREFIX = b"tick "
_LOAD = 0x7C00
_FILL_START = 0x100000
_PATTERN = 0xA5A55A5A
_GDT_AT = 0xA0          # offset of the GDT in the sector (8-byte aligned)
_GDTR_AT = 0xB8
_PREFIX_AT = 0xBE
_TICK = re.compile(rb"tick ([0-9A-F]{8})\r\n")


def _u32(value: int) -> bytes:
    return struct.pack("<I", value)


def boot_sector(fill_mib: int = 0, dirty_kib: int = 0) -> bytes:
    """The 512 bytes (see the module docstring for what they do)."""
    if not 0 <= fill_mib <= 3000 or not 0 <= dirty_kib <= 1024 * fill_mib:
        raise ValueError("fill_mib must be 0..3000 and dirty_kib within the filled area")
    fill_dwords = fill_mib * 1024 * 1024 // 4
    dirty_dwords = dirty_kib * 1024 // 4
    code = b"".join([
        # --- 16-bit real mode, at 0x7C00 ---
        b"\xFA",                               # 00: cli
        b"\x31\xC0",                           # 01: xor ax, ax
        b"\x8E\xD8",                           # 03: mov ds, ax
        b"\xE4\x92",                           # 05: in al, 0x92     (fast A20 gate)
        b"\x0C\x02",                           # 07: or al, 2        (A20 on)
        b"\x24\xFE",                           # 09: and al, 0xfe    (no reset)
        b"\xE6\x92",                           # 0b: out 0x92, al
        b"\x66\x0F\x01\x16" + struct.pack("<H", _LOAD + _GDTR_AT),  # 0d: lgdt [gdtr]
        b"\x0F\x20\xC0",                       # 13: mov eax, cr0
        b"\x0C\x01",                           # 16: or al, 1        (PE)
        b"\x0F\x22\xC0",                       # 18: mov cr0, eax
        b"\xEA" + struct.pack("<HH", _LOAD + 0x20, 0x08),  # 1b: jmp 0x08:pm
        # --- 32-bit protected mode, flat segments ---
        b"\x66\xB8\x10\x00",                   # 20: pm: mov ax, 0x10 (data selector)
        b"\x8E\xD8",                           # 24: mov ds, ax
        b"\x8E\xC0",                           # 26: mov es, ax
        b"\x8E\xD0",                           # 28: mov ss, ax
        b"\xBC" + _u32(_LOAD),                 # 2a: mov esp, 0x7c00
        b"\xBF" + _u32(_FILL_START),           # 2f: mov edi, 1 MiB
        b"\xB9" + _u32(fill_dwords),           # 34: mov ecx, fill_dwords
        b"\xB8" + _u32(_PATTERN),              # 39: mov eax, pattern
        b"\xFC",                               # 3e: cld
        b"\xF3\xAB",                           # 3f: rep stosd       (fill)
        b"\x31\xF6",                           # 41: xor esi, esi    (tick count)
        b"\xBD\xFF\x00\x00\x00",               # 43: mov ebp, 0xff   (last RTC seconds)
        b"\xBF" + _u32(_FILL_START),           # 48: loop: mov edi, 1 MiB
        b"\xB9" + _u32(dirty_dwords),          # 4d: mov ecx, dirty_dwords
        b"\x89\xD8",                           # 52: mov eax, ebx    (loop counter)
        b"\xF3\xAB",                           # 54: rep stosd       (dirty)
        b"\x43",                               # 56: inc ebx
        b"\xB0\x00",                           # 57: mov al, 0       (RTC seconds register)
        b"\xE6\x70",                           # 59: out 0x70, al
        b"\xE4\x71",                           # 5b: in al, 0x71
        b"\x0F\xB6\xC0",                       # 5d: movzx eax, al
        b"\x39\xE8",                           # 60: cmp eax, ebp
        b"\x74\xE4",                           # 62: je loop         (same second)
        b"\x89\xC5",                           # 64: mov ebp, eax
        b"\x46",                               # 66: inc esi
        b"\x66\xBA\xF8\x03",                   # 67: mov dx, 0x3f8   (COM1)
        b"\xBF" + _u32(_LOAD + _PREFIX_AT),    # 6b: mov edi, prefix
        b"\x8A\x07",                           # 70: p: mov al, [edi]
        b"\x47",                               # 72: inc edi
        b"\x84\xC0",                           # 73: test al, al
        b"\x74\x03",                           # 75: jz hex
        b"\xEE",                               # 77: out dx, al
        b"\xEB\xF6",                           # 78: jmp p
        b"\xB9\x08\x00\x00\x00",               # 7a: hex: mov ecx, 8
        b"\xC1\xC6\x04",                       # 7f: h: rol esi, 4
        b"\x89\xF0",                           # 82: mov eax, esi
        b"\x24\x0F",                           # 84: and al, 0x0f
        b"\x04\x30",                           # 86: add al, '0'
        b"\x3C\x39",                           # 88: cmp al, '9'
        b"\x76\x02",                           # 8a: jbe ok
        b"\x04\x07",                           # 8c: add al, 7       ('A'..'F')
        b"\xEE",                               # 8e: ok: out dx, al
        b"\xE2\xEE",                           # 8f: loop h
        b"\xB0\x0D",                           # 91: mov al, 13
        b"\xEE",                               # 93: out dx, al
        b"\xB0\x0A",                           # 94: mov al, 10
        b"\xEE",                               # 96: out dx, al
        b"\xEB\xAF",                           # 97: jmp loop
    ])
    assert len(code) == 0x99, hex(len(code))
    code = code.ljust(_GDT_AT, b"\x90")
    code += struct.pack("<QQQ", 0,
                        0x00CF9A000000FFFF,    # 0x08: code, base 0, 4 GiB, 32-bit
                        0x00CF92000000FFFF)    # 0x10: data, base 0, 4 GiB
    code += struct.pack("<HI", 23, _LOAD + _GDT_AT)   # gdtr: limit, base
    assert len(code) == _PREFIX_AT
    code += PREFIX + b"\0"
    return code.ljust(510, b"\0") + b"\x55\xaa"


def disk_image(path: str, fill_mib: int = 0, dirty_kib: int = 0,
               size: int = 1024 * 1024) -> str:
    """Write a raw disk image of ``size`` bytes booting :func:`boot_sector`."""
    with open(path, "wb") as fh:
        fh.write(boot_sector(fill_mib, dirty_kib))
        fh.truncate(size)
    return path


def ticks(log: bytes) -> list[int]:
    """The tick numbers in a serial log, in order."""
    return [int(m.group(1), 16) for m in _TICK.finditer(log)]
