"""UEFI firmware, its NVRAM and an emulated TPM for kvm instances (doc/kvm.md, "UEFI and TPM").

hvparam ``firmware=uefi``: OVMF's code (Debian ``ovmf``, read-only) and a
per-instance copy of its variable store (writable) as the two pflash
chips.  hvparam ``tpm=tpm2``: an ``swtpm`` process per instance, qemu
talking to it over a UNIX socket (``-tpmdev emulator``).

Both keep state that belongs to the instance, not to a run of qemu: the
*firmware state directory* ``<data dir>/kvm-firmware/<instance uuid>/``
holds ``OVMF_VARS.fd`` (the NVRAM, copied from OVMF's template at first
start) and ``tpm/`` (swtpm's state).  It is keyed by UUID so a rename keeps
it.  The master moves it with the instance (failover, migration, move) as
one archive: :func:`pack` and :func:`unpack`.

The pflash drives are named by absolute paths: a daemonized qemu works in
``/``, and reopens its images when a migration hands them over, so a
relative name would not be found then.  A migration target started from
the source's command line (after a hotplug) gets its own node's paths
(:func:`retarget`).  swtpm's socket is relative (qemu connects at start).

Pure: the choices (:func:`find_ovmf`, :func:`pflash_args`,
:func:`tpm_args`, :func:`swtpm_command`); I/O: the state directory and the
swtpm process (:func:`prepare`, :func:`start_swtpm`, :func:`stop_swtpm`).
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors
from ganeti.utils import process

__all__ = ["list_states", "FIRMWARE_BIOS", "FIRMWARE_UEFI", "FIRMWARES", "TPM_NONE", "TPM_TPM2", "TPMS",
           "OVMF_DIR", "OVMF_PAIRS", "SWTPM_BINARY", "VARS_FILE", "TPM_STATE_DIR",
           "SWTPM_SOCKET", "retarget", "nvram_path", "SWTPM_PIDFILE", "SWTPM_LOG", "RUN_FILES",
           "Ovmf", "uses_uefi", "uses_tpm", "needs_state", "find_ovmf", "pflash_args",
           "tpm_args", "swtpm_command", "state_dir", "prepare", "start_swtpm", "stop_swtpm",
           "pack", "unpack", "users", "remove_state", "starter", "missing"]

FIRMWARE_BIOS = constants.HT_KVM_FIRMWARE_BIOS
FIRMWARE_UEFI = constants.HT_KVM_FIRMWARE_UEFI
FIRMWARES = (FIRMWARE_BIOS, FIRMWARE_UEFI)
TPM_NONE = constants.HT_KVM_TPM_NONE
TPM_TPM2 = constants.HT_KVM_TPM_TPM2
TPMS = (TPM_NONE, TPM_TPM2)

#: where Debian's ``ovmf`` installs the firmware
OVMF_DIR = "/usr/share/OVMF"
#: (code, variables template) pairs, best first: the 4 MiB build, then the 2 MiB one
OVMF_PAIRS = (("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"), ("OVMF_CODE.fd", "OVMF_VARS.fd"))
SWTPM_BINARY = "swtpm"

#: in the firmware state directory: the NVRAM and swtpm's state
VARS_FILE = "OVMF_VARS.fd"
TPM_STATE_DIR = "tpm"
#: in the instance's run directory
SWTPM_SOCKET = "swtpm.sock"
SWTPM_PIDFILE = "swtpm.pid"
SWTPM_LOG = "swtpm.log"
RUN_FILES = (SWTPM_SOCKET, SWTPM_PIDFILE, SWTPM_LOG)
#: seconds swtpm gets to create its socket
SWTPM_START_TIMEOUT = 10.0


@dataclass(frozen=True)
class Ovmf:
    """OVMF's code and the template of its variable store."""

    code: str
    vars_template: str


