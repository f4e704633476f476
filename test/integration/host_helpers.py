"""Host resources the full-disk and denial-of-service tests need (and the soak script).

Each helper answers a *reason* when the resource cannot be had here (not
root, no mount permission, a descriptor limit too low, no strace) and ``""``
when it worked, so a test can ``pytest.skip(reason)`` and the soak script can
print it.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import resource
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ["serve_directory", "network_namespace", "mount_tmpfs", "umount", "fill", "raise_fd_limit", "skip_unless", "SlowSyscalls",
           "qemu_reason", "process_tree", "request_children"]


def request_children(pid: int | None) -> set[int]:
    """The children of the node daemon ``pid`` that serve (or served) a
    connection, by their process name (empty when it runs none or is gone)."""
    from ganeti.http.spare import CHILD_COMM
    if pid is None:
        return set()
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            children = [int(x) for x in fh.read().split()]
    except OSError:
        return set()
    found = set()
    for child in children:
        try:
            with open(f"/proc/{child}/comm") as fh:
                if fh.read().strip() == CHILD_COMM:
                    found.add(child)
        except OSError:
            pass
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants, parents first: pausing a node daemon means
    pausing its forked children too (its kept-connection children go on
    serving node RPC on their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree: list[int] = []
    todo = [pid]
    while todo and len(tree) < 1000:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def qemu_reason(binary: str = "qemu-system-x86_64") -> str:
    """Why qemu cannot run here ("" when ``binary -version`` works; make installs it)."""
    path = shutil.which(binary)
    if path is None:
        return f"{binary} is not installed (make debian-deps installs qemu-system-x86)"
    try:
        proc = subprocess.run([path, "-version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} cannot run here: {exc}"
    if proc.returncode != 0:
        return f"{binary} cannot run here: {proc.stderr.strip()}"
    return ""


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


#: set to 1 by ``make test`` (Makefile ``unit``; as root for all but hail) where it
#: installs what they name: a test needing a missing one fails rather than skips
REQUIRE_DEBOOTSTRAP = "GANETI_TEST_REQUIRE_DEBOOTSTRAP"
REQUIRE_HAIL = "GANETI_TEST_REQUIRE_HAIL"
REQUIRE_BROWSER = "GANETI_TEST_REQUIRE_BROWSER"


def skip_unless(reason: str | None, *, required_by: str = "", why_required: str = "") -> None:
    """Skip the calling test with ``reason`` unless it is empty; fail it instead when
    the environment variable ``required_by`` is 1 (``make test`` as root installs
    what is missing; ``why_required``, if given, says so before the reason)."""
    if reason:
        import pytest
        if required_by and os.environ.get(required_by) == "1":
            pytest.fail(f"{why_required}: {reason}" if why_required else reason)
        pytest.skip(reason)


class SlowSyscalls:
    """Make ``syscalls`` of the running process ``pid`` take ``delay_s`` longer.

    ``strace --seccomp-bpf -f -p PID -e inject=<syscalls>:delay_enter=...``
    stops only at those calls (threads started later included), so the
    rest of the daemon runs at full speed.  :attr:`reason` is ``""`` once
    every thread of ``pid`` is traced, else why not (no strace, ptrace not
    permitted).  :meth:`stop` detaches.
    """

    def __init__(self, pid: int, syscalls: Sequence[str], delay_s: float,
                 timeout: float = 10.0) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.reason = ""
        strace = shutil.which("strace")
        if strace is None:
            self.reason = "strace is not installed"
            return
        names = ",".join(syscalls)
        self.proc = subprocess.Popen(
            [strace, "--seccomp-bpf", "-f", "-qq", "-o", os.devnull, "-p", str(pid),
             "-e", f"trace={names}", "-e", f"inject={names}:delay_enter={int(delay_s * 1e6)}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                self.reason = f"strace cannot attach here: {err.strip()}"
                return
            if _all_traced(pid):
                return
            time.sleep(0.02)
        self.stop()
        self.reason = f"strace did not attach to {pid} in {timeout}s"

    def stop(self) -> None:
        """Detach strace (the traced process goes on)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _all_traced(pid: int) -> bool:
    tasks = glob.glob(f"/proc/{pid}/task/*/status")
    if not tasks:
        return False
    for status in tasks:
        try:
            with open(status, encoding="ascii", errors="replace") as fh:
                tracer = next((line.split()[1] for line in fh if line.startswith("TracerPid:")),
                              "0")
        except OSError:
            continue        # the thread ended meanwhile
        if tracer == "0":
            return False
    return True


@contextmanager
def serve_directory(top: str) -> Iterator[str]:
    """Serve the files of ``top`` over HTTP on 127.0.0.1 for the block: its base URL."""
    import http.server

    def handler(*args: object) -> http.server.SimpleHTTPRequestHandler:
        return http.server.SimpleHTTPRequestHandler(*args, directory=top)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


#: ``unshare``/``setns`` flag of a network namespace
CLONE_NEWNET = 0x40000000


@contextmanager
def network_namespace(*addresses: str) -> Iterator[None]:
    """The calling thread (and what it starts: daemons, qemu) in a new network namespace
    for the block, its loopback up with ``addresses`` (``/32``) on it; back to the original
    namespace after.  Taps, routes and listeners made inside never touch the host's
    network.  Needs root."""
    libc = ctypes.CDLL(None, use_errno=True)
    original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
        for address in addresses:
            subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True,
                           timeout=30)
        yield
    finally:
        if libc.setns(original, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns back to the original namespace: {os.strerror(err)}")
        os.close(original)


def uefi_reason() -> str:
    """Why a UEFI/TPM kvm guest cannot run here ("" when qemu runs and OVMF and swtpm
    are installed; make debian-deps installs them)."""
    from ganeti.hypervisor.kvm import firmware
    return qemu_reason() or (
        "" if firmware.find_ovmf() else "OVMF is not installed (make debian-deps)") or (
        "" if shutil.which(firmware.SWTPM_BINARY) else "swtpm is not installed (make debian-deps)")
