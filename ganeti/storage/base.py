"""The storage interface: one class per disk template.

A storage plug-in runs on a node and is called only by ``ganeti.backend``.
It never sees config objects: the backend turns an ``objects.Disk`` into a
:class:`DiskSpec` (uuid, size in MiB, logical_id, owning instance...).
One storage object serves every disk of its template on the node; it is
built per request by ``storage.get_storage(template, paths, ...)`` and
keeps no state in memory.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors, pathutils

__all__ = ["DiskSpec", "BaseStorage", "MIB", "DEFAULT_CHUNK_SIZE"]

MIB = 1024 * 1024
DEFAULT_CHUNK_SIZE = MIB


@dataclass(frozen=True)
class DiskSpec:
    """A disk as a storage plug-in needs it.

    ``logical_id`` is the template-specific id from the config (for file
    based templates ``(driver, path)``); ``size`` is in MiB.
    """

    uuid: str
    size: int
    logical_id: tuple[Any, ...] = ()
    instance_name: str = ""
    index: int = 0
    name: str | None = None
    mode: str = constants.DISK_RDWR


class BaseStorage(abc.ABC):
    """Abstract storage for one disk template on one node."""

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

    def exists(self, disk: DiskSpec) -> bool:
        """True when the volume of ``disk`` exists on this node."""
        try:
            self.get_size(disk)
        except errors.StorageError:
            return False
        return True
