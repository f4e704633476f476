"""File helpers: durable atomic writes, bounded reads, directories."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import collections
import itertools
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from ganeti import errors
from ganeti.utils.bounded import read_limited

__all__ = ["write_file_atomic", "write_files_atomic", "ScratchPool", "read_file",
           "read_password_file", "read_limited",
           "read_regular_file", "remove_file", "ensure_dirs",
           "fsync_dir", "sync_dirs", "file_checksum", "DEFAULT_MAX_READ",
           "SYNC_FSYNC", "SYNC_SYNCFS", "SYNC_NONE"]

DEFAULT_MAX_READ = 64 * 1024 * 1024


def fsync_dir(path: str) -> None:
    """fsync a directory so that a rename in it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomic(path: str, data: bytes | str, *, mode: int = 0o644,
                      fsync: bool = True, uid: int | None = None,
                      gid: int | None = None) -> None:
    """Replace ``path`` with ``data`` so that readers see old or new, never half.

    Writes a temporary file in the same directory, fsyncs it, renames it over
    ``path`` and fsyncs the directory.  A crash at any point leaves either
    the old file or the new one; a leftover temporary file is named
    ``.<name>.tmp*`` and never read.  Raises :class:`OSError` (e.g. ENOSPC),
    in which case the old file is untouched and the temporary file removed.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    dirname, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.tmp", dir=dirname)
    try:
        try:
            os.fchmod(fd, mode)
            if uid is not None or gid is not None:
                os.fchown(fd, -1 if uid is None else uid, -1 if gid is None else gid)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync:
        fsync_dir(dirname)


SYNC_FSYNC = "fsync"     # one fsync per file
SYNC_SYNCFS = "syncfs"   # one syncfs(2) of the filesystem for the whole batch
SYNC_NONE = "none"       # no durability (tests, benchmarks of the rest)

_batch_seq = itertools.count(1)
_syncfs_fn = None


def _syncfs(path: str) -> None:
    """syncfs(2) of the filesystem holding ``path`` (Python has no wrapper)."""
    global _syncfs_fn
    if _syncfs_fn is None:
        _syncfs_fn = ctypes.CDLL(None, use_errno=True).syncfs
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs_fn(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)


def sync_dirs(dirs: Iterable[str], sync: str, *, synced: str | None = None) -> None:
    """Make the renames done in ``dirs`` durable, the way ``sync`` says.

    :data:`SYNC_FSYNC`: an fsync of every directory; :data:`SYNC_SYNCFS`:
    one ``syncfs`` per filesystem among them, none for the filesystem of
    ``synced`` (a path whose filesystem had a ``syncfs`` *after* the renames
    already); :data:`SYNC_NONE`: nothing.
    """
    if sync == SYNC_NONE:
        return
    if sync != SYNC_SYNCFS:
        for path in dirs:
            fsync_dir(path)
        return
    done = {os.stat(synced).st_dev} if synced is not None else set()
    for path in dirs:
        dev = os.stat(path).st_dev
        if dev not in done:
            _syncfs(path)
            done.add(dev)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2_fn: Callable[..., int] | None = None
_exchange_works = True


def _rename_exchange(old: str, new: str) -> bool:
    """Atomically swap the inodes behind ``old`` and ``new`` (renameat2).

    False when ``new`` does not exist or the kernel, C library or
    filesystem cannot exchange (then never tried again in this process).
    """
    global _renameat2_fn, _exchange_works
    if not _exchange_works:
        return False
    if _renameat2_fn is None:
        try:
            _renameat2_fn = ctypes.CDLL(None, use_errno=True).renameat2
        except AttributeError:      # C library without renameat2
            _exchange_works = False
            return False
    if _renameat2_fn(_AT_FDCWD, os.fsencode(old), _AT_FDCWD, os.fsencode(new),
                     _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT:
        return False
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        _exchange_works = False
        return False
    raise OSError(err, os.strerror(err), new)


class ScratchPool:
    """Spare inodes of one directory, recycled by :func:`write_files_atomic`.

    Replacing a file by rename costs a new inode and frees the old one.  On
    a busy filesystem (ext4 without a journal skips recently freed inodes
    when allocating) that allocation can cost more than the write itself.
    With a pool, the new content is written into a spare file and swapped
    in with ``RENAME_EXCHANGE``; the old inode becomes a spare.  A spare is
    reused only after ``cooling`` seconds, so a reader that opened the old
    file just before the swap still reads the old content, as with a plain
    rename (nobody keeps a queue file open for a second).  At most
    ``limit`` spares are kept; beyond that they are removed.  Spares are
    named ``.scratch-<pid>-<n>``; :meth:`adopt_leftovers` takes over those
    of earlier processes (call it when opening the directory).  Thread-safe.
    """

    PREFIX = ".scratch-"

    def __init__(self, directory: str, *, cooling: float = 1.0, limit: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self.cooling = cooling
        self.limit = limit
        self.clock = clock
        self._lock = threading.Lock()
        self._spares: collections.deque[tuple[float, str]] = collections.deque()
        self._names = itertools.count(1)

    def new_name(self) -> str:
        """A fresh spare file name in the directory (not created)."""
        return os.path.join(self.directory, f"{self.PREFIX}{os.getpid()}-{next(self._names)}")

    def take(self) -> str | None:
        """A cooled spare file, or None."""
        with self._lock:
            if self._spares and self._spares[0][0] <= self.clock():
                return self._spares.popleft()[1]
        return None

    def give(self, path: str) -> None:
        """Keep ``path`` (holding stale data) as a spare, or remove it when full."""
        with self._lock:
            if len(self._spares) < self.limit:
                self._spares.append((self.clock() + self.cooling, path))
                return
        try:
            os.unlink(path)
        except OSError:
            pass

    def __len__(self) -> int:
        with self._lock:
            return len(self._spares)

    def adopt_leftovers(self) -> int:
        """Take over the spare files of earlier processes; how many were found.

        They are usable at once (nobody reads them); those beyond ``limit``
        are removed.  Deleting them all would only make the filesystem
        allocate new inodes again.  Each one is claimed by renaming it to a
        name of this pool first, so that two processes adopting at the same
        time (node daemon children) never share a spare: the one whose
        rename fails leaves it to the other.
        """
        with self._lock:
            mine = {path for _, path in self._spares}
        found = 0
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if not name.startswith(self.PREFIX) or path in mine:
                continue
            with self._lock:
                keep = len(self._spares) < self.limit
            if not keep:
                try:
                    os.unlink(path)
                except OSError:
                    pass
                continue
            claimed = self.new_name()
            try:
                os.rename(path, claimed)
            except OSError:
                continue                   # another process claimed it
            found += 1
            with self._lock:
                self._spares.appendleft((0.0, claimed))
        return found


#: flags that keep an open from following a symbolic link or blocking on a FIFO
_NO_LINK = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _create_temp(path: str, mode: int) -> int:
    """Open the temporary file ``path`` for writing, never through a link.

    A regular leftover of the same name is truncated and reused; anything
    else there (a symbolic link planted at the predictable name, a FIFO) is
    removed first, so no link's target is ever written.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NO_LINK, mode)
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise
    os.unlink(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_LINK, mode)


