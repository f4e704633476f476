"""Node side of the storage unit listing (``gnt-node list-storage``).

For the file based storage types the node has one unit per storage
directory: its name is the directory (canonical, as the master sent it),
``size``/``free`` are the file system's total and available space, and
``used`` is the size of the files below the directory (their length, so a
sparse disk file counts whole), in MiB (rounded down).  A directory not created yet holds nothing (``used`` 0) and is
measured through its nearest existing parent.

The LVM types (``lvm-vg``: volume groups, ``lvm-pv``: physical volumes)
take no arguments; their figures come from ``vgs``/``pvs`` (through
``ctx.storage_runner``), a VG is always allocatable, a PV when
``pvchange -x`` allows it.  Only a PV's ``allocatable`` can be changed
(:func:`storage_modify`) and only a VG repaired (:func:`storage_execute`,
``vgreduce --removemissing``).  See doc/storage.md.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ganeti import constants, errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, procedure
from ganeti.backend.node import storage_path
from ganeti.storage import lvm

__all__ = ["storage_list", "volume_list", "storage_modify", "storage_execute"]

_MIB = 1024 * 1024
#: the fields a unit of a file based type reports
_FILE_FIELDS = frozenset([constants.SF_NAME, constants.SF_SIZE, constants.SF_USED,
                          constants.SF_FREE, constants.SF_ALLOCATABLE])


def _tree_usage(path: str) -> int:
    """Total length in bytes of the files below ``path`` (0 if it does not exist)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path, onerror=None):
        for fname in files:
            try:
                st = os.lstat(os.path.join(dirpath, fname))
            except OSError:
                continue    # removed while we walked
            total += st.st_size
    return total


def _file_unit(ctx: NodeContext, su_name: str, directory: str, fields: list[str]) -> list[Any]:
    measured = storage_path(ctx, su_name, directory)
    try:
        st = os.statvfs(measured)
    except OSError as exc:
        raise errors.StorageError(f"Cannot measure the storage directory {directory}:"
                                  f" {exc.strerror}") from exc
    local = measured if os.path.normpath(measured) == os.path.normpath(directory) \
        else ctx.local_path(directory)
    values = {
        constants.SF_NAME: directory,
        constants.SF_SIZE: st.f_blocks * st.f_frsize // _MIB,
        constants.SF_FREE: st.f_bavail * st.f_frsize // _MIB,
        constants.SF_USED: _tree_usage(local) // _MIB if os.path.isdir(local) else 0,
        constants.SF_ALLOCATABLE: True,
    }
    return [values[f] for f in fields]


@procedure(FAST)
def storage_list(ctx: NodeContext, su_name: str, su_args: list, name: str | None,
                 fields: list) -> list[list[Any]]:
    """Storage units of type su_name (file/sharedfile: su_args [directory]), only name if given:
    [[value per field], ...] (doc/storage.md).

    The storage units of type ``su_name``: one row per unit, ``fields`` in order.

    ``su_args`` is ``[directory]`` (canonical) for ``file`` and
    ``sharedfile``, ``[]`` for ``lvm-vg`` and ``lvm-pv``; ``name`` limits the
    answer to that unit.  Raises
    :class:`errors.StorageError` for other types and unknown fields.
    """
    if su_name not in constants.STS_REPORT:
        raise errors.StorageError(f"Storage type '{su_name}' is not supported on this node"
                                  f" (supported: {', '.join(sorted(constants.STS_REPORT))})")
    unknown = [f for f in fields if f not in _FILE_FIELDS]
    if unknown:
        raise errors.StorageError(f"Unknown storage field(s) for '{su_name}':"
                                  f" {', '.join(map(str, unknown))}")
    if su_name in (constants.ST_LVM_VG, constants.ST_LVM_PV):
        return _lvm_units(ctx, su_name, su_args, name, list(fields))
    if len(su_args) != 1 or not isinstance(su_args[0], str) or not os.path.isabs(su_args[0]):
        raise errors.StorageError(f"Storage type '{su_name}' needs [directory] as arguments,"
                                  f" got {su_args!r}")
    directory = os.path.normpath(su_args[0])
    if name is not None and os.path.normpath(name) != directory:
        return []
    return [_file_unit(ctx, su_name, directory, list(fields))]


def lvm_unit_values(units: list[Any]) -> list[dict[str, Any]]:
    """The storage fields of ``lvm.VgInfo``/``lvm.PvInfo`` records (pure)."""
    out = []
    for unit in units:
        if isinstance(unit, lvm.VgInfo):
            values = {constants.SF_NAME: unit.name, constants.SF_SIZE: unit.size,
                      constants.SF_USED: unit.size - unit.free, constants.SF_FREE: unit.free,
                      constants.SF_ALLOCATABLE: True}
        else:
            values = {constants.SF_NAME: unit.name, constants.SF_SIZE: unit.size,
                      constants.SF_USED: unit.used, constants.SF_FREE: unit.free,
                      constants.SF_ALLOCATABLE: unit.allocatable}
        out.append(values)
    return out


