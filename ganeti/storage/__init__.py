"""Storage plug-ins: a registry per disk template and a factory.

``STORAGE_TYPES`` maps a disk template (``constants.DT_*``) to its class;
:func:`get_storage` builds one for a node.  ``plain``, ``drbd`` and the
other templates are not implemented yet and are refused clearly.
"""

from __future__ import annotations

from collections.abc import Sequence

from ganeti import constants, errors, pathutils
from ganeti.storage.base import BaseStorage, DiskSpec
from ganeti.storage.diskless import DisklessStorage
from ganeti.storage.filestorage import FileStorage, SharedFileStorage

__all__ = ["STORAGE_TYPES", "get_storage", "BaseStorage", "DiskSpec"]

STORAGE_TYPES: dict[str, type[BaseStorage]] = {
    constants.DT_DISKLESS: DisklessStorage,
    constants.DT_FILE: FileStorage,
    constants.DT_SHARED_FILE: SharedFileStorage,
}


def get_storage(template: str, paths: pathutils.Paths, *, storage_dir: str | None = None,
                allowed_paths: Sequence[str] = ()) -> BaseStorage:
    """The storage object for ``template`` on the node described by ``paths``.

    ``storage_dir`` is the cluster's ``file_storage_dir`` or
    ``shared_file_storage_dir`` (file based templates only; default: the
    node's own); ``allowed_paths`` adds directories to the allow-list.
    Raises :class:`errors.StorageError` for unsupported templates.
    """
    cls = STORAGE_TYPES.get(template)
    if cls is None:
        raise errors.StorageError(f"Disk template '{template}' is not supported on this node"
                                  f" (supported: {', '.join(sorted(STORAGE_TYPES))})")
    if issubclass(cls, FileStorage):
        return cls(paths, storage_dir=storage_dir, allowed_paths=allowed_paths)
    return cls(paths)