def _open_spare(path: str) -> tuple[int, int, int]:
    """Open a pooled spare inode for rewriting: its descriptor, its current
    size and its permission bits; (-1, 0, 0) when it is gone or not a
    regular file.

    The spare is not truncated here: the new data is written over the old
    blocks and the file is cut to the new length afterwards
    (:func:`write_files_atomic`).  Truncating to zero first frees every
    block, a journal transaction of its own that waits for any commit in
    progress (on a disk shared with other busy writers, the most expensive
    step of a queue write); overwriting allocated blocks needs none.
    """
    try:
        fd = os.open(path, os.O_WRONLY | _NO_LINK)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EISDIR, errno.ELOOP, errno.ENXIO):
            return -1, 0, 0
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return -1, 0, 0
    return fd, st.st_size, stat.S_IMODE(st.st_mode)


def write_files_atomic(files: Mapping[str, bytes], *, mode: int = 0o640,
                       sync: str = SYNC_FSYNC, scratch: ScratchPool | None = None) -> None:
    """Replace every ``{path: data}`` atomically, with one durability barrier.

    Writes all temporary files (``.<name>.tmp<n>`` next to each target),
    makes them durable (``sync``: an fsync each, or one ``syncfs`` of the
    filesystem of the first file, or nothing), renames them into place in
    the mapping's order and fsyncs each touched directory once.  Cheaper
    than :func:`write_file_atomic` per file: a batch of N files costs one
    directory fsync per directory instead of N.  Readers see each file old
    or new, never half-written.  On :class:`OSError` the temporary files not
    yet renamed are removed; files already renamed stay replaced.

    With ``scratch`` (for files of its directory) the data goes into a
    spare inode where one is available, and an existing file is swapped
    with it rather than renamed over (see :class:`ScratchPool`).
    """
    if not files:
        return
    seq = next(_batch_seq)
    temps: list[tuple[str, str, bool]] = []
    dirs: dict[str, None] = {}
    try:
        for path, data in files.items():
            dirname, base = os.path.split(path)
            tmp = None
            if scratch is not None and dirname == scratch.directory:
                tmp = scratch.take()
            fd, stale, perms = -1, 0, -1
            if tmp is not None:
                fd, stale, perms = _open_spare(tmp)
                if fd < 0:
                    tmp = None
            pooled = tmp is not None
            if tmp is None:
                tmp = (scratch.new_name() if scratch is not None and dirname == scratch.directory
                       else os.path.join(dirname, f".{base}.tmp{os.getpid()}.{seq}"))
                fd = _create_temp(tmp, mode)
                perms = -1
            temps.append((tmp, path, pooled))
            try:
                if perms != mode:
                    # not the umask's, nor a leftover's (a spare of the pool
                    # that has ``mode`` already needs no call: a replicated
                    # job file costs a candidate a few system calls each)
                    os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if stale > len(data):
                    os.ftruncate(fd, len(data))     # the spare's old tail
                if sync == SYNC_FSYNC:
                    os.fsync(fd)
            finally:
                os.close(fd)
            dirs[dirname] = None
        if sync == SYNC_SYNCFS:
            _syncfs(next(iter(dirs)))
        while temps:
            tmp, path, _ = temps[0]
            if scratch is not None and tmp.startswith(scratch.directory + os.sep) \
                    and _rename_exchange(tmp, path):
                scratch.give(tmp)          # now holds the old inode
            else:
                os.replace(tmp, path)
            temps.pop(0)
        if sync != SYNC_NONE:
            for dirname in dirs:
                fsync_dir(dirname)
    finally:
        for tmp, _, pooled in temps:
            if pooled and scratch is not None:
                scratch.give(tmp)
                continue
            try:
                os.unlink(tmp)
            except OSError:
                pass


