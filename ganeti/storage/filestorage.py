"""File-backed disks: ``file`` (node-local) and ``sharedfile`` (shared dir).

A disk is a sparse image file ``<storage dir>/<instance>/<uuid>.file.disk<N>``;
its ``logical_id`` is ``(driver, path)`` (driver ``loop`` by default).

Paths are only used when they lie inside an *allowed* directory: the
configured storage directory plus every path listed in
``paths.file_storage_paths_file`` (one absolute path a line, ``#``
comments).  Paths are resolved with ``realpath`` first, so ``..`` and
symlink tricks are refused.

Virtual clusters: nodes are different roots on one machine.  A node-local
path from the config such as ``/srv/ganeti/file-storage/...`` is taken
below the node's root when it is not allowed as written; an absolute
shared directory outside all roots (the usual ``sharedfile`` setup) is used
as written, so every node sees the same files.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ganeti import constants, errors, pathutils
from ganeti.storage import base

__all__ = ["FileStorage", "SharedFileStorage", "file_logical_id", "read_allowed_paths",
           "FILE_DRIVERS"]

logger = logging.getLogger(__name__)

FILE_DRIVERS = frozenset(["loop", "blktap", "blktap2"])


def file_logical_id(storage_dir: str, instance_name: str, disk_uuid: str, index: int,
                    driver: str = "loop") -> tuple[str, str]:
    """The ``(driver, path)`` logical id of disk ``index`` of an instance."""
    return (driver, os.path.join(storage_dir, instance_name, f"{disk_uuid}.file.disk{index}"))


def read_allowed_paths(filename: str) -> list[str]:
    """The paths listed in a file-storage-paths file (missing file: none)."""
    try:
        with open(filename, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise errors.StorageError(f"Cannot read allowed file storage paths {filename}: {exc}") from exc
    result = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not os.path.isabs(line):
            logger.warning("Ignoring relative path %r in %s", line, filename)
            continue
        result.append(line)
    return result


def _under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip(os.sep) + os.sep)


class FileStorage(base.BaseStorage):
    """Sparse image files in a per-instance directory of the storage dir."""

    TEMPLATE = constants.DT_FILE
    #: True: a configured storage dir is taken below the node root (node-local)
    REROOT_STORAGE_DIR = True

    def __init__(self, paths: pathutils.Paths, *, storage_dir: str | None = None,
                 allowed_paths: Sequence[str] = ()) -> None:
        super().__init__(paths)
        if storage_dir:
            if not os.path.isabs(storage_dir):
                raise errors.StorageError(f"Storage directory {storage_dir!r} is not absolute")
            if self.REROOT_STORAGE_DIR:
                storage_dir = self._reroot(storage_dir)
        else:
            storage_dir = self._default_dir()
        self.storage_dir = os.path.normpath(storage_dir)
        self._extra_allowed = list(allowed_paths)

    def _default_dir(self) -> str:
        return self.paths.file_storage_dir

    def _reroot(self, path: str) -> str:
        if os.path.realpath(self.paths.root) == "/" or self.paths.contains(path):
            return path
        return os.path.join(self.paths.root, path.lstrip(os.sep))

    # --- paths --------------------------------------------------------------

    def allowed_dirs(self) -> list[str]:
        """Real paths of every directory disks may live in."""
        listed = read_allowed_paths(self.paths.file_storage_paths_file) + self._extra_allowed
        dirs = [self.storage_dir]
        for entry in listed:
            dirs.append(entry)
            dirs.append(self._reroot(entry))
        seen: list[str] = []
        for d in dirs:
            real = os.path.realpath(d)
            if real != os.sep and real not in seen:
                seen.append(real)
        return seen

    def check_path(self, path: str) -> str:
        """The real path of ``path`` if it is inside an allowed directory.

        Tries the path as written, then below the node root.  Raises
        :class:`errors.StorageError` otherwise.
        """
        if not isinstance(path, str) or not os.path.isabs(path):
            raise errors.StorageError(f"File storage path {path!r} is not absolute")
        allowed = self.allowed_dirs()
        for candidate in (path, self._reroot(path)):
            real = os.path.realpath(candidate)
            if any(_under(real, d) for d in allowed):
                return real
        raise errors.StorageError(
            f"File storage path {path} is outside the allowed directories"
            f" ({', '.join(allowed)})")

    def _id_path(self, logical_id: tuple[Any, ...] | list[Any]) -> str:
        if (not isinstance(logical_id, (tuple, list)) or len(logical_id) != 2
                or logical_id[0] not in FILE_DRIVERS or not isinstance(logical_id[1], str)):
            raise errors.StorageError(
                f"Invalid logical id {logical_id!r} for a {self.TEMPLATE} disk:"
                f" expected (driver, path) with driver in {sorted(FILE_DRIVERS)}")
        return self.check_path(logical_id[1])

    def get_path(self, disk: base.DiskSpec) -> str:
        return self._id_path(disk.logical_id)

    def make_logical_id(self, instance_name: str, disk_uuid: str, index: int,
                        driver: str = "loop") -> tuple[str, str]:
        """The logical id for a new disk in this node's storage dir."""
        return file_logical_id(self.storage_dir, instance_name, disk_uuid, index, driver)

    def _must_exist(self, disk: base.DiskSpec) -> str:
        path = self.get_path(disk)
        if not os.path.isfile(path):
            raise errors.StorageError(f"Disk {disk.uuid} ({path}) does not exist")
        return path

    def _cleanup_dir(self, directory: str) -> None:
        """Remove an empty per-instance directory (never an allowed root)."""
        if directory in self.allowed_dirs():
            return
        try:
            os.rmdir(directory)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                logger.warning("Cannot remove directory %s: %s", directory, exc)

    # --- operations ---------------------------------------------------------

    def create(self, disk: base.DiskSpec) -> str:
        """Create a sparse file of ``disk.size`` MiB (refuses existing files)."""
        if not isinstance(disk.size, int) or disk.size <= 0:
            raise errors.StorageError(f"Invalid size {disk.size!r} MiB for disk {disk.uuid}")
        path = self.get_path(disk)
        try:
            os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        except FileExistsError:
            raise errors.StorageError(f"Disk file {path} already exists") from None
        except OSError as exc:
            raise errors.StorageError(f"Cannot create disk file {path}: {exc}") from exc
        try:
            os.ftruncate(fd, disk.size * base.MIB)
        except OSError as exc:
            os.close(fd)
            os.unlink(path)
            raise errors.StorageError(f"Cannot size disk file {path} to {disk.size} MiB: {exc}") from exc
        os.close(fd)
        logger.info("Created %s disk %s (%d MiB)", self.TEMPLATE, path, disk.size)
        return path

    def remove(self, disk: base.DiskSpec) -> None:
        path = self.get_path(disk)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise errors.StorageError(f"Cannot remove disk file {path}: {exc}") from exc
        self._cleanup_dir(os.path.dirname(path))

    def grow(self, disk: base.DiskSpec, amount: int) -> int:
        if not isinstance(amount, int) or amount < 0:
            raise errors.StorageError(f"Invalid grow amount {amount!r} MiB for disk {disk.uuid}")
        path = self._must_exist(disk)
        try:
            new_bytes = os.stat(path).st_size + amount * base.MIB
            os.truncate(path, new_bytes)
        except OSError as exc:
            raise errors.StorageError(f"Cannot grow disk file {path}: {exc}") from exc
        return new_bytes // base.MIB

    def assemble(self, disk: base.DiskSpec) -> str:
        return self._must_exist(disk)

    def shutdown(self, disk: base.DiskSpec) -> None:
        self.get_path(disk)  # validates the id; nothing to tear down for files

    def rename(self, disk: base.DiskSpec, new_logical_id: tuple[Any, ...]) -> tuple[Any, ...]:
        old = self._must_exist(disk)
        new = self._id_path(new_logical_id)
        if new == old:
            return tuple(new_logical_id)
        if os.path.exists(new):
            raise errors.StorageError(f"Cannot rename disk {disk.uuid}: {new} already exists")
        try:
            os.makedirs(os.path.dirname(new), mode=0o750, exist_ok=True)
            os.rename(old, new)
        except OSError as exc:
            raise errors.StorageError(f"Cannot rename disk file {old} to {new}: {exc}") from exc
        self._cleanup_dir(os.path.dirname(old))
        return tuple(new_logical_id)

    def rename_dir(self, old_dir: str, new_dir: str) -> None:
        """Rename a per-instance directory (instance rename); both must be allowed."""
        old, new = self.check_path(old_dir), self.check_path(new_dir)
        if not os.path.isdir(old):
            raise errors.StorageError(f"Directory {old} does not exist")
        if os.path.exists(new):
            raise errors.StorageError(f"Cannot rename {old}: {new} already exists")
        try:
            os.makedirs(os.path.dirname(new), mode=0o750, exist_ok=True)
            os.rename(old, new)
        except OSError as exc:
            raise errors.StorageError(f"Cannot rename directory {old} to {new}: {exc}") from exc

    def get_size(self, disk: base.DiskSpec) -> int:
        path = self._must_exist(disk)
        try:
            return os.stat(path).st_size // base.MIB
        except OSError as exc:
            raise errors.StorageError(f"Cannot stat disk file {path}: {exc}") from exc

    def export_stream(self, disk: base.DiskSpec,
                      chunk_size: int = base.DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        return base.read_chunks(self._must_exist(disk), chunk_size, disk)

    def import_stream(self, disk: base.DiskSpec, chunks: Iterable[bytes]) -> int:
        """Write the data from offset 0; refuses more data than the disk holds."""
        path = self._must_exist(disk)
        try:
            limit = os.stat(path).st_size
        except OSError as exc:
            raise errors.StorageError(f"Cannot write disk file {path}: {exc}") from exc
        return base.write_chunks(path, chunks, limit, disk)

    def verify(self) -> list[str]:
        problems = []
        d = self.storage_dir
        if not any(_under(os.path.join(os.path.realpath(d), "x"), a) for a in self.allowed_dirs()):
            problems.append(f"Storage directory {d} is not allowed")
        if os.path.exists(d):
            if not os.path.isdir(d):
                problems.append(f"Storage path {d} is not a directory")
            elif not os.access(d, os.W_OK | os.X_OK):
                problems.append(f"Storage directory {d} is not writable")
        else:
            parent = d
            while not os.path.exists(parent):
                parent = os.path.dirname(parent)
            if not os.access(parent, os.W_OK | os.X_OK):
                problems.append(f"Storage directory {d} does not exist and cannot be created")
        return problems


class SharedFileStorage(FileStorage):
    """Like ``file``, in a directory every node sees (NFS, or one dir in a
    virtual cluster); a configured directory is used exactly as written."""

    TEMPLATE = constants.DT_SHARED_FILE
    REROOT_STORAGE_DIR = False

    def _default_dir(self) -> str:
        return self.paths.shared_file_storage_dir
