"""Exports on disk, and disk transfers between node daemons (doc/exports.md).

An export lives in ``<export dir>/<instance>/`` (``config.ini`` and one
image per disk).  It is built in ``<instance>.new/`` (:func:`export_stage`)
and renamed into place by :func:`finalize_export`, so a failed export never
shows up: :func:`export_list` skips staging directories, and the next
export of the instance, or the master's clean-up, removes them.

Disk data moves as a stream (:mod:`ganeti.impexp.stream`) from a *sender*
process on the node holding the data to the node daemon of the node that
writes it.  :func:`impexp_send` starts the sender
(:mod:`ganeti.server.impexp_worker`) and returns at once with a transfer
id; the master polls :func:`impexp_status` for progress, and
:func:`impexp_abort` / :func:`impexp_cleanup` stop it and drop its state.
The node daemon hands an ``impexp_stream`` request to
:func:`receive_stream`, which writes an export image under a temporary
name and renames it once the SHA-256 of what arrived matches the sender's,
or feeds the disk of an instance being imported (through the OS
``import`` script when the instance has an OS, raw otherwise).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid as uuidlib
from collections.abc import Callable
from typing import IO, Any

from ganeti import constants, errors, osapi, serializer
from ganeti.impexp import stream as diskstream
from ganeti.impexp import info as exportinfo
from ganeti.backend import blockdev
from ganeti.backend import os as bos
from ganeti.backend.context import NodeContext
from ganeti.hypervisor.kvm import firmware as kvm_firmware
from ganeti.rpc.procedure import FAST, NORMAL, URGENT, procedure
from ganeti.utils import io as uio

__all__ = ["export_list", "export_info", "export_remove", "export_stage", "finalize_export",
           "impexp_send", "impexp_status", "impexp_abort", "impexp_cleanup"]
# (open_export_file and file_kind serve the import/export worker, ganeti.server.impexp_worker:
# not node procedures, so not in __all__, which lists exactly the RPC rows' functions)

logger = logging.getLogger(__name__)

STAGING_SUFFIX = ".new"
PARTIAL_SUFFIX = ".partial"
STATUS_FILE = "status.json"
JOB_FILE = "job.json"
PID_FILE = "pid"
#: transfer states; the last two are final
STATE_STARTING, STATE_RUNNING, STATE_DONE, STATE_FAILED = "starting", "running", "done", "failed"
_MAX_CONFIG = 1024 * 1024


# --- names and paths -----------------------------------------------------------------------

def check_name(name: Any, what: str = "export") -> str:
    """A plain directory or file name (no ``/``, not hidden, not ``..``)."""
    if (not isinstance(name, str) or not name or "/" in name or name.startswith(".")
            or "\0" in name or len(name) > 255):
        raise errors.OpExecError(f"Invalid {what} name {name!r}")
    return name


def _export_path(ctx: NodeContext, name: str) -> str:
    return os.path.join(ctx.paths.export_dir, check_name(name))


def _staging_path(ctx: NodeContext, instance_name: str) -> str:
    return _export_path(ctx, check_name(instance_name, "instance") + STAGING_SUFFIX)


def _rmtree(path: str) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise errors.OpExecError(f"Cannot remove {path}: {exc}") from exc


# --- export directories --------------------------------------------------------------------

@procedure(FAST)
def export_list(ctx: NodeContext) -> list[str]:
    """Names of the finished exports in the node's export directory (sorted).

    The names of the finished exports on this node (sorted; none without the directory).
    """
    base = ctx.paths.export_dir
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise errors.OpExecError(f"Cannot list the exports in {base}: {exc}") from exc
    return sorted(n for n in names if not n.startswith(".") and not n.endswith(STAGING_SUFFIX)
                  and os.path.isdir(os.path.join(base, n)))


def _export_dir_of(ctx: NodeContext, path: str) -> tuple[str, str]:
    """An export directory and its name: a name below the export dir, or a canonical
    path inside it.

    Symbolic links are resolved, so none leads out of the export dir.
    Errors name the export as given, never this node's local path.
    """
    local = ctx.local_path(path) if path.startswith("/") else _export_path(ctx, path)
    base = os.path.realpath(ctx.paths.export_dir)
    real = os.path.realpath(local)
    if real == base or not real.startswith(base.rstrip(os.sep) + os.sep):
        raise errors.OpExecError(f"Refusing export {exportinfo.excerpt(path)!r}: not inside"
                                 " the export directory")
    return real, os.path.relpath(real, base)


def file_kind(mode: int) -> str:
    """``"a FIFO"``, ``"a directory"``, ... for a ``st_mode`` that is not a regular file."""
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return what
    return "not a regular file"


def open_export_file(ctx: NodeContext, export: str, name: str) -> tuple[IO[bytes], int, str]:
    """Open file ``name`` of export ``export`` for reading: ``(file, size, label)``.

    ``name`` must be a plain file name of the export's own directory
    (:func:`ganeti.impexp.info.check_dump_name`); the file is opened
    without following a symbolic link and without blocking, and must be a
    regular file (a FIFO, device, socket or directory is refused).  The
    label (``export NAME, file FILE``) names both relative to the export
    directory, for messages.  Raises :class:`errors.OpExecError`.
    """
    directory, export_name = _export_dir_of(ctx, export)
    try:
        exportinfo.check_dump_name(name)
    except errors.ConfigurationError as exc:
        raise errors.OpExecError(f"export {export_name}, file"
                                 f" {exportinfo.excerpt(str(name))!r}: the name {exc}") from None
    label = f"export {export_name}, file {name!r}"
    try:
        fd = os.open(os.path.join(directory, name),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        why = ("is a symbolic link (refused)" if exc.errno == errno.ELOOP
               else "is a socket or device without a reader (refused)"
               if exc.errno == errno.ENXIO else f"cannot be opened: {exc.strerror or exc}")
        raise errors.OpExecError(f"{label} {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.OpExecError(f"{label} is {file_kind(st.st_mode)}, not a regular file"
                                     " (refused)")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb"), st.st_size, label
    except BaseException:
        os.close(fd)
        raise


@procedure(FAST)
def export_info(ctx: NodeContext, path: str) -> str:
    """The config.ini text of an export (its name, or a canonical path inside the export
    directory).

    The ``config.ini`` text of the export at ``path`` (a name or canonical path).

    Raises :class:`errors.OpExecError` when there is none, it is not a
    regular file, too large or not UTF-8 text (the message names the
    export and the line, never this node's paths or the file's bytes).
    """
    fh, size, label = open_export_file(ctx, path, constants.EXPORT_CONF_FILE)
    with fh:
        if size > _MAX_CONFIG:
            raise errors.OpExecError(f"{label} is too large ({size} bytes, at most"
                                     f" {_MAX_CONFIG})")
        data = uio.read_limited(fh, _MAX_CONFIG)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise errors.OpExecError(f"{label}: line {line} is not UTF-8 text") from None


@procedure(NORMAL)
def export_remove(ctx: NodeContext, export: str) -> None:
    """Remove the export directory of that name; refused when there is none. -> None

    Remove the export named ``export``; raises when there is none.
    """
    path = _export_path(ctx, export)
    if not os.path.isdir(path):
        raise errors.OpExecError(f"No export named {export} on this node")
    _rmtree(path)


@procedure(NORMAL)
def export_stage(ctx: NodeContext, instance_name: str, create: bool) -> str | None:
    """Remove <instance>.new (an unfinished export); with create make it afresh. -> canonical
    path or None

    Remove the staging directory of ``instance_name``; with ``create`` make it afresh.

    Returns its canonical path when created.
    """
    path = _staging_path(ctx, instance_name)
    _rmtree(path)
    if not create:
        return None
    try:
        os.makedirs(path, mode=0o750)
    except OSError as exc:
        raise errors.OpExecError(f"Cannot create the export directory {path}: {exc}") from exc
    return ctx.canonical(path)


@procedure(NORMAL)
def finalize_export(ctx: NodeContext, instance_name: str, config: str) -> str:
    """Write config.ini into <instance>.new and rename it to <instance>, replacing an older
    export. -> canonical path

    Write ``config.ini`` into the staging directory and move it into place.

    An older export of the instance is replaced.  Returns the canonical
    path of the export.
    """
    staging = _staging_path(ctx, instance_name)
    final = _export_path(ctx, instance_name)
    if not os.path.isdir(staging):
        raise errors.OpExecError(f"No export of {instance_name} in progress on this node")
    try:
        uio.write_file_atomic(os.path.join(staging, constants.EXPORT_CONF_FILE), config.encode("utf-8"),
                              mode=0o640)
        old = None
        if os.path.exists(final):
            old = f"{staging}.old-{os.getpid()}"
            os.rename(final, old)
        os.rename(staging, final)
    except OSError as exc:
        raise errors.OpExecError(f"Cannot finalize the export of {instance_name}: {exc}") from exc
    if old is not None:
        _rmtree(old)
    return ctx.canonical(final)


# --- transfers: the sending side -----------------------------------------------------------

def _transfer_dir(ctx: NodeContext, transfer_id: str) -> str:
    return os.path.join(ctx.paths.import_export_dir, check_name(transfer_id, "transfer"))


def package_root() -> str:
    """The directory holding the ``ganeti`` package (for the sender's ``python -m``)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@procedure(FAST)
def impexp_send(ctx: NodeContext, source: dict, dest: dict, host: str, port: int) -> str:
    """Start a sender process streaming source (an instance disk or an export image) to the node
    daemon at host:port, where dest says where the data goes. -> transfer id

    Start sending ``source`` to the node daemon at ``host:port`` (``dest`` says where to).

    ``source`` is ``{"kind": "disk", "disk", "instance", "index"}`` (an
    instance disk; through the OS ``export`` script when ``instance`` has
    an OS) or ``{"kind": "file", "export", "file"}`` (the image ``file``
    of the export ``export``, opened by :func:`open_export_file`) or
    ``{"kind": "firmware", "instance_uuid"}`` (a kvm instance's UEFI/TPM
    state, :func:`firmware_state_bytes`: a move between clusters).
    Returns the transfer id at once.
    """
    return spawn_transfer(ctx, "ganeti.server.impexp_worker",
                          {"source": source, "dest": dest, "host": host, "port": port})


def spawn_transfer(ctx: NodeContext, module: str, job: dict[str, Any], *,
                   pass_fd: int | None = None) -> str:
    """Start ``python -m module DIR [FD]`` in a new transfer directory, in a session of
    its own, with ``job`` (plus the node's root and name) as its ``job.json`` and
    ``pass_fd`` handed down; returns the transfer id (the directory's name)."""
    transfer_id = f"{int(ctx.clock())}-{uuidlib.uuid4().hex[:12]}"
    directory = _transfer_dir(ctx, transfer_id)
    os.makedirs(directory, mode=0o750)
    job = {**job, "root": ctx.paths.root, "hostname": ctx.hostname}
    uio.write_file_atomic(os.path.join(directory, JOB_FILE), serializer.dumps_bytes(job), mode=0o600)
    env = {**os.environ, "PYTHONPATH": package_root()}
    argv = [sys.executable, "-m", module, directory]
    if pass_fd is not None:
        argv.append(str(pass_fd))
    with open(os.path.join(directory, "worker.log"), "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                close_fds=True, pass_fds=() if pass_fd is None else (pass_fd,),
                                start_new_session=True, cwd="/")
    uio.write_file_atomic(os.path.join(directory, PID_FILE), str(proc.pid).encode("ascii"), mode=0o640)
    return transfer_id


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:   # a zombie is dead too (the worker is not our child once the RPC child exits)
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError):
        return None