def read_file(path: str, *, max_size: int = DEFAULT_MAX_READ) -> bytes:
    """Read a whole file, refusing files larger than ``max_size`` bytes.

    Raises :class:`errors.ProgrammerError`-free :class:`OSError` for missing
    files and :class:`errors.GanetiError` when the file is too large.
    """
    with open(path, "rb") as fh:
        data = read_limited(fh, max_size)
    if len(data) > max_size:
        raise errors.GanetiError(f"File {path} is larger than {max_size} bytes")
    return data


def read_password_file(path: str) -> str:
    """The password in file ``path``: its first line without the line end (as
    Ganeti reads ``vnc_password_file``).  Raises :class:`OSError` when it
    cannot be read and :class:`errors.GanetiError` when that line is empty
    or the file is not small text (4 KiB at most, UTF-8)."""
    data = read_file(path, max_size=4096)
    try:
        line = data.decode("utf-8").splitlines()[0] if data else ""
    except UnicodeDecodeError as exc:
        raise errors.GanetiError(f"Password file {path} is not UTF-8 text") from exc
    if not line:
        raise errors.GanetiError(f"Password file {path} has an empty first line")
    return line


def read_regular_file(path: str) -> bytes | None:
    """Content of the regular file ``path``, or None when there is none.

    For files in a directory others may write into (the job queue): a
    symbolic link at ``path`` is not followed (``O_NOFOLLOW``) and the
    file is opened with ``O_NONBLOCK``, so that a FIFO cannot block the
    reader.  Raises :class:`errors.UntrustedFileError` when ``path`` is a
    symbolic link, a directory or not a regular file (the message names
    the entry by its base name, e.g. ``job-7 is a symbolic link``), and
    :class:`OSError` for other failures.
    """
    name = os.path.basename(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise errors.UntrustedFileError(f"{name} is a symbolic link", path) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise errors.UntrustedFileError(f"{name} is a directory", path)
        if not stat.S_ISREG(mode):
            raise errors.UntrustedFileError(f"{name} is not a regular file", path)
        with os.fdopen(fd, "rb") as fh:
            fd = -1   # the file object owns it now
            return fh.read()
    finally:
        if fd >= 0:
            os.close(fd)


def remove_file(path: str) -> bool:
    """Remove a file; returns False (no error) when it did not exist."""
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise
    return True


def ensure_dirs(dirs: list[tuple[str, int]]) -> None:
    """Create each ``(path, mode)`` directory (with parents) and set its mode."""
    for path, mode in dirs:
        os.makedirs(path, mode=mode, exist_ok=True)
        os.chmod(path, mode)


def file_checksum(path: str) -> str | None:
    """SHA-1 hex digest of a file's content, or None when it cannot be read.

    Used to compare cluster files across nodes (verify, node_verify).
    """
    digest = hashlib.sha1()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1024 * 1024), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()
