"""tuning.fix_mmap_threshold: big C blocks keep their own mapping after a bigger one was freed."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Run in a fresh interpreter: the threshold is process-wide and one-way.
_SCRIPT = r"""
import ctypes, sys
sys.path.insert(0, sys.argv[1])
from ganeti.server import tuning

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
if sys.argv[2] == "fixed":
    assert tuning.fix_mmap_threshold()
big = libc.malloc(16 * 1024 * 1024)   # mapped; freeing it raises glibc's dynamic threshold
libc.free(big)
before = libc.mallinfo2().hblkhd
block = libc.malloc(1024 * 1024)
print(libc.mallinfo2().hblkhd - before)
libc.free(block)
"""


def _mapped_growth(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _SCRIPT, REPO, mode], check=True,
                         capture_output=True, text=True, timeout=60)
    return int(out.stdout)


def _has_mallinfo2() -> bool:
    try:
        ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return False
    return True


@pytest.mark.skipif(not _has_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
@pytest.mark.parametrize(("mode", "mapped"), [("fixed", True), ("default", False)],
                         ids=["fixed-threshold-maps", "glibc-default-uses-the-heap"])
def test_a_1_mib_block_after_a_freed_16_mib_one(mode: str, mapped: bool) -> None:
    assert (_mapped_growth(mode) >= 1024 * 1024) is mapped
