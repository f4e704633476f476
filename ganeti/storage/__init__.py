"""Block device classes: a registry per device type and a factory.

``STORAGE_TYPES`` maps a device type (``objects.Disk.dev_type``, one of
``constants.DT_*``) to its class; :func:`get_storage` builds one for a node
and :func:`device_factory` gives the ``dev_type -> device`` function the
tree walks of :mod:`ganeti.storage.tree` take.  The types Ganeti has
beyond these (``blockdev``, ``rbd``, ``ext``, ``gluster``) are refused
clearly.
"""

from __future__ import annotations

from collections.abc import Sequence

from ganeti import constants, errors, pathutils
from ganeti.storage.base import BaseStorage, BlockDevice, DeviceStatus, DiskSpec
from ganeti.storage.diskless import DisklessStorage
from ganeti.storage.drbd import DrbdDevice
from ganeti.storage.filestorage import FileStorage, SharedFileStorage
from ganeti.storage.lvm import LogicalVolume
from ganeti.storage.runner import CommandRunner, system_runner
from ganeti.storage.tree import DeviceFactory

__all__ = ["STORAGE_TYPES", "get_storage", "device_factory", "BaseStorage", "BlockDevice",
           "DeviceStatus", "DiskSpec", "DeviceFactory", "CommandRunner"]

STORAGE_TYPES: dict[str, type[BaseStorage]] = {
    constants.DT_DISKLESS: DisklessStorage,
    constants.DT_FILE: FileStorage,
    constants.DT_SHARED_FILE: SharedFileStorage,
    constants.DT_PLAIN: LogicalVolume,
    constants.DT_DRBD8: DrbdDevice,
}


def get_storage(template: str, paths: pathutils.Paths, *, storage_dir: str | None = None,
                allowed_paths: Sequence[str] = (), runner: CommandRunner = system_runner,
                exclusive_storage: bool = False, hostname: str = "") -> BaseStorage:
    """The device object for ``template`` (a dev_type) on the node of ``paths``.

    ``storage_dir`` is the cluster's ``file_storage_dir`` or
    ``shared_file_storage_dir`` (file based types only; default: the
    node's own); ``allowed_paths`` adds directories to the allow-list.
    ``runner`` runs the external commands of ``plain`` (LVM) and ``drbd``,
    ``exclusive_storage`` is the node's parameter of that name, and
    ``hostname`` the node's name (a ``drbd`` disk finds its side by it).
    Raises :class:`errors.StorageError` for unsupported types.
    """
    cls = STORAGE_TYPES.get(template)
    if cls is None:
        raise errors.StorageError(f"Disk template '{template}' is not supported on this node"
                                  f" (supported: {', '.join(sorted(STORAGE_TYPES))})")
    if issubclass(cls, FileStorage):
        return cls(paths, storage_dir=storage_dir, allowed_paths=allowed_paths)
    if issubclass(cls, LogicalVolume):
        return cls(paths, runner=runner, exclusive_storage=exclusive_storage)
    if issubclass(cls, DrbdDevice):
        return cls(paths, hostname=hostname, runner=runner)
    return cls(paths)


def device_factory(paths: pathutils.Paths, *, storage_dirs: dict[str, str | None] | None = None,
                   runner: CommandRunner = system_runner,
                   exclusive_storage: bool = False, hostname: str = "") -> DeviceFactory:
    """A ``dev_type -> device`` function for the tree walks (one object per type).

    ``storage_dirs`` gives the storage directory per file based type.
    """
    dirs = storage_dirs or {}
    made: dict[str, BaseStorage] = {}

    def factory(dev_type: str) -> BaseStorage:
        if dev_type not in made:
            made[dev_type] = get_storage(dev_type, paths, storage_dir=dirs.get(dev_type),
                                         runner=runner, exclusive_storage=exclusive_storage,
                                         hostname=hostname)
        return made[dev_type]
    return factory
