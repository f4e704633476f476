"""The LVM logical volume device (``plain``) and the LVM storage units.

A ``plain`` disk is one logical volume ``<disk uuid>.disk<N>`` in the
cluster's volume group; its ``logical_id`` is ``(vg_name, lv_name)`` and
its path ``/dev/<vg>/<lv>``.  Every LVM command goes through the command
runner (:mod:`ganeti.storage.runner`); their output is read by the pure
``parse_*`` functions below.  The commands (doc/storage.md, "Commands run
on the nodes"):

* create: ``lvcreate -L<size>m -n <lv> [--addtag <tag>] --wipesignatures y
  -y <vg> [pv...]`` (the tag: Ganeti's ``originstname+<instance>``, from
  the master's ``info``).  A failed ``lvcreate`` makes nothing; only then
  ``vgs`` and ``lvs`` say why in the operator's terms (no such VG, not
  enough room, the volume exists).  Every LVM command costs a process
  start and a device scan (half a second and more on a small node), so
  the common path runs one;
* remove: ``lvremove -f <vg>/<lv>``; when it fails, ``vgs`` and ``lvs <vg>``
  tell a volume already gone (fine: listings that worked do not show it)
  from a real failure (also when a listing fails: no proof it is gone);
* grow: ``lvs`` (the volume), ``vgs`` (room), ``lvextend -L+<n>m <vg>/<lv>
  [pv...]`` (with exclusive storage the PVs the volume lies on, which must
  have the room), ``lvs`` (the new size);
* rename: ``lvrename <vg> <old> <new>`` (``lvs`` after a failure: a missing
  volume is said so);
* snapshot: ``lvcreate -s -L<size>m -n <lv>.snap <vg>/<lv>``;
* size/status: ``lvs --noheadings --units m --nosuffix --separator '|'
  -o lv_name,vg_name,lv_size,lv_attr,devices,vg_extent_size <vg>/<lv>``
  (LVM rounds a size up to whole extents: :func:`rounded_size`; a volume
  so rounded reports the size it was asked for, doc/storage.md);
* assemble: ``lvchange -ay <vg>/<lv>``; shutdown leaves the volume active
  (as Ganeti does: a deactivated LV is of no use to anyone else).

Exclusive storage (Ganeti's ``exclusive_storage`` node parameter): a
volume gets physical volumes of its own.  The create then picks
``spindles`` (default 1) empty PVs with enough free space together and
names them to ``lvcreate``; the *spindles* of a volume are the number of
PVs it lies on.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors, pathutils
from ganeti.storage import base
from ganeti.storage.runner import CommandRunner, failure, run_checked, system_runner
from ganeti.utils.process import RunResult

__all__ = ["LogicalVolume", "LvInfo", "VgInfo", "PvInfo", "parse_lvs", "parse_vgs",
           "parse_pvs", "check_lvm_name", "lv_name_for", "list_vgs", "list_pvs",
           "list_lvs", "set_pv_allocatable", "repair_vg", "SNAPSHOT_SUFFIX", "lvm_tag", "rounded_size"]

#: the separator asked of lvs/vgs/pvs (never part of an LVM name)
SEP = "|"
_REPORT = ["--noheadings", "--units", "m", "--nosuffix", "--separator", SEP]
_LV_FIELDS = "lv_name,vg_name,lv_size,lv_attr,devices,vg_extent_size"
_VG_FIELDS = "vg_name,vg_size,vg_free,pv_count"
_PV_FIELDS = "pv_name,vg_name,pv_size,pv_free,pv_attr"
SNAPSHOT_SUFFIX = ".snap"
_NAME_RE = re.compile(r"^[A-Za-z0-9+_.][A-Za-z0-9+_.-]*$")
_DEVICE_RE = re.compile(r"^(.+)\((\d+)\)$")
#: characters LVM does not take in a tag, and the length we keep of one
_TAG_BAD_RE = re.compile(r"[^A-Za-z0-9_+.\-/=!:&#]")
TAG_MAX = 128


# --- pure parts ------------------------------------------------------------

def lv_name_for(disk_uuid: str, index: int) -> str:
    """The volume name of disk ``index`` (as Ganeti: ``<uuid>.disk<N>``)."""
    return f"{disk_uuid}.disk{index}"


def lvm_tag(text: str) -> str:
    """``text`` as a valid LVM tag: characters LVM refuses become ``_``, at most
    :data:`TAG_MAX` characters ("" stays "": no tag)."""
    return _TAG_BAD_RE.sub("_", text)[:TAG_MAX]


def rounded_size(size: int, extent: int) -> int:
    """``size`` MiB rounded up to whole extents of ``extent`` MiB, as ``lvcreate`` and
    ``lvextend`` do (``extent`` 0: unknown, ``size`` unchanged).  Pure."""
    return -(-size // extent) * extent if extent > 0 else size


def check_lvm_name(name: Any, what: str) -> str:
    """``name`` if it is a valid LVM VG/LV name, else :class:`errors.StorageError`."""
    if (not isinstance(name, str) or not 0 < len(name) <= 127 or name in (".", "..")
            or not _NAME_RE.match(name)):
        raise errors.StorageError(f"Invalid {what} name {name!r}")
    return name


@dataclass(frozen=True)
class LvInfo:
    """One logical volume from ``lvs``: size in MiB, its ``lv_attr`` and PVs."""

    vg: str
    name: str
    size: int
    attr: str
    pvs: tuple[str, ...] = ()
    #: the extent size of its VG in MiB (0: not reported)
    extent: int = 0

    @property
    def active(self) -> bool:
        """Whether the volume is activated (5th ``lv_attr`` character ``a``)."""
        return len(self.attr) > 4 and self.attr[4] == "a"

    @property
    def is_snapshot(self) -> bool:
        return self.attr[:1] in ("s", "S")


@dataclass(frozen=True)
class VgInfo:
    """One volume group from ``vgs``; sizes in MiB."""

    name: str
    size: int
    free: int
    pv_count: int


@dataclass(frozen=True)
class PvInfo:
    """One physical volume from ``pvs``; sizes in MiB; ``vg`` "" when in none."""

    name: str
    vg: str
    size: int
    free: int
    allocatable: bool

    @property
    def used(self) -> int:
        return self.size - self.free


def _mib(text: str, where: str) -> int:
    try:
        return int(float(text.strip()))
    except ValueError:
        raise errors.StorageError(f"Cannot parse size {text!r} in {where} output") from None


def _rows(output: str, columns: int, where: str, optional: int = 0) -> Iterator[list[str]]:
    """The rows of ``columns`` fields (the last ``optional`` ones may be absent: "")."""
    for line in output.splitlines():
        if not line.strip():
            continue
        row = [c.strip() for c in line.strip().split(SEP)]
        if columns - optional <= len(row) < columns:
            row += [""] * (columns - len(row))
        if len(row) != columns:
            raise errors.StorageError(f"Cannot parse {where} output line {line.strip()!r}:"
                                      f" expected {columns} fields")
        yield row


def parse_lvs(output: str) -> list[LvInfo]:
    """Volumes from ``lvs ... -o lv_name,vg_name,lv_size,lv_attr,devices[,vg_extent_size]``.

    ``lvs`` prints one line per segment; the lines of one volume are merged
    and its PVs collected from ``devices`` (``/dev/vda(0),/dev/vdb(12)``).
    """
    merged: dict[tuple[str, str], LvInfo] = {}
    for name, vg, size, attr, devices, extent in _rows(output, 6, "lvs", optional=1):
        pvs = []
        for dev in filter(None, devices.split(",")):
            m = _DEVICE_RE.match(dev)
            pvs.append(m.group(1) if m else dev)
        key = (vg, name)
        old = merged.get(key)
        if old is None:
            merged[key] = LvInfo(vg, name, _mib(size, "lvs"), attr, tuple(dict.fromkeys(pvs)),
                                 _mib(extent, "lvs") if extent else 0)
        else:
            merged[key] = LvInfo(vg, name, old.size, old.attr,
                                 tuple(dict.fromkeys(old.pvs + tuple(pvs))), old.extent)
    return list(merged.values())


def parse_vgs(output: str) -> list[VgInfo]:
    """Volume groups from ``vgs ... -o vg_name,vg_size,vg_free,pv_count``."""
    result = []
    for name, size, free, count in _rows(output, 4, "vgs"):
        try:
            pv_count = int(count)
        except ValueError:
            raise errors.StorageError(f"Cannot parse PV count {count!r} in vgs output") from None
        result.append(VgInfo(name, _mib(size, "vgs"), _mib(free, "vgs"), pv_count))
    return result


def parse_pvs(output: str) -> list[PvInfo]:
    """Physical volumes from ``pvs ... -o pv_name,vg_name,pv_size,pv_free,pv_attr``.

    A PV is allocatable when the first ``pv_attr`` character is ``a``.
    """
    return [PvInfo(name, vg, _mib(size, "pvs"), _mib(free, "pvs"), attr[:1] == "a")
            for name, vg, size, free, attr in _rows(output, 5, "pvs")]


def pick_exclusive_pvs(pvs: Iterable[PvInfo], vg: str, size: int, count: int) -> list[str]:
    """``count`` empty allocatable PVs of ``vg`` holding ``size`` MiB together.

    The largest ones are taken first; raises :class:`errors.StorageError` when
    there are not enough.
    """
    empty = sorted((p for p in pvs if p.vg == vg and p.allocatable and p.used == 0),
                   key=lambda p: (-p.free, p.name))[:count]
    if len(empty) < count or sum(p.free for p in empty) < size:
        raise errors.StorageError(
            f"Exclusive storage: volume group {vg} has not {count} empty physical"
            f" volume(s) holding {size} MiB together")
    return [p.name for p in empty]


def pick_grow_pvs(pvs: Iterable[PvInfo], vg: str, own: Iterable[str], amount: int) -> list[str]:
    """Exclusive storage: the PVs a volume already lies on (``own``), when they
    have ``amount`` MiB free together; a volume never spreads to PVs of others.

    Raises :class:`errors.StorageError` otherwise.  Pure.
    """
    mine = sorted(set(own))
    free = sum(p.free for p in pvs if p.vg == vg and p.name in mine and p.allocatable)
    if not mine or free < amount:
        raise errors.StorageError(
            f"Exclusive storage: the physical volumes of the volume"
            f" ({', '.join(mine) or 'none known'}) have {free} MiB free, {amount} MiB needed")
    return mine


# --- listing and maintenance (storage units) --------------------------------

def list_vgs(runner: CommandRunner, names: Iterable[str] = ()) -> list[VgInfo]:
    """The volume groups of this node (only ``names`` if given)."""
    out = run_checked(runner, ["vgs", *_REPORT, "-o", _VG_FIELDS, *names],
                      "Cannot list volume groups")
    return parse_vgs(out)


def list_pvs(runner: CommandRunner) -> list[PvInfo]:
    """The physical volumes of this node."""
    return parse_pvs(run_checked(runner, ["pvs", *_REPORT, "-o", _PV_FIELDS],
                                 "Cannot list physical volumes"))


def list_lvs(runner: CommandRunner, vg: str) -> list[LvInfo]:
    """The logical volumes of volume group ``vg``."""
    check_lvm_name(vg, "volume group")
    return parse_lvs(run_checked(runner, ["lvs", *_REPORT, "-o", _LV_FIELDS, vg],
                                 f"Cannot list the volumes of volume group {vg}"))


def set_pv_allocatable(runner: CommandRunner, pv: str, allocatable: bool) -> None:
    """``pvchange -x y|n <pv>``: allow or forbid new extents on ``pv``."""
    if not isinstance(pv, str) or not pv.startswith("/"):
        raise errors.StorageError(f"Invalid physical volume {pv!r}")
    run_checked(runner, ["pvchange", "-x", "y" if allocatable else "n", pv],
                f"Cannot change physical volume {pv}")


def repair_vg(runner: CommandRunner, vg: str) -> None:
    """``vgreduce --removemissing <vg>``: drop the PVs the group has lost."""
    check_lvm_name(vg, "volume group")
    run_checked(runner, ["vgreduce", "--removemissing", vg],
                f"Cannot repair volume group {vg}")


# --- the device class -------------------------------------------------------

@contextlib.contextmanager
def _explaining(result: RunResult, what: str) -> Iterator[None]:
    """Around the look-ups that explain the failed command ``result``: an error they
    raise (no such group, no room, ...) also carries the command's own reason."""
    try:
        yield
    except errors.StorageError as exc:
        raise errors.StorageError(f"{exc} ({failure(result, what)})") from None


