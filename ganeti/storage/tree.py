"""Composition of device classes over a disk tree.

A disk is a tree of :class:`~ganeti.storage.base.DiskSpec` (``children``).
Each node of the tree is handled by the device class of its ``dev_type``,
which a *factory* (``dev_type -> device object``) supplies.  The walks here
are the only place that knows the order:

* create and assemble go children first (a parent is built on its
  children), and a create that fails removes again, in reverse order,
  whatever it created (also across the disks of :func:`create_disks`);
* shutdown and remove go parents first; remove carries on past a failing
  device and raises the first failure at the end (every volume that can go
  is gone, and the call can be repeated: removal is idempotent).

Pure logic: all I/O is in the device classes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ganeti import errors
from ganeti.storage.base import BaseStorage, DiskSpec

__all__ = ["DeviceFactory", "children_first", "parents_first", "create_tree",
           "create_disks", "assemble_tree", "shutdown_tree", "remove_tree"]

#: dev_type -> the device object handling that type on this node
DeviceFactory = Callable[[str], BaseStorage]


def children_first(disk: DiskSpec) -> Iterator[DiskSpec]:
    """Every device of the tree, each after all of its children (post-order)."""
    for child in disk.children:
        yield from children_first(child)
    yield disk


def parents_first(disk: DiskSpec) -> Iterator[DiskSpec]:
    """Every device of the tree, each before its children (pre-order)."""
    yield disk
    for child in disk.children:
        yield from parents_first(child)


def _remove_quietly(factory: DeviceFactory, created: Sequence[DiskSpec]) -> list[str]:
    """Remove ``created`` in reverse order; the failures, as text."""
    failures = []
    for spec in reversed(created):
        try:
            factory(spec.dev_type).remove(spec)
        except errors.StorageError as exc:
            failures.append(str(exc))
    return failures


def _rollback_error(exc: errors.StorageError, failures: list[str]) -> errors.StorageError:
    if not failures:
        return exc
    return errors.StorageError(f"{exc}; removing what was created failed too:"
                               f" {'; '.join(failures)}")


def create_tree(factory: DeviceFactory, disk: DiskSpec) -> str:
    """Create every device of ``disk``, children first; the top device's path.

    On failure the devices created by this call are removed again and the
    error is raised (naming the removals that failed as well, if any).
    """
    return create_disks(factory, [disk])[0]


def create_disks(factory: DeviceFactory, disks: Sequence[DiskSpec]) -> list[str]:
    """Create several disk trees; all or nothing (see :func:`create_tree`)."""
    created: list[DiskSpec] = []
    paths = []
    try:
        for disk in disks:
            path = ""
            for spec in children_first(disk):
                path = factory(spec.dev_type).create(spec)
                created.append(spec)
            paths.append(path)
    except errors.StorageError as exc:
        raise _rollback_error(exc, _remove_quietly(factory, created)) from exc
    return paths


def assemble_tree(factory: DeviceFactory, disk: DiskSpec) -> str:
    """Make every device of ``disk`` usable, children first; the top device's path."""
    path = ""
    for spec in children_first(disk):
        path = factory(spec.dev_type).assemble(spec)
    return path


def shutdown_tree(factory: DeviceFactory, disk: DiskSpec) -> None:
    """Shut every device of ``disk`` down, parents first (the data stays)."""
    for spec in parents_first(disk):
        factory(spec.dev_type).shutdown(spec)


def remove_tree(factory: DeviceFactory, disk: DiskSpec) -> None:
    """Remove every device of ``disk``, parents first, as far as possible.

    Missing devices are not an error.  When a device cannot be removed the
    others are still tried, then the first failure is raised.
    """
    failures: list[errors.StorageError] = []
    for spec in parents_first(disk):
        try:
            factory(spec.dev_type).remove(spec)
        except errors.StorageError as exc:
            failures.append(exc)
    if failures:
        if len(failures) == 1:
            raise failures[0]
        raise errors.StorageError("; ".join(str(f) for f in failures)) from failures[0]
