"""Host resources the full-disk and denial-of-service tests need (and the soak script).

Each helper answers a *reason* when the resource cannot be had here (not
root, no mount permission, a descriptor limit too low) and ``""`` when it
worked, so a test can ``pytest.skip(reason)`` and the soak script can
print it.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess

__all__ = ["mount_tmpfs", "umount", "fill", "raise_fd_limit", "skip_unless"]


def mount_tmpfs(path: str, size: str, what: str = "the test") -> str:
    """Mount a tmpfs of ``size`` (``2m``...) on ``path`` (created when missing)."""
    if os.geteuid() != 0:
        return f"mounting a tmpfs for {what} needs root"
    os.makedirs(path, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0750", "tmpfs", path],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"mount -t tmpfs not permitted here: {proc.stderr.strip()}"
    return ""


def umount(path: str) -> None:
    """Unmount ``path`` (lazily when it is still busy)."""
    if subprocess.run(["umount", path], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True, check=False)


def fill(directory: str, name: str = ".filler") -> str:
    """Fill the filesystem of ``directory`` to the last byte; returns the filler's path."""
    filler = os.path.join(directory, name)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    return filler


def raise_fd_limit(wanted: int) -> str:
    """Raise RLIMIT_NOFILE to ``wanted`` (daemons started later inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return ""
    if hard != resource.RLIM_INFINITY and hard < wanted:
        return f"descriptor limit {hard} is below the {wanted} this test needs"
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return ""


def skip_unless(reason: str) -> None:
    """Skip the calling test with ``reason`` unless it is empty."""
    if reason:
        import pytest
        pytest.skip(reason)