class LogicalVolume(base.BaseStorage):
    """``plain``: one LVM logical volume per disk (see the module docstring)."""

    TEMPLATE = constants.DT_PLAIN

    def __init__(self, paths: pathutils.Paths, *, runner: CommandRunner = system_runner,
                 exclusive_storage: bool = False) -> None:
        super().__init__(paths)
        self.runner = runner
        self.exclusive_storage = exclusive_storage
        #: the volume groups' listings taken so far, once :meth:`remember_listings` is on
        self._listings: dict[str, dict[str, LvInfo]] | None = None

    def remember_listings(self) -> None:
        """From now on look volumes up in one ``lvs`` listing per volume group, taken at
        the first lookup: for a batch of queries on one node (verify-disks asks the
        status of every disk at once), not for a device that changes meanwhile."""
        self._listings = {}

    @staticmethod
    def split_id(disk: base.DiskSpec) -> tuple[str, str]:
        """``(vg, lv)`` of the disk's logical id, validated."""
        lid = disk.logical_id
        if not isinstance(lid, (tuple, list)) or len(lid) != 2:
            raise errors.StorageError(f"Invalid logical id {lid!r} for plain disk {disk.uuid}:"
                                      " expected (vg_name, lv_name)")
        return (check_lvm_name(lid[0], "volume group"),
                check_lvm_name(lid[1], "logical volume"))

    def get_path(self, disk: base.DiskSpec) -> str:
        vg, lv = self.split_id(disk)
        return f"/dev/{vg}/{lv}"

    def _lookup(self, vg: str, lv: str) -> LvInfo | None:
        """The volume ``vg/lv``, or None when it does not exist."""
        if self._listings is not None:
            if vg not in self._listings:
                if self._vg(vg, required=False) is None:
                    raise errors.StorageError(f"Volume group '{vg}' does not exist on this node")
                self._listings[vg] = {i.name: i for i in list_lvs(self.runner, vg)
                                      if i.vg == vg}
            return self._listings[vg].get(lv)
        result = self.runner(["lvs", *_REPORT, "-o", _LV_FIELDS, f"{vg}/{lv}"])
        if result.failed:
            # lvs fails for a missing volume; tell that from a missing VG/tool
            if not self._vg(vg, required=False):
                raise errors.StorageError(f"Volume group '{vg}' does not exist on this node")
            return None
        found = [i for i in parse_lvs(result.stdout) if i.vg == vg and i.name == lv]
        return found[0] if found else None

    def _must_exist(self, disk: base.DiskSpec) -> LvInfo:
        vg, lv = self.split_id(disk)
        info = self._lookup(vg, lv)
        if info is None:
            raise errors.StorageError(f"Disk {disk.uuid}: logical volume {vg}/{lv} does not exist")
        return info

    def _vg(self, vg: str, *, required: bool = True) -> VgInfo | None:
        result = self.runner(["vgs", *_REPORT, "-o", _VG_FIELDS, vg])
        found = [] if result.failed else [i for i in parse_vgs(result.stdout) if i.name == vg]
        if not found:
            if required:
                raise errors.StorageError(f"Volume group '{vg}' does not exist on this node")
            return None
        return found[0]

    def check_free(self, disk: base.DiskSpec, amount: int) -> VgInfo:
        """Refuse (nothing created) unless the disk's VG exists with ``amount`` MiB free."""
        vg, lv = self.split_id(disk)
        info = self._vg(vg)
        assert info is not None
        if info.free < amount:
            raise errors.StorageError(
                f"Not enough free space in volume group {vg} for disk {disk.uuid}"
                f" ({lv}): {amount} MiB needed, {info.free} MiB free")
        return info

    def create(self, disk: base.DiskSpec) -> str:
        """``lvcreate`` the volume; after a failure (nothing made), why: no VG, no room,
        the volume exists, or LVM's own reason."""
        if not isinstance(disk.size, int) or isinstance(disk.size, bool) or disk.size <= 0:
            raise errors.StorageError(f"Invalid size {disk.size!r} MiB for disk {disk.uuid}")
        vg, lv = self.split_id(disk)
        pvs: list[str] = []
        if self.exclusive_storage:
            self.check_free(disk, disk.size)
            pvs = pick_exclusive_pvs(list_pvs(self.runner), vg, disk.size, disk.spindles or 1)
        tag = ["--addtag", lvm_tag(disk.tag)] if lvm_tag(disk.tag) else []
        result = self.runner(["lvcreate", f"-L{disk.size}m", "-n", lv, *tag,
                              "--wipesignatures", "y", "-y", vg, *pvs])
        if result.failed:
            what = f"Cannot create logical volume {vg}/{lv} for disk {disk.uuid}"
            with _explaining(result, what):
                self.check_free(disk, disk.size)
                if self._lookup(vg, lv) is not None:
                    raise errors.StorageError(
                        f"Disk {disk.uuid}: logical volume {vg}/{lv} already exists")
            raise failure(result, what)
        return self.get_path(disk)

    def remove(self, disk: base.DiskSpec) -> None:
        """``lvremove``; a volume (or volume group) that is not there is removed already."""
        vg, lv = self.split_id(disk)
        result = self.runner(["lvremove", "-f", f"{vg}/{lv}"])
        if not result.failed or self._absent(vg, lv):
            return
        raise failure(result, f"Cannot remove logical volume {vg}/{lv} of disk {disk.uuid}")

    def _absent(self, vg: str, lv: str) -> bool:
        """Whether listings that worked show no volume ``vg/lv`` (its group gone, or the
        volume not in it); False when a listing failed too (LVM itself broken: no proof)."""
        try:
            if vg not in {info.name for info in list_vgs(self.runner)}:
                return True
            return lv not in {info.name for info in list_lvs(self.runner, vg) if info.vg == vg}
        except errors.StorageError:
            return False

    def grow(self, disk: base.DiskSpec, amount: int) -> int:
        if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
            raise errors.StorageError(f"Invalid grow amount {amount!r} MiB for disk {disk.uuid}")
        vg, lv = self.split_id(disk)
        info = self._must_exist(disk)
        if amount == 0:
            return info.size
        self.check_free(disk, amount)
        pvs: list[str] = []
        if self.exclusive_storage:
            pvs = pick_grow_pvs(list_pvs(self.runner), vg, info.pvs, amount)
        run_checked(self.runner, ["lvextend", f"-L+{amount}m", f"{vg}/{lv}", *pvs],
                    f"Cannot grow logical volume {vg}/{lv} of disk {disk.uuid}")
        return self._must_exist(disk).size

    def assemble(self, disk: base.DiskSpec) -> str:
        vg, lv = self.split_id(disk)
        info = self._must_exist(disk)
        if not info.active:
            run_checked(self.runner, ["lvchange", "-ay", f"{vg}/{lv}"],
                        f"Cannot activate logical volume {vg}/{lv} of disk {disk.uuid}")
        return self.get_path(disk)

    def shutdown(self, disk: base.DiskSpec) -> None:
        self.split_id(disk)   # validates the id; the volume stays active (as Ganeti)

    def rename(self, disk: base.DiskSpec, new_logical_id: tuple[Any, ...]) -> tuple[Any, ...]:
        vg, lv = self.split_id(disk)
        new_vg, new_lv = self.split_id(base.DiskSpec(uuid=disk.uuid, size=disk.size,
                                                     logical_id=tuple(new_logical_id)))
        if new_vg != vg:
            raise errors.StorageError(f"Disk {disk.uuid}: cannot move logical volume {vg}/{lv}"
                                      f" to another volume group ({new_vg})")
        if new_lv == lv:
            return (vg, lv)
        result = self.runner(["lvrename", vg, lv, new_lv])
        if result.failed:
            what = f"Cannot rename logical volume {vg}/{lv} to {new_lv}"
            with _explaining(result, what):
                self._must_exist(disk)
            raise failure(result, what)
        return (vg, new_lv)

    def set_info(self, disk: base.DiskSpec, text: str) -> None:
        """Replace the volume's ``originstname+`` tags with ``text`` as a tag, in one
        ``lvchange`` (an instance rename); tags of other forms stay."""
        vg, lv = self.split_id(disk)
        self._must_exist(disk)
        new = lvm_tag(text)
        out = run_checked(self.runner, ["lvs", *_REPORT, "-o", "lv_tags", f"{vg}/{lv}"],
                          f"Cannot read the tags of logical volume {vg}/{lv}")
        old = [tag for tag in out.strip().split(",") if tag.startswith(constants.DISK_INFO_PREFIX)]
        args = [arg for tag in old if tag != new for arg in ("--deltag", tag)]
        if new and new not in old:
            args += ["--addtag", new]
        if args:
            run_checked(self.runner, ["lvchange", *args, f"{vg}/{lv}"],
                        f"Cannot set the tags of logical volume {vg}/{lv}")

    def snapshot(self, disk: base.DiskSpec, size: int) -> tuple[Any, ...]:
        """``lvcreate -s``: a snapshot ``<lv>.snap`` with ``size`` MiB of change room."""
        if not isinstance(size, int) or size <= 0:
            raise errors.StorageError(f"Invalid snapshot size {size!r} MiB for disk {disk.uuid}")
        vg, lv = self.split_id(disk)
        self._must_exist(disk)
        self.check_free(disk, size)
        snap = check_lvm_name(lv + SNAPSHOT_SUFFIX, "logical volume")
        run_checked(self.runner, ["lvcreate", "-s", f"-L{size}m", "-n", snap, f"{vg}/{lv}"],
                    f"Cannot snapshot logical volume {vg}/{lv} of disk {disk.uuid}")
        return (vg, snap)

    def get_size(self, disk: base.DiskSpec) -> int:
        return self._must_exist(disk).size

    def status(self, disk: base.DiskSpec) -> base.DeviceStatus | None:
        """None when the volume, or its whole volume group, does not exist."""
        vg, lv = self.split_id(disk)
        try:
            info = self._lookup(vg, lv)
        except errors.StorageError:
            return None     # _lookup raises only for a missing volume group
        if info is None:
            return None
        # LVM rounded the size asked for up to whole extents: that is the size recorded
        size = disk.size if 0 < disk.size < info.size == rounded_size(disk.size, info.extent) \
            else info.size
        return base.DeviceStatus(path=self.get_path(disk), size=size, active=info.active,
                                 spindles=len(info.pvs) or None)

    def export_stream(self, disk: base.DiskSpec,
                      chunk_size: int = base.DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        return base.read_chunks(self.assemble(disk), chunk_size, disk)

    def import_stream(self, disk: base.DiskSpec, chunks: Iterable[bytes]) -> int:
        limit = self.get_size(disk) * base.MIB
        return base.write_chunks(self.assemble(disk), chunks, limit, disk)

    def verify(self) -> list[str]:
        return []