def uses_uefi(hvp: dict[str, Any]) -> bool:
    """True when the hvparams ask for UEFI."""
    return str(hvp.get("firmware") or FIRMWARE_BIOS) == FIRMWARE_UEFI


def uses_tpm(hvp: dict[str, Any]) -> bool:
    """True when the hvparams ask for an emulated TPM 2.0."""
    return str(hvp.get("tpm") or TPM_NONE) == TPM_TPM2


def needs_state(hvp: dict[str, Any]) -> bool:
    """True when the instance has a firmware state directory worth moving."""
    return uses_uefi(hvp) or uses_tpm(hvp)


def find_ovmf(directory: str | None = None,
              exists: Callable[[str], bool] = os.path.isfile) -> Ovmf | None:
    """The first pair of :data:`OVMF_PAIRS` present in ``directory`` (default
    :data:`OVMF_DIR`; None: none)."""
    directory = directory or OVMF_DIR
    for code, template in OVMF_PAIRS:
        pair = Ovmf(os.path.join(directory, code), os.path.join(directory, template))
        if exists(pair.code) and exists(pair.vars_template):
            return pair
    return None


_PFLASH = "if=pflash,format=raw,unit="


def pflash_args(code: str, nvram: str) -> list[str]:
    """The two pflash drives: OVMF's code read-only (unit 0), the NVRAM writable (unit 1)."""
    return ["-drive", f"{_PFLASH}0,readonly=on,file={_escape(code)}",
            "-drive", f"{_PFLASH}1,file={_escape(nvram)}"]


def _escape(value: str) -> str:
    return value.replace(",", ",,")


def retarget(argv: list[str], code: str, nvram: str) -> list[str]:
    """``argv`` with its pflash drives (if any) naming ``code`` and ``nvram`` instead."""
    words = dict(zip(("0", "1"), pflash_args(code, nvram)[1::2]))
    out = list(argv)
    for idx, word in enumerate(out[1:], start=1):
        if out[idx - 1] == "-drive" and word.startswith(_PFLASH) and word[len(_PFLASH):][:1] in words:
            out[idx] = words[word[len(_PFLASH)]]
    return out


def tpm_args(socket: str = SWTPM_SOCKET) -> list[str]:
    """A TPM TIS device backed by the swtpm listening on ``socket``."""
    return ["-chardev", f"socket,id=chrtpm,path={socket}",
            "-tpmdev", "emulator,id=tpm0,chardev=chrtpm",
            "-device", "tpm-tis,tpmdev=tpm0"]


def swtpm_command(binary: str, tpm_state: str) -> list[str]:
    """swtpm for one instance, run in the instance's run directory.

    ``--terminate``: it exits when qemu closes the control channel (qemu
    quit, or a migration source handed over); ``--daemon`` returns once the
    socket exists.
    """
    return [binary, "socket", "--tpm2",
            "--tpmstate", f"dir={tpm_state},mode=0600",
            "--ctrl", f"type=unixio,path={SWTPM_SOCKET},mode=0600",
            "--pid", f"file={SWTPM_PIDFILE}", "--log", f"file={SWTPM_LOG}",
            "--terminate", "--daemon"]


# --- the state directory (I/O) ---------------------------------------------------------

def state_dir(base_dir: str, key: str) -> str:
    """The firmware state directory of the instance ``key`` (its UUID, else its name)."""
    if not key or "/" in key or key.startswith("."):
        raise errors.ProgrammerError(f"bad firmware state key {key!r}")
    return os.path.join(base_dir, key)


def nvram_path(sdir: str) -> str:
    """The NVRAM file in the state directory ``sdir``."""
    return os.path.join(sdir, VARS_FILE)


