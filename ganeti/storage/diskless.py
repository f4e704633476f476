"""The ``diskless`` template: instances without disks; every call is a no-op."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ganeti import constants, errors
from ganeti.storage import base

__all__ = ["DisklessStorage"]


class DisklessStorage(base.BaseStorage):
    """No volumes at all: creation yields an empty path, sizes are 0."""

    TEMPLATE = constants.DT_DISKLESS

    def create(self, disk: base.DiskSpec) -> str:
        return ""

    def remove(self, disk: base.DiskSpec) -> None:
        return None

    def grow(self, disk: base.DiskSpec, amount: int) -> int:
        raise errors.StorageError("Diskless instances have no disks to grow")

    def assemble(self, disk: base.DiskSpec) -> str:
        return ""

    def shutdown(self, disk: base.DiskSpec) -> None:
        return None

    def rename(self, disk: base.DiskSpec, new_logical_id: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(new_logical_id)

    def get_size(self, disk: base.DiskSpec) -> int:
        return 0

    def get_path(self, disk: base.DiskSpec) -> str:
        return ""

    def export_stream(self, disk: base.DiskSpec,
                      chunk_size: int = base.DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        return iter(())

    def import_stream(self, disk: base.DiskSpec, chunks: Iterable[bytes]) -> int:
        for chunk in chunks:
            if chunk:
                raise errors.StorageError("Cannot import data into a diskless instance")
        return 0

    def verify(self) -> list[str]:
        return []