def _pid_of(directory: str) -> int | None:
    try:
        with open(os.path.join(directory, PID_FILE), "rb") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _log_tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            lines = fh.read()[-2000:].decode("utf-8", "replace").strip().splitlines()[-5:]
    except OSError:
        return ""
    return (": " + " | ".join(lines)) if lines else ""


@procedure(URGENT)
def impexp_status(ctx: NodeContext, ids: list) -> list[dict[str, Any] | None]:
    """Per transfer id {state starting|running|done|failed, done, total, elapsed, error, size,
    sha256} or None.

    Per transfer id: ``{state, done, total, elapsed, error, size, sha256}`` or None (unknown).

    A transfer whose process is gone before it finished is reported
    ``failed``.
    """
    result: list[dict[str, Any] | None] = []
    for transfer_id in ids:
        directory = _transfer_dir(ctx, transfer_id)
        if not os.path.isdir(directory):
            result.append(None)
            continue
        status = _read_json(os.path.join(directory, STATUS_FILE)) or {"state": STATE_STARTING}
        if status.get("state") not in (STATE_DONE, STATE_FAILED):
            pid = _pid_of(directory)
            if pid is not None and not _alive(pid):
                status = {**status, "state": STATE_FAILED,
                          "error": "the sending process died before the end of the transfer"
                                   + _log_tail(os.path.join(directory, "worker.log"))}
        result.append(status)
    return result