def prepare(sdir: str, hvp: dict[str, Any], ovmf_dir: str | None = None) -> None:
    """Make the state directory (and the NVRAM, the TPM directory) for a start.

    The NVRAM is copied from OVMF's template when the instance has none
    yet (first start, or a node that never received it).  Raises
    :class:`errors.HypervisorError` when OVMF is not installed.
    """
    os.makedirs(sdir, mode=0o700, exist_ok=True)
    if uses_uefi(hvp):
        ovmf = find_ovmf(ovmf_dir)
        if ovmf is None:
            raise errors.HypervisorError(
                f"firmware=uefi: no OVMF firmware in {ovmf_dir or OVMF_DIR}"
                " (Debian package ovmf)")
        nvram = nvram_path(sdir)
        if not os.path.exists(nvram):
            tmp = nvram + ".new"
            shutil.copyfile(ovmf.vars_template, tmp)
            os.chmod(tmp, 0o600)
            os.replace(tmp, nvram)
    if uses_tpm(hvp):
        os.makedirs(os.path.join(sdir, TPM_STATE_DIR), mode=0o700, exist_ok=True)


def _swtpm_pid(run_dir: str) -> int | None:
    try:
        with open(os.path.join(run_dir, SWTPM_PIDFILE), encoding="ascii") as fh:
            pid = int(fh.read().strip() or "0")
        with open(f"/proc/{pid}/comm", encoding="ascii") as fh:
            comm = fh.read().strip()
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and comm == SWTPM_BINARY else None


def start_swtpm(sdir: str, run_dir: str, *, binary: str = SWTPM_BINARY,
                timeout: float = SWTPM_START_TIMEOUT) -> None:
    """Start the instance's swtpm (a leftover one is stopped first); waits for its socket."""
    stop_swtpm(run_dir)
    found = shutil.which(binary)
    if found is None:
        raise errors.HypervisorError(f"tpm=tpm2: {binary} not found (Debian package swtpm)")
    argv = swtpm_command(found, os.path.join(sdir, TPM_STATE_DIR))
    try:
        result = process.run_command(argv, cwd=run_dir, timeout=timeout)
    except errors.CommandError as exc:
        raise errors.HypervisorError(f"Cannot start swtpm: {exc}") from exc
    if result.failed:
        raise errors.HypervisorError(f"Cannot start swtpm: {result.fail_reason}:"
                                     f" {result.stderr.strip()[-300:]}")
    deadline = time.monotonic() + timeout
    while not os.path.exists(os.path.join(run_dir, SWTPM_SOCKET)):
        if time.monotonic() > deadline:
            stop_swtpm(run_dir)
            raise errors.HypervisorError(f"swtpm did not create its socket in {timeout}s")
        time.sleep(0.05)


def stop_swtpm(run_dir: str, timeout: float = 5.0) -> None:
    """Stop the instance's swtpm if it still runs (SIGTERM, then SIGKILL); remove its files."""
    pid = _swtpm_pid(run_dir)
    if pid is not None:
        with _ignore_gone():
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _swtpm_pid(run_dir) == pid and time.monotonic() < deadline:
            time.sleep(0.05)
        if _swtpm_pid(run_dir) == pid:
            with _ignore_gone():
                os.kill(pid, signal.SIGKILL)
    for name in (SWTPM_SOCKET, SWTPM_PIDFILE):
        _unlink(os.path.join(run_dir, name))


class _ignore_gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *_: Any) -> bool:
        return kind is ProcessLookupError


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def pack(sdir: str) -> bytes | None:
    """The state directory as a gzip'd tar archive (None: the instance has none here)."""
    if not os.path.isdir(sdir):
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for entry in sorted(os.listdir(sdir)):
            if entry.endswith(".new") or entry.startswith("."):
                continue
            tar.add(os.path.join(sdir, entry), arcname=entry)
    return buf.getvalue()


