"""A guest for kvm tests without an OS: one 512-byte x86 boot sector.

The BIOS loads it at 0x7C00 in 16-bit real mode; it writes a message on the
first serial port (I/O port 0x3F8, which qemu's UART sends on without any
set-up) and then either halts forever or powers the machine off through the
ACPI PM1a control register of qemu's i440fx/PIIX4 machine (port 0x604,
SLP_EN with the S5 sleep type 0), which is how a guest "powers itself off".
The code is hand-assembled below; every byte is commented.
"""

from __future__ import annotations

__all__ = ["boot_sector", "disk_image", "MESSAGE"]

MESSAGE = b"ganeti-test-guest up"

_LOAD = 0x7C00


def boot_sector(message: bytes = MESSAGE, poweroff: bool = False) -> bytes:
    """The 512 bytes: print ``message`` + CRLF on COM1, then halt or power off."""
    if b"\0" in message or len(message) > 400:
        raise ValueError("message must be short and without NUL")
    msg_offset = 29
    code = bytes([
        0x31, 0xC0,                    # 0:  xor ax, ax
        0x8E, 0xD8,                    # 2:  mov ds, ax
        0xFC,                          # 4:  cld
        0xBE, (_LOAD + msg_offset) & 0xFF, (_LOAD + msg_offset) >> 8,  # 5: mov si, msg
        0xBA, 0xF8, 0x03,              # 8:  mov dx, 0x3f8
        0xAC,                          # 11: lodsb
        0x84, 0xC0,                    # 12: test al, al
        0x74, 0x03,                    # 14: jz 19
        0xEE,                          # 16: out dx, al
        0xEB, 0xF8,                    # 17: jmp 11
    ])
    if poweroff:
        code += bytes([0xBA, 0x04, 0x06,   # 19: mov dx, 0x604
                       0xB8, 0x00, 0x20,   # 22: mov ax, 0x2000
                       0xEF])              # 25: out dx, ax
    else:
        code += b"\x90" * 7                # 19: nop x 7
    code += bytes([0xF4,                   # 26: hlt
                   0xEB, 0xFD])            # 27: jmp 26
    assert len(code) == msg_offset
    code += message + b"\r\n\0"
    return code.ljust(510, b"\0") + b"\x55\xaa"


def disk_image(path: str, message: bytes = MESSAGE, poweroff: bool = False,
               size: int = 1024 * 1024) -> str:
    """Write a raw disk image of ``size`` bytes booting :func:`boot_sector`."""
    with open(path, "wb") as fh:
        fh.write(boot_sector(message, poweroff))
        fh.truncate(size)
    return path