@procedure(FAST)
def impexp_abort(ctx: NodeContext, transfer_id: str) -> bool:
    """Stop a running transfer. -> True when it was running

    Stop a running transfer (its sender and OS script); True when one was running.
    """
    pid = _pid_of(_transfer_dir(ctx, transfer_id))
    if pid is None or not _alive(pid):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        return False
    return True


#: how long :func:`impexp_cleanup` waits for a stopped transfer's process to exit
#: before it kills it (its last status write must not race the removal)
CLEANUP_WAIT = 5.0


@procedure(FAST)
def impexp_cleanup(ctx: NodeContext, transfer_id: str) -> None:
    """Stop the transfer if needed and remove its state. -> None

    Stop the transfer if it still runs, wait until its process is gone (killed
    after :data:`CLEANUP_WAIT` seconds), and remove its state."""
    directory = _transfer_dir(ctx, transfer_id)
    pid = _pid_of(directory)
    if impexp_abort(ctx, transfer_id) and pid is not None \
            and not _gone_within(pid, CLEANUP_WAIT):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        _gone_within(pid, 1.0)
    _rmtree(directory)


def _gone_within(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``pid`` to exit; whether it did."""
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


# --- transfers: the receiving side ---------------------------------------------------------

class Sink:
    """Where arriving data goes; :meth:`commit` or :meth:`discard` ends it.

    ``limit`` is how many bytes it takes at most (None: no bound),
    ``expected`` the SHA-256 the data must have (None: the sender's is
    trusted), ``label`` names the data in messages.
    """

    limit: int | None = None
    expected: str | None = None
    label: str = "the image"

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def discard(self) -> None:
        raise NotImplementedError


class _FileSink(Sink):
    """An export image: written as ``<name>.partial``, renamed on commit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.partial = path + PARTIAL_SUFFIX
        try:
            os.unlink(self.partial)
        except FileNotFoundError:
            pass
        self.fh = open(self.partial, "xb")

    def write(self, data: bytes) -> None:
        self.fh.write(data)

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.rename(self.partial, self.path)

    def discard(self) -> None:
        try:
            self.fh.close()
        except OSError:
            pass
        try:
            os.unlink(self.partial)
        except OSError:
            pass


class _DiskSink(Sink):
    """The disk of an instance being imported, written raw (never past ``limit``)."""

    def __init__(self, path: str, limit: int) -> None:
        self.fh = open(path, "r+b")
        self.limit = limit

    def write(self, data: bytes) -> None:
        self.fh.write(data)

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()

    def discard(self) -> None:
        try:
            self.fh.close()
        except OSError:
            pass


class _ScriptSink(Sink):
    """The stdin of the OS ``import`` script of the disk at ``path`` (``limit`` bytes).

    On commit, once the script succeeded, a disk backed by a regular file
    must not have grown past its declared size (refused), and one the
    script left shorter is extended to it.
    """

    def __init__(self, run: osapi.RunningScript, path: str, limit: int) -> None:
        self.run = run
        self.path = path
        self.limit = limit

    def write(self, data: bytes) -> None:
        try:
            self.run.pipe.write(data)
        except BrokenPipeError:
            osapi.finish_disk_script(self.run)   # raises with the script's log
            raise errors.OpExecError("The OS import script stopped reading its input") from None

    def commit(self) -> None:
        osapi.finish_disk_script(self.run)
        st = os.stat(self.path)
        if not stat.S_ISREG(st.st_mode) or self.limit is None:
            return
        if st.st_size > self.limit:
            raise errors.OpExecError(
                f"{self.label}: the OS import script left the disk at {st.st_size} bytes,"
                f" larger than its declared {self.limit} bytes (refused)")
        if st.st_size < self.limit:
            os.truncate(self.path, self.limit)

    def discard(self) -> None:
        try:
            osapi.finish_disk_script(self.run, kill=True)
        except errors.GanetiError:
            pass


#: the largest UEFI/TPM state archive a move between clusters takes (bytes; a few kB in practice)
FIRMWARE_LIMIT = 64 * 1024 * 1024


def firmware_state_dir(ctx: NodeContext, dest: Any) -> str:
    """The UEFI/TPM state directory named by a ``firmware`` source or destination
    (``{"kind": "firmware", "instance_uuid"}``)."""
    uuid = dest.get("instance_uuid") if isinstance(dest, dict) else None
    try:
        return kvm_firmware.state_dir(ctx.paths.kvm_firmware_dir, str(uuid or ""))
    except errors.ProgrammerError as exc:
        raise errors.OpExecError(f"Bad firmware state destination: {exc}") from exc


def firmware_state_bytes(ctx: NodeContext, source: Any) -> bytes:
    """A ``firmware`` source: the instance's UEFI/TPM state here as a tar.gz
    (:func:`ganeti.hypervisor.kvm.firmware.pack`), empty when it has none."""
    return kvm_firmware.pack(firmware_state_dir(ctx, source)) or b""


class _FirmwareSink(Sink):
    """An instance's UEFI/TPM state arriving from another cluster: kept in memory
    (at most :data:`FIRMWARE_LIMIT`), unpacked into its state directory on commit;
    an empty stream (the source had none) leaves nothing."""

    def __init__(self, sdir: str) -> None:
        self.sdir = sdir
        self.data = bytearray()
        self.limit = FIRMWARE_LIMIT
        self.label = "the UEFI/TPM state"

    def write(self, data: bytes) -> None:
        self.data += data

    def commit(self) -> None:
        if self.data:
            kvm_firmware.unpack(bytes(self.data), self.sdir)

    def discard(self) -> None:
        self.data.clear()


def disk_bytes(disk: Any) -> int | None:
    """The declared size in bytes of a ``disks_info`` entry (``size`` in MiB), if any."""
    size = disk.get("size") if isinstance(disk, dict) else None
    return int(size) * 1024 * 1024 if isinstance(size, int) and size >= 0 else None


def check_total(total: Any, limit: int | None, label: str) -> None:
    """Refuse an image the sender announced as larger than the disk (before any write)."""
    if isinstance(total, int) and limit is not None and total > limit:
        raise errors.OpExecError(f"{label}: the image ({total} bytes) is larger than the disk"
                                 f" ({limit} bytes, its declared size); refused")


def open_sink(ctx: NodeContext, dest: Any, total: Any) -> Sink:
    """Where a stream to ``dest`` goes (``{"kind": "export"|"import"|"firmware", ...}``;
    ``firmware``: a kvm instance's UEFI/TPM state, moved between clusters)."""
    if not isinstance(dest, dict):
        raise errors.OpExecError(f"Invalid stream destination {dest!r}")
    kind = dest.get("kind")
    if kind == "export":
        staging = _staging_path(ctx, str(dest.get("instance_name") or ""))
        if not os.path.isdir(staging):
            raise errors.OpExecError(f"No export of {dest.get('instance_name')} in progress"
                                     " on this node")
        image = _FileSink(os.path.join(staging, check_name(dest.get("file"), "image")))
        limit = dest.get("limit")
        image.limit = limit if isinstance(limit, int) and limit >= 0 else None
        image.label = str(dest.get("label") or image.label)
        return image
    if kind == "import":
        instance, index = dest.get("instance"), dest.get("index")
        if not isinstance(instance, dict) or not isinstance(index, int):
            raise errors.OpExecError("Import destination without instance or disk index")
        disks = instance.get("disks_info") or []
        if not 0 <= index < len(disks):
            raise errors.OpExecError(f"Instance {instance.get('name')} has no disk {index}")
        label = str(dest.get("label") or f"disk {index}")
        limit = disk_bytes(disks[index])
        check_total(total, limit, label)
        expected = dest.get("sha256")
        sink: Sink
        if instance.get("os"):
            os_inst = bos.os_instance(ctx, instance)
            run = osapi.start_disk_script(ctx.paths, os_inst, index, osapi.SCRIPT_IMPORT,
                                          clock=ctx.clock)
            sink = _ScriptSink(run, os_inst.disks[index].path, limit or 0)
        else:
            _, path = blockdev.assemble_disk(ctx, disks[index], str(instance.get("name")), index)
            sink = _DiskSink(path, limit or 0)
        sink.limit = limit
        sink.label = label
        sink.expected = expected if isinstance(expected, str) else None
        return sink
    if kind == "firmware":
        return _FirmwareSink(firmware_state_dir(ctx, dest))
    raise errors.OpExecError(f"Unknown stream destination kind {kind!r}")


def check_end(sink: Sink, end: Any, size: int, digest: str) -> None:
    """Refuse the end of a stream whose size or SHA-256 differ from the sender's or from
    the one the destination expects (the checksum ``config.ini`` records)."""
    if not isinstance(end, dict) or end.get("size") != size or end.get("sha256") != digest:
        raise errors.OpExecError(f"Checksum mismatch: received {size} bytes with SHA-256"
                                 f" {digest}, the sender sent {end!r}")
    if sink.expected is not None and sink.expected != digest:
        raise errors.OpExecError(
            f"{sink.label}: SHA-256 mismatch: the image has {digest[:16]}..., config.ini"
            f" records {sink.expected[:16]}... (the image was changed, truncated or damaged;"
            " refused)")


def _failure(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return "No space left on the receiving node"
        return f"{exc.strerror or exc}"
    return str(exc)


#: ``open_sink(dest, total)``: where a stream whose header names ``dest`` goes
SinkOpener = Callable[[Any, Any], "Sink"]


def receive_stream(ctx: NodeContext, initial: bytes, recv: Callable[[int], bytes], *,
                   sink_for: SinkOpener | None = None,
                   progress: Callable[[int, Any], None] | None = None) -> list[Any]:
    """Read one disk stream (``initial`` bytes already in, then ``recv``); the reply envelope.

    Everything written is removed again unless the end frame arrived and
    its size and SHA-256 match what was received.  ``sink_for`` picks the
    destination from the header's ``dest`` and ``total`` (default: the
    header's ``dest`` itself, as node daemons of one cluster send it; a
    listener of a move between clusters decides it alone);
    ``progress(done, total)`` follows every data frame.
    """
    opener: SinkOpener = sink_for or (lambda dest, total: open_sink(ctx, dest, total))
    total: Any = None
    reader = diskstream.FrameReader()
    reader.feed(initial)
    sink: Sink | None = None
    digest = hashlib.sha256()
    size = 0
    started = time.monotonic()
    try:
        while True:
            for kind, payload in reader.frames():
                if kind == diskstream.HEADER:
                    if sink is not None:
                        raise errors.OpExecError("Disk stream: second header frame")
                    header = serializer.loads(payload)
                    if not isinstance(header, dict):
                        header = {}
                    total = header.get("total")
                    sink = opener(header.get("dest"), total)
                elif sink is None:
                    raise errors.OpExecError("Disk stream: data before the header frame")
                elif kind == diskstream.DATA:
                    if sink.limit is not None and size + len(payload) > sink.limit:
                        raise errors.OpExecError(
                            f"{sink.label}: the image is larger than the disk ({sink.limit}"
                            " bytes, its declared size); refused")
                    sink.write(payload)
                    digest.update(payload)
                    size += len(payload)
                    if progress is not None:
                        progress(size, total)
                elif kind == diskstream.ABORT:
                    reason = serializer.loads(payload)
                    raise errors.OpExecError("The sender gave up: "
                                             f"{reason.get('error') if isinstance(reason, dict) else reason}")
                else:   # END
                    check_end(sink, serializer.loads(payload), size, digest.hexdigest())
                    sink.commit()
                    sink = None
                    logger.info("Received %d bytes in %.1fs", size, time.monotonic() - started)
                    return [True, {"size": size, "sha256": digest.hexdigest()}]
            data = recv(diskstream.MAX_DATA + 64)
            if not data:
                raise errors.OpExecError(f"The stream ended after {size} bytes, before its end"
                                         " frame (the sender or its node stopped)")
            reader.feed(data)
    except (errors.GanetiError, OSError) as exc:
        if sink is not None:
            sink.discard()
        logger.warning("Disk stream failed after %d bytes: %s", size, exc)
        return [False, _failure(exc)]