def unpack(data: bytes, sdir: str) -> None:
    """Replace the state directory by the archive ``data`` (from :func:`pack`).

    Unpacked next to it first (regular files and directories only, no
    absolute or ``..`` names), then swapped in; call it only while no qemu
    or swtpm of the instance runs on this node.
    """
    parent = os.path.dirname(sdir)
    os.makedirs(parent, mode=0o700, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".in-", dir=parent)
    try:
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                members = tar.getmembers()
                for member in members:
                    parts = member.name.split("/")
                    if member.name.startswith("/") or ".." in parts or \
                            not (member.isfile() or member.isdir()):
                        raise errors.HypervisorError(
                            f"Bad entry {member.name!r} in a firmware state archive")
                tar.extractall(tmp, members=members, filter="data")
        except (tarfile.TarError, EOFError, zlib.error) as exc:
            raise errors.HypervisorError(f"Bad firmware state archive: {exc}") from exc
        old = None
        if os.path.exists(sdir):
            old = tempfile.mkdtemp(prefix=".old-", dir=parent)
            os.rename(sdir, os.path.join(old, "state"))
        os.rename(tmp, sdir)
        tmp = ""
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def users(sdir: str, proc: str = "/proc") -> list[int]:
    """Pids of the processes naming the state directory ``sdir`` on their
    command line: a qemu of the instance (its NVRAM is a pflash ``file=``)
    and its swtpm (``--tpmstate dir=``).  Command lines only: reading every
    process's open files costs a readlink per descriptor, far more."""
    inside = {os.path.join(d, "") for d in (os.path.abspath(sdir), os.path.realpath(sdir))}
    found = []
    for pid in filter(str.isdigit, os.listdir(proc)):
        try:
            with open(os.path.join(proc, pid, "cmdline"), "rb") as fh:
                argv = fh.read().decode(errors="replace")
        except OSError:
            continue   # gone meanwhile
        if any(d in argv for d in inside):
            found.append(int(pid))
    return found


def remove_state(sdir: str, proc: str = "/proc") -> None:
    """Remove the state directory (nothing when there is none).

    Refused (:class:`errors.HypervisorError`) while a process uses it
    (:func:`users`): a qemu or swtpm of the instance still running here
    holds the only current copy of what the guest wrote.
    """
    if not os.path.isdir(sdir):
        return
    busy = users(sdir, proc)
    if busy:
        raise errors.HypervisorError(
            f"Firmware state {sdir} is in use (pid {', '.join(map(str, busy))}); not removed")
    shutil.rmtree(sdir, ignore_errors=True)


def starter(sdir: str, hvp: dict[str, Any]) -> Callable[[str], None] | None:
    """What runs in the run directory before qemu starts (None: nothing to do):
    :func:`prepare`, then :func:`start_swtpm` for ``tpm=tpm2``."""
    if not needs_state(hvp):
        return None

    def before(run_dir: str) -> None:
        prepare(sdir, hvp)
        if uses_tpm(hvp):
            start_swtpm(sdir, run_dir)
    return before


def list_states(base_dir: str) -> list[str]:
    """The keys (instance UUIDs, else names) of the state directories under
    ``base_dir``, sorted; the temporary ``.in-``/``.old-`` directories of
    :func:`unpack` are left out."""
    try:
        names = os.listdir(base_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names
                  if not n.startswith(".") and os.path.isdir(os.path.join(base_dir, n)))


def missing(needs: list[str], ovmf_dir: str | None = None,
            which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """What this node lacks for ``needs`` (``uefi``: OVMF's files, ``tpm2``: swtpm)."""
    ovmf_dir = ovmf_dir or OVMF_DIR
    problems = []
    if FIRMWARE_UEFI in needs and find_ovmf(ovmf_dir) is None:
        wanted = " or ".join(f"{c} with {v}" for c, v in OVMF_PAIRS)
        problems.append(f"firmware=uefi is used but {ovmf_dir} has no {wanted}"
                        " (Debian package ovmf)")
    if TPM_TPM2 in needs and which(SWTPM_BINARY) is None:
        problems.append(f"tpm=tpm2 is used but {SWTPM_BINARY} is not installed"
                        " (Debian package swtpm)")
    return problems