def _lvm_units(ctx: NodeContext, su_name: str, su_args: list, name: str | None,
               fields: list[str]) -> list[list[Any]]:
    if su_args:
        raise errors.StorageError(f"Storage type '{su_name}' takes no arguments,"
                                  f" got {su_args!r}")
    found: list[Any] = (lvm.list_vgs(ctx.storage_runner) if su_name == constants.ST_LVM_VG
                        else lvm.list_pvs(ctx.storage_runner))
    rows = lvm_unit_values(found)
    return [[row[f] for f in fields] for row in rows
            if name is None or row[constants.SF_NAME] == name]


@procedure(FAST)
def storage_modify(ctx: NodeContext, su_name: str, su_args: list, name: str,
                   changes: dict) -> None:
    """Change fields of a storage unit: only an lvm-pv's allocatable (pvchange -x). -> None

    Change ``changes`` of storage unit ``name``: only an ``lvm-pv``'s
    ``allocatable`` (``pvchange -x y|n``).  :class:`errors.StorageError` otherwise."""
    modifiable = constants.MODIFIABLE_STORAGE_FIELDS.get(su_name, frozenset())
    extra = sorted(set(changes) - modifiable)
    if not modifiable or extra:
        raise errors.StorageError(f"Storage units of type '{su_name}' cannot change"
                                  f" {', '.join(extra) or 'anything'}")
    if su_args:
        raise errors.StorageError(f"Storage type '{su_name}' takes no arguments")
    value = changes.get(constants.SF_ALLOCATABLE)
    if value is not None:
        if not isinstance(value, bool):
            raise errors.StorageError(f"Invalid value {value!r} for allocatable")
        lvm.set_pv_allocatable(ctx.storage_runner, name, value)


@procedure(NORMAL)
def storage_execute(ctx: NodeContext, su_name: str, su_args: list, name: str,
                    op: str) -> None:
    """Run an operation on a storage unit: only fix-consistency of an lvm-vg (vgreduce
    --removemissing). -> None

    Run operation ``op`` on storage unit ``name``: only ``fix-consistency`` of an
    ``lvm-vg`` (``vgreduce --removemissing``)."""
    if op not in constants.VALID_STORAGE_OPERATIONS.get(su_name, frozenset()):
        raise errors.StorageError(f"Operation '{op}' is not valid for storage type"
                                  f" '{su_name}'")
    if su_args:
        raise errors.StorageError(f"Storage type '{su_name}' takes no arguments")
    lvm.repair_vg(ctx.storage_runner, name)


def _unit_dir(ctx: NodeContext, stype: str, directory: str) -> str:
    """This node's path of a storage directory (a ``sharedfile`` directory outside
    the node root, the virtual cluster's shared one, as written)."""
    if (stype == constants.ST_SHARED_FILE and not ctx.paths.contains(directory)
            and os.path.isdir(directory)):
        return directory
    return ctx.local_path(directory)


@procedure(FAST)
def volume_list(ctx: NodeContext, units: list) -> list[list[Any]]:
    """Disk files below storage directories [[type, directory], ...] and LVs of [[lvm-vg, vg],
    ...] (gnt-node volumes): [[directory or vg, relative name or lv, size in bytes], ...].

    The disk files below the given storage directories and the logical volumes of
    the given volume groups (``gnt-node volumes``).

    ``units``: ``[[storage type, canonical directory or VG name], ...]``
    (``file``, ``sharedfile``, ``lvm-vg``).  One ``[directory, name relative to
    it, size in bytes]`` per regular file (symbolic links are not followed; a
    directory that does not exist holds nothing), ``[vg, lv name, size in
    bytes]`` per logical volume.  Raises :class:`errors.StorageError` for
    another storage type, a directory that is not absolute or an invalid VG.
    """
    out: list[list[Any]] = []
    for unit in units:
        if (isinstance(unit, (list, tuple)) and len(unit) == 2
                and unit[0] == constants.ST_LVM_VG and isinstance(unit[1], str)
                and not unit[1].startswith("/")):
            out += [[lv.vg, lv.name, lv.size * _MIB]
                    for lv in lvm.list_lvs(ctx.storage_runner, unit[1])]
            continue
        if (not isinstance(unit, (list, tuple)) or len(unit) != 2
                or unit[0] not in (constants.ST_FILE, constants.ST_SHARED_FILE)
                or not isinstance(unit[1], str)
                or not os.path.isabs(unit[1])):
            raise errors.StorageError(f"Invalid storage unit {unit!r}: expected [file or"
                                      " sharedfile, absolute directory] or [lvm-vg, vg]")
        directory = os.path.normpath(unit[1])
        local = _unit_dir(ctx, unit[0], directory)
        for dirpath, _dirs, files in os.walk(local, followlinks=False):
            for fname in files:
                path = os.path.join(dirpath, fname)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue    # removed while we walked
                if stat.S_ISREG(st.st_mode):
                    out.append([directory, os.path.relpath(path, local), st.st_size])
    return out
