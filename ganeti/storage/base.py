"""The block device interface: one class per device type.

A disk is a tree, as in Ganeti: an ``objects.Disk`` has a ``dev_type``, a
``logical_id`` naming its volume and ``children`` (the devices it is built
on; a DRBD disk has its data and metadata LVs as children, a ``plain``,
``file`` or ``sharedfile`` disk none).  The node side has one device class
per ``dev_type``, each handling one node of the tree;
:mod:`ganeti.storage.tree` composes them for a whole tree (children first on
create and assemble, parents first on shutdown and remove).

A device class runs on a node and is called only by ``ganeti.backend``.
It never sees config objects: the backend turns an ``objects.Disk`` into a
:class:`DiskSpec` (uuid, size in MiB, logical_id, children, owning
instance...).  One device object serves every disk of its type on the node;
it is built per request by ``storage.get_storage(dev_type, paths, ...)`` and
keeps no state in memory.  Classes that run external commands take a
command runner (:mod:`ganeti.storage.runner`) so that tests can record them.

Writing a new storage type
--------------------------
1. Subclass :class:`BaseStorage` in ``ganeti/storage/<name>.py`` and set
   ``TEMPLATE`` to its ``constants.DT_*``.
2. Implement the abstract methods.  ``create`` must refuse to overwrite an
   existing volume; ``remove`` must be idempotent (a missing volume is not
   an error) so that a failed ``instance add`` can always be rolled back.
3. Sizes are MiB everywhere.  Raise :class:`errors.StorageError` with a
   message that names the disk for every failure; never let ``OSError``
   escape.
4. ``export_stream``/``import_stream`` move raw disk data, used by
   ``instance move`` and export/import; ``import_stream`` must refuse data
   larger than the disk.
5. Register the class in ``STORAGE_TYPES`` in ``ganeti/storage/__init__.py``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors, pathutils

__all__ = ["DiskSpec", "DeviceStatus", "BaseStorage", "BlockDevice", "MIB", "DEFAULT_CHUNK_SIZE",
           "read_chunks", "write_chunks"]

MIB = 1024 * 1024
DEFAULT_CHUNK_SIZE = MIB


@dataclass(frozen=True)
class DiskSpec:
    """A disk (one node of a disk tree) as a device class needs it.

    ``logical_id`` is the type-specific id from the config (for file based
    templates ``(driver, path)``, for ``plain`` ``(vg, lv_name)``); ``size``
    is in MiB; ``children`` are the specs of the devices it is built on;
    ``spindles`` the number of physical volumes asked for (``plain`` with
    exclusive storage); ``tag`` a text the volume is labelled with where the
    type can (an LVM tag, Ganeti's ``originstname+<instance>``); ``dynamic``
    what the master adds for one call and never stores (``drbd``: both
    nodes' names and addresses, :mod:`ganeti.storage.drbd`).
    """

    uuid: str
    size: int
    logical_id: tuple[Any, ...] = ()
    instance_name: str = ""
    index: int = 0
    name: str | None = None
    mode: str = constants.DISK_RDWR
    dev_type: str = ""
    children: tuple[DiskSpec, ...] = ()
    spindles: int | None = None
    tag: str = ""
    dynamic: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceStatus:
    """What :meth:`BaseStorage.status` reports of an existing volume.

    ``size`` in MiB; ``active`` whether the volume is usable now (an LV
    activated; a file always); ``spindles`` the physical volumes it lies on
    (None where the notion does not apply).
    """

    path: str
    size: int
    active: bool
    spindles: int | None = None


class BaseStorage(abc.ABC):
    """Abstract block device class: one device type on one node."""

    #: the constants.DT_* this class implements
    TEMPLATE: str = ""

    def __init__(self, paths: pathutils.Paths) -> None:
        self.paths = paths

    @abc.abstractmethod
    def create(self, disk: DiskSpec) -> str:
        """Create the volume of ``disk`` (``disk.size`` MiB); return its path.

        Refuses to overwrite an existing volume.
        """

    @abc.abstractmethod
    def remove(self, disk: DiskSpec) -> None:
        """Remove the volume; a missing volume is not an error."""

    @abc.abstractmethod
    def grow(self, disk: DiskSpec, amount: int) -> int:
        """Grow the volume by ``amount`` MiB; return the new size (MiB)."""

    @abc.abstractmethod
    def assemble(self, disk: DiskSpec) -> str:
        """Make the volume usable on this node; return the device/file path."""

    @abc.abstractmethod
    def shutdown(self, disk: DiskSpec) -> None:
        """Undo :meth:`assemble` (the data stays)."""

    @abc.abstractmethod
    def rename(self, disk: DiskSpec, new_logical_id: tuple[Any, ...]) -> tuple[Any, ...]:
        """Move the volume to ``new_logical_id``; return the id now in use."""

    @abc.abstractmethod
    def get_size(self, disk: DiskSpec) -> int:
        """Current size of the volume in MiB (rounded down)."""

    @abc.abstractmethod
    def get_path(self, disk: DiskSpec) -> str:
        """Path of the volume on this node (without checking it exists)."""

    @abc.abstractmethod
    def export_stream(self, disk: DiskSpec,
                      chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        """Yield the raw data of the volume in chunks."""

    @abc.abstractmethod
    def import_stream(self, disk: DiskSpec, chunks: Iterable[bytes]) -> int:
        """Write ``chunks`` from offset 0 into the volume; return bytes written."""

    @abc.abstractmethod
    def verify(self) -> list[str]:
        """Problems with this storage on the node (empty list: all fine)."""

    def attach(self, disk: DiskSpec) -> bool:
        """Find an existing volume of ``disk`` (Ganeti's *attach*): True if it exists."""
        return self.exists(disk)

    def status(self, disk: DiskSpec) -> DeviceStatus | None:
        """Path, size and activity of the volume; None when it does not exist."""
        try:
            return DeviceStatus(path=self.get_path(disk), size=self.get_size(disk), active=True)
        except errors.StorageError:
            return None

    def activate_new(self, disk: DiskSpec, on_primary: bool) -> None:
        """Bring a volume just created (with its children) into service; ``on_primary``
        when this node is the instance's primary.  Only a device that must be set up
        at creation overrides this (``drbd``: attach, connect, and on the primary
        the initial sync)."""
        del disk, on_primary

    def open(self, disk: DiskSpec, force: bool = False) -> None:
        """Make the assembled volume writable here: the instance runs on this node.
        Only a mirrored device does something (``drbd``: become primary; ``force``:
        even when its data is not known to be up to date)."""
        del disk, force

    def mirror_status(self, disk: DiskSpec) -> Any:
        """The mirror state of the volume on this node (``drbd``: a
        :class:`ganeti.storage.drbd.DrbdStatus`), None for an unmirrored type or
        a mirror not set up."""
        del disk
        return None

    def set_info(self, disk: DiskSpec, text: str) -> None:
        """Label the volume with ``text`` (Ganeti's ``originstname+<instance>``),
        replacing its earlier label, where the type can hold one (an LVM tag);
        the other types keep nothing and do nothing."""
        del disk, text

    def snapshot(self, disk: DiskSpec, size: int) -> tuple[Any, ...]:
        """Make a point-in-time copy of the volume (``size`` MiB of change room);
        return its logical id.  Only types that can do it override this."""
        raise errors.StorageError(f"Disk {disk.uuid}: device type '{self.TEMPLATE}' cannot"
                                  " make snapshots")

    def exists(self, disk: DiskSpec) -> bool:
        """True when the volume of ``disk`` exists on this node."""
        try:
            self.get_size(disk)
        except errors.StorageError:
            return False
        return True


#: the name the device model uses for the interface
BlockDevice = BaseStorage


def write_chunks(path: str, chunks: Iterable[bytes], limit: int, disk: DiskSpec) -> int:
    """Write ``chunks`` into ``path`` (a disk file or block device) from offset 0 and
    return the bytes written; more than ``limit`` bytes is refused (the disk's size),
    and every failure is a :class:`errors.StorageError` naming the disk."""
    written = 0
    try:
        with open(path, "r+b") as fh:
            for chunk in chunks:
                if written + len(chunk) > limit:
                    raise errors.StorageError(f"Import into disk {disk.uuid} ({path}) exceeds"
                                              f" its size of {limit // MIB} MiB")
                fh.write(chunk)
                written += len(chunk)
    except OSError as exc:
        raise errors.StorageError(f"Cannot write {path} of disk {disk.uuid}: {exc}") from exc
    return written


def read_chunks(path: str, chunk_size: int, disk: DiskSpec) -> Iterator[bytes]:
    """The data of ``path`` (a disk file or block device) in chunks of ``chunk_size``;
    the file is opened at once (a failure raises here), read as the chunks are taken;
    every failure is a :class:`errors.StorageError` naming the disk."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise errors.StorageError(f"Cannot open {path} of disk {disk.uuid}: {exc}") from exc

    def chunks() -> Iterator[bytes]:
        with fh:
            while True:
                try:
                    chunk = fh.read(chunk_size)
                except OSError as exc:
                    raise errors.StorageError(f"Cannot read {path} of disk {disk.uuid}:"
                                              f" {exc}") from exc
                if not chunk:
                    return
                yield chunk
    return chunks()
