"""Changes to a running kvm instance through QMP: disk growth, hotplug, balloon.

doc/kvm.md ("Online changes") describes the behaviour for operators.  This
module has two halves:

* **Pure builders** turn our records into QMP arguments and qemu command-line
  words, and read QMP answers: :func:`netdev_add_args`, :func:`nic_device_args`,
  :func:`blockdev_add_args`, :func:`disk_device_args`, :func:`block_resize_args`,
  :func:`nic_argv`, :func:`disk_argv`, :func:`drop_argv`, :func:`boot_disk_qdev`,
  :func:`balloon_args`, :func:`balloon_mib`.  They are tested on the produced
  values.
* **Steps** (:func:`plug_nic`, :func:`plug_disk`, :func:`unplug`,
  :func:`resize`) run those commands on an open :class:`~qmp.QmpClient`; the
  hypervisor (``kvm/hypervisor.py``) holds the instance's lock, reads and
  writes ``runtime.json`` and does what needs the node (tap devices).

The runtime record keeps a :class:`Devices` table (``runtime["devices"]``):
one entry per NIC and per disk in instance order, with the qemu ids needed
to resize or remove it.  Instances started before any hotplug have no table;
:func:`devices_of` derives it from what the command line gave them (NIC
``i`` is device ``nic<i>`` on netdev ``net<i>``, disk ``i`` the drive
``disk<i>``).  Hotplugged devices are named after the NIC's or disk's UUID
(``hotnic-<8 hex>``), so one NIC keeps one name however indices shift.
The record's ``argv`` is kept equal to a command line that would start the
instance with its current devices (hotplugged ones appended, removed ones
dropped).
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ganeti import errors, serializer
from ganeti.hypervisor.kvm import cmdline, qmp

__all__ = [
    "NicDevice", "DiskDevice", "Devices", "HOTPLUG_NIC_TYPES", "HOTPLUG_DISK_TYPES",
    "UNPLUG_TIMEOUT", "devices_of", "tap_name", "new_nic", "new_disk",
    "netdev_add_args", "nic_device_args", "blockdev_add_args", "disk_device_args",
    "block_resize_args", "nic_argv", "disk_argv", "drop_argv", "pin_argv", "pci_slots",
    "boot_disk_qdev",
    "balloon_args", "balloon_mib", "is_deleted_event",
    "plug_nic", "plug_disk", "unplug", "resize",
    "resize_disk", "add_nic", "remove_nic", "add_disk", "remove_disk",
    "query_balloon", "balloon", "migration_template", "retarget",
]

logger = logging.getLogger(__name__)

#: nic_type values whose device sits on the PCI bus (can be hotplugged)
HOTPLUG_NIC_TYPES = frozenset(t for t in cmdline.NIC_MODELS if t != "ne2k_isa")
#: disk_type values whose disks can be hotplugged (virtio-blk-pci)
HOTPLUG_DISK_TYPES = frozenset(["paravirtual"])
#: seconds the guest gets to release a device after ``device_del``
UNPLUG_TIMEOUT = 60.0
#: QMP error class of a ``device_del`` for a device that is not there
_NOT_FOUND = "DeviceNotFound"


@dataclass(frozen=True)
class NicDevice:
    """One NIC of a running instance as qemu knows it."""

    mac: str
    device: str           # the qdev id (device_del)
    netdev: str           # the netdev id (netdev_del)
    uuid: str = ""
    kind: str = cmdline.NETDEV_USER
    ifname: str = ""      # the tap device (kind tap)


@dataclass(frozen=True)
class DiskDevice:
    """One disk of a running instance as qemu knows it.

    Boot disks come from ``-drive`` (``drive`` is its id, the qdev device
    is anonymous and found through ``query-block``); hotplugged ones are a
    ``blockdev-add`` node (``node``) under a ``virtio-blk-pci`` with id
    ``device``.
    """

    path: str
    uuid: str = ""
    drive: str = ""
    node: str = ""
    device: str = ""


@dataclass(frozen=True)
class Devices:
    """The NICs and disks of a running instance, in instance order."""

    nics: tuple[NicDevice, ...] = ()
    disks: tuple[DiskDevice, ...] = ()

    def nic_index(self, uuid: str, mac: str) -> int:
        """The index of the NIC with ``uuid`` (or, without one, ``mac``); -1 if absent."""
        for idx, nic in enumerate(self.nics):
            if (uuid and nic.uuid == uuid) or (not (uuid and nic.uuid) and nic.mac == mac):
                return idx
        return -1

    def disk_index(self, path: str) -> int:
        """The index of the disk on ``path``; -1 if absent."""
        for idx, disk in enumerate(self.disks):
            if disk.path == path:
                return idx
        return -1


# --- the device table -------------------------------------------------------------

def _netdev_words(argv: Sequence[str]) -> dict[str, tuple[str, str]]:
    """netdev id -> (kind, ifname) from the ``-netdev`` words of ``argv``."""
    found: dict[str, tuple[str, str]] = {}
    for flag, value in zip(argv, argv[1:]):
        if flag != "-netdev":
            continue
        kind, _, rest = value.partition(",")
        opts = dict(part.partition("=")[::2] for part in rest.split(",") if part)
        if "id" in opts:
            found[opts["id"]] = (kind, opts.get("ifname", ""))
    return found


def devices_of(runtime: dict[str, Any]) -> Devices:
    """The device table of a runtime record (derived from the boot command line
    when no hotplug happened yet)."""
    stored = runtime.get("devices")
    if isinstance(stored, dict):
        return serializer.from_data(Devices, stored)
    argv = [str(w) for w in runtime.get("argv") or []]
    netdevs = _netdev_words(argv)
    nics = []
    for idx, nic in enumerate((runtime.get("spec") or {}).get("nics") or []):
        kind, ifname = netdevs.get(f"net{idx}", (cmdline.NETDEV_USER, ""))
        nics.append(NicDevice(mac=str(nic.get("mac", "")), device=f"nic{idx}",
                              netdev=f"net{idx}", uuid=str(nic.get("uuid") or ""),
                              kind=kind, ifname=ifname))
    disks = [DiskDevice(path=str(path), drive=f"disk{idx}")
             for idx, path in enumerate(runtime.get("disks") or [])]
    return Devices(nics=tuple(nics), disks=tuple(disks))


def _key(uuid: str, taken: Callable[[str], bool]) -> str:
    """A short name part from ``uuid`` not yet ``taken`` (a counter without one)."""
    base = "".join(c for c in uuid if c.isalnum())[:8]
    if base and not taken(base):
        return base
    for n in range(1000):
        cand = f"{base}{n}" if base else str(n)
        if not taken(cand):
            return cand
    raise errors.HypervisorError("No free device name left")


def tap_name(instance: str, suffix: str) -> str:
    """The tap device ``gnt<hash of instance>.<suffix>`` (at most 15 bytes)."""
    name = f"gnt{zlib.crc32(instance.encode()) & 0xffffff:06x}.{suffix}"
    if len(name) > 15:
        raise errors.ProgrammerError(f"tap name {name!r} is too long")
    return name


def new_nic(devices: Devices, instance: str, mac: str, uuid: str, kind: str) -> NicDevice:
    """The record of a NIC about to be hotplugged (its ids are free in ``devices``)."""
    used = {n.device for n in devices.nics} | {n.netdev for n in devices.nics}
    key = _key(uuid, lambda k: f"hotnic-{k}" in used or f"hotnet-{k}" in used)
    ifname = ""
    if kind == cmdline.NETDEV_TAP:
        taps = {n.ifname for n in devices.nics}
        ifname = next(name for n in range(len(taps) + 1)
                      if (name := tap_name(instance, f"h{n}")) not in taps)
    return NicDevice(mac=mac, device=f"hotnic-{key}", netdev=f"hotnet-{key}", uuid=uuid,
                     kind=kind, ifname=ifname)


def new_disk(devices: Devices, path: str, uuid: str) -> DiskDevice:
    """The record of a disk about to be hotplugged (its ids are free in ``devices``)."""
    used = {d.node for d in devices.disks} | {d.device for d in devices.disks}
    key = _key(uuid, lambda k: f"hotdisk-{k}" in used or f"hotvd-{k}" in used)
    return DiskDevice(path=path, uuid=uuid, node=f"hotdisk-{key}", device=f"hotvd-{key}")


# --- QMP arguments and command-line words -------------------------------------------

def netdev_add_args(nic: NicDevice, vhost: bool = False) -> dict[str, Any]:
    """``netdev_add`` arguments of ``nic`` (a tap without scripts, or user mode)."""
    if nic.kind == cmdline.NETDEV_TAP:
        args: dict[str, Any] = {"type": "tap", "id": nic.netdev, "ifname": nic.ifname,
                                "script": "no", "downscript": "no"}
        if vhost:
            args["vhost"] = True
        return args
    if nic.kind == cmdline.NETDEV_USER:
        return {"type": "user", "id": nic.netdev}
    raise errors.ProgrammerError(f"unknown NIC backend {nic.kind!r}")


def _nic_model(nic_type: str) -> str:
    if nic_type not in HOTPLUG_NIC_TYPES:
        raise errors.HypervisorError(f"NICs of nic_type {nic_type} cannot be hotplugged"
                                     f" (one of {', '.join(sorted(HOTPLUG_NIC_TYPES))})")
    return cmdline.NIC_MODELS[nic_type]


def nic_device_args(nic: NicDevice, nic_type: str) -> dict[str, Any]:
    """``device_add`` arguments of ``nic``; refuses models off the PCI bus."""
    return {"driver": _nic_model(nic_type), "id": nic.device, "netdev": nic.netdev,
            "mac": nic.mac}


def blockdev_add_args(disk: DiskDevice, disk_cache: str = "default") -> dict[str, Any]:
    """``blockdev-add`` arguments: a raw node over the file ``disk.path``."""
    file: dict[str, Any] = {"driver": "file", "filename": disk.path}
    args: dict[str, Any] = {"driver": "raw", "node-name": disk.node, "file": file}
    if cmdline.disk_cache_for(disk_cache, disk.path) == "none":
        args["cache"] = {"direct": True}
    return args


def disk_device_args(disk: DiskDevice, disk_type: str = "paravirtual",
                     disk_cache: str = "default") -> dict[str, Any]:
    """``device_add`` arguments of a hotplugged disk (virtio-blk-pci only)."""
    if disk_type not in HOTPLUG_DISK_TYPES:
        raise errors.HypervisorError(f"Disks of disk_type {disk_type} cannot be hotplugged"
                                     " (only paravirtual ones)")
    args: dict[str, Any] = {"driver": "virtio-blk-pci", "id": disk.device, "drive": disk.node}
    if disk_cache == "writethrough":
        args["write-cache"] = "off"
    return args


def block_resize_args(disk: DiskDevice, size: int) -> dict[str, Any]:
    """``block_resize`` arguments telling qemu ``disk`` now has ``size`` bytes."""
    if size <= 0:
        raise errors.ProgrammerError(f"invalid disk size {size}")
    if disk.node:
        return {"node-name": disk.node, "size": size}
    return {"device": disk.drive, "size": size}


def _opts(args: dict[str, Any]) -> str:
    words = []
    for key, value in args.items():
        if isinstance(value, bool):
            value = "on" if value else "off"
        words.append(f"{key}={cmdline.escape_option(str(value))}")
    return ",".join(words)


def nic_argv(nic: NicDevice, nic_type: str, vhost: bool = False) -> list[str]:
    """The ``-netdev``/``-device`` words that start an instance with ``nic``."""
    netdev = netdev_add_args(nic, vhost)
    kind = netdev.pop("type")
    return ["-netdev", f"{kind},{_opts(netdev)}",
            "-device", _opts(nic_device_args(nic, nic_type)).replace("driver=", "", 1)]


def disk_argv(disk: DiskDevice, disk_type: str = "paravirtual",
              disk_cache: str = "default") -> list[str]:
    """The ``-blockdev`` (JSON) and ``-device`` words that start an instance with ``disk``."""
    return ["-blockdev", json.dumps(blockdev_add_args(disk, disk_cache), sort_keys=True),
            "-device",
            _opts(disk_device_args(disk, disk_type, disk_cache)).replace("driver=", "", 1)]


def _word_ids(flag: str, value: str) -> set[str]:
    if flag == "-blockdev" and value.startswith("{"):
        try:
            return {str(json.loads(value).get("node-name", ""))}
        except ValueError:
            return set()
    if flag not in ("-netdev", "-device", "-drive", "-blockdev"):
        return set()
    opts = _opt_dict(value)
    keys = ("id", "node-name", "drive") if flag == "-device" else ("id", "node-name")
    return {opts[k] for k in keys if k in opts}


def _opt_dict(value: str) -> dict[str, str]:
    return dict(part.partition("=")[::2] for part in value.split(",") if "=" in part)


def _virtio_drive(flag: str, value: str) -> str | None:
    """The id of a ``-drive ...,if=virtio,id=X`` word, else None."""
    if flag != "-drive":
        return None
    opts = _opt_dict(value)
    return opts.get("id") if opts.get("if") == "virtio" else None


def pin_argv(argv: Sequence[str], slots: dict[str, str]) -> list[str]:
    """``argv`` with every PCI device at the address it has now (``slots``: id -> addr).

    ``-device`` words get ``addr=``; a ``-drive ...,if=virtio`` (which takes
    no address) becomes ``-drive ...,if=none`` plus a ``-device
    virtio-blk-pci,drive=<id>,addr=...``, the same hardware.  A qemu
    started from the result has the PCI layout of the running one even
    after devices were removed (qemu fills holes in order otherwise).
    """
    out: list[str] = []
    idx = 0
    while idx < len(argv):
        flag = argv[idx]
        if flag not in ("-device", "-drive") or idx + 1 >= len(argv):
            out.append(flag)
            idx += 1
            continue
        value = argv[idx + 1]
        idx += 2
        drive = _virtio_drive(flag, value)
        if drive and drive in slots:
            opts = ["if=none" if o == "if=virtio" else o for o in value.split(",")]
            out += [flag, ",".join(opts), "-device",
                    f"virtio-blk-pci,drive={drive},addr={slots[drive]}"]
            continue
        dev_id = _opt_dict(value).get("id") if flag == "-device" else None
        if dev_id in slots and "addr" not in _opt_dict(value):
            value = f"{value},addr={slots[dev_id]}"
        out += [flag, value]
    return out


def _addr(devfn: Any) -> str | None:
    if not isinstance(devfn, int) or isinstance(devfn, bool) or devfn < 0:
        return None
    slot, function = devfn >> 3, devfn & 7
    return f"0x{slot:x}.{function:x}" if function else f"0x{slot:x}"


def pci_slots(client: qmp.QmpClient, argv: Sequence[str]) -> dict[str, str]:
    """id -> PCI address (``0x5``) of the ``-device`` and virtio ``-drive`` words
    of ``argv`` in the running qemu (QOM property ``addr``); devices off the
    PCI bus and ones qemu does not know are left out."""
    paths: dict[str, str] = {}
    drives = []
    for flag, value in zip(argv, argv[1:]):
        drive = _virtio_drive(flag, value)
        if drive:
            drives.append(drive)
        elif flag == "-device" and _opt_dict(value).get("id"):
            dev_id = _opt_dict(value)["id"]
            paths[dev_id] = f"/machine/peripheral/{dev_id}"
    if drives:
        answer = client.execute("query-block")
        for drive in drives:
            qdev = boot_disk_qdev(answer, drive)
            if qdev:
                paths[drive] = qdev
    slots: dict[str, str] = {}
    for key, path in paths.items():
        try:
            addr = _addr(client.execute("qom-get", path=path, property="addr"))
        except qmp.QmpCommandError:
            continue
        if addr:
            slots[key] = addr
    return slots


def drop_argv(argv: Sequence[str], ids: Sequence[str]) -> list[str]:
    """``argv`` without the option pairs (``-netdev``, ``-device``, ``-drive``,
    ``-blockdev``) that define one of ``ids`` (and ``-device`` words of a
    dropped drive)."""
    wanted = set(ids)
    out: list[str] = []
    idx = 0
    while idx < len(argv):
        if idx + 1 < len(argv) and _word_ids(argv[idx], argv[idx + 1]) & wanted:
            idx += 2
            continue
        out.append(argv[idx])
        idx += 1
    return out


def boot_disk_qdev(query_block: Any, drive: str) -> str | None:
    """The QOM path of the device of ``-drive`` ``drive`` (from ``query-block``)."""
    for entry in query_block if isinstance(query_block, list) else []:
        if isinstance(entry, dict) and entry.get("device") == drive:
            qdev = str(entry.get("qdev") or "")
            return qdev.removesuffix("/virtio-backend") or None
    return None


def is_deleted_event(event: qmp.QmpEvent, device: str) -> bool:
    """Whether ``event`` is the ``DEVICE_DELETED`` of ``device`` (an id or QOM path)."""
    if event.name != "DEVICE_DELETED":
        return False
    return device in (event.data.get("device"), event.data.get("path"))


def balloon_args(memory_mib: int) -> dict[str, Any]:
    """``balloon`` arguments for a guest of ``memory_mib`` MiB."""
    if memory_mib <= 0:
        raise errors.ProgrammerError(f"invalid memory {memory_mib}")
    return {"value": memory_mib * 1024 * 1024}


def balloon_mib(query_balloon: Any) -> int | None:
    """The guest's current memory in MiB from a ``query-balloon`` answer."""
    if isinstance(query_balloon, dict) and isinstance(query_balloon.get("actual"), int):
        return int(query_balloon["actual"]) // (1024 * 1024)
    return None


# --- steps on an open QMP connection ---------------------------------------------------

def _undo(client: qmp.QmpClient, command: str, **args: Any) -> None:
    try:
        client.execute(command, **args)
    except qmp.QmpError:
        pass


def plug_nic(client: qmp.QmpClient, nic: NicDevice, nic_type: str, vhost: bool) -> None:
    """``netdev_add`` then ``device_add``; the netdev is removed again if the device fails."""
    device = nic_device_args(nic, nic_type)
    client.execute("netdev_add", **netdev_add_args(nic, vhost))
    try:
        client.execute("device_add", **device)
    except qmp.QmpError:
        _undo(client, "netdev_del", id=nic.netdev)
        raise


def plug_disk(client: qmp.QmpClient, disk: DiskDevice, disk_type: str,
              disk_cache: str) -> None:
    """``blockdev-add`` then ``device_add``; the node is removed again if the device fails."""
    device = disk_device_args(disk, disk_type, disk_cache)
    client.execute("blockdev-add", **blockdev_add_args(disk, disk_cache))
    try:
        client.execute("device_add", **device)
    except qmp.QmpError:
        _undo(client, "blockdev-del", **{"node-name": disk.node})
        raise


def unplug(client: qmp.QmpClient, device: str, timeout: float,
           clock: Callable[[], float]) -> None:
    """``device_del`` and wait for its ``DEVICE_DELETED`` (the guest must release it).

    A device that is already gone is fine.  Raises
    :class:`errors.HypervisorError` when the guest does not release it
    within ``timeout`` seconds (the device then stays; qemu keeps the
    request pending).
    """
    try:
        client.execute("device_del", id=device)
    except qmp.QmpCommandError as exc:
        if exc.error_class == _NOT_FOUND:
            return
        raise
    deadline = clock() + timeout
    while True:
        left = deadline - clock()
        try:
            event = client.wait_event("DEVICE_DELETED", timeout=max(0.0, left))
        except qmp.QmpError:
            if clock() < deadline:
                raise
            raise errors.HypervisorError(
                f"The guest did not release device {device} within {timeout:g}s (it needs"
                " ACPI PCI hotplug support); the device stays until it does") from None
        if is_deleted_event(event, device):
            return


def resize(client: qmp.QmpClient, disk: DiskDevice, size: int) -> None:
    """Tell qemu (and so the guest) that ``disk`` now has ``size`` bytes."""
    client.execute("block_resize", **block_resize_args(disk, size))


# --- whole operations on a runtime record ----------------------------------------------
# Each runs its QMP steps first and changes ``runtime`` (in place) only once
# they succeeded; the caller writes the record back.

def _hvparams(runtime: dict[str, Any]) -> dict[str, Any]:
    return dict((runtime.get("spec") or {}).get("hvparams") or {})


def _store(client: qmp.QmpClient, runtime: dict[str, Any], devices: Devices,
           argv: list[str]) -> None:
    runtime["devices"] = serializer.to_data(devices)
    runtime["argv"] = pin_argv(argv, pci_slots(client, argv))
    runtime["disks"] = [d.path for d in devices.disks]


def resize_disk(client: qmp.QmpClient, runtime: dict[str, Any], path: str, size: int) -> int:
    """``block_resize`` of the disk on ``path``; returns the size in bytes given to qemu.

    The file's real size is used when it is larger than ``size`` bytes, so
    qemu never shrinks the image.  A disk the running qemu does not have is
    refused with :class:`errors.HypervisorError`.
    """
    devices = devices_of(runtime)
    idx = devices.disk_index(path)
    if idx < 0:
        raise errors.HypervisorError(f"Instance {runtime.get('name')} has no disk {path}")
    try:
        size = max(size, os.path.getsize(path))
    except OSError:
        pass
    resize(client, devices.disks[idx], size)
    logger.info("Instance %s: disk %d (%s) resized to %d bytes", runtime.get("name"), idx,
                path, size)
    return size


def add_nic(client: qmp.QmpClient, runtime: dict[str, Any], instance: str, nic: Any,
            idx: int, kind: str) -> NicDevice:
    """Plug ``nic`` (a :class:`~ganeti.hypervisor.base.NicSpec`) in as NIC ``idx``
    on a ``kind`` netdev; the caller attaches a tap to its bridge."""
    hvp = _hvparams(runtime)
    devices = devices_of(runtime)
    if devices.nic_index(nic.uuid, nic.mac) >= 0:
        raise errors.HypervisorError(f"Instance {instance} already has NIC {nic.mac}")
    dev = new_nic(devices, instance, nic.mac, nic.uuid, kind)
    nic_type = str(hvp.get("nic_type") or "paravirtual")
    vhost = bool(hvp.get("vhost_net"))
    plug_nic(client, dev, nic_type, vhost)
    nics = list(devices.nics)
    nics.insert(min(idx, len(nics)), dev)
    spec = runtime.setdefault("spec", {})
    spec_nics = list(spec.get("nics") or [])
    spec_nics.insert(min(idx, len(spec_nics)), serializer.to_data(nic))
    spec["nics"] = spec_nics
    _store(client, runtime, Devices(tuple(nics), devices.disks),
           list(runtime.get("argv") or []) + nic_argv(dev, nic_type, vhost))
    logger.info("Instance %s: NIC %s plugged in as %s", instance, nic.mac, dev.device)
    return dev


def remove_nic(client: qmp.QmpClient, runtime: dict[str, Any], nic: Any, timeout: float,
               clock: Callable[[], float]) -> NicDevice:
    """Unplug ``nic`` (found by UUID, else MAC): ``device_del``, the guest's
    release, ``netdev_del``."""
    instance = runtime.get("name")
    devices = devices_of(runtime)
    idx = devices.nic_index(nic.uuid, nic.mac)
    if idx < 0:
        raise errors.HypervisorError(f"Instance {instance} has no NIC {nic.mac}")
    dev = devices.nics[idx]
    unplug(client, dev.device, timeout, clock)
    try:
        client.execute("netdev_del", id=dev.netdev)
    except qmp.QmpCommandError as exc:
        logger.warning("Instance %s: netdev_del %s: %s", instance, dev.netdev, exc)
    nics = list(devices.nics)
    nics.pop(idx)
    spec = runtime.setdefault("spec", {})
    spec["nics"] = [n for pos, n in enumerate(spec.get("nics") or []) if pos != idx]
    _store(client, runtime, Devices(tuple(nics), devices.disks),
           drop_argv(runtime.get("argv") or [], [dev.device, dev.netdev]))
    logger.info("Instance %s: NIC %s (%s) unplugged", instance, nic.mac, dev.device)
    return dev


def add_disk(client: qmp.QmpClient, runtime: dict[str, Any], path: str, uuid: str,
             idx: int) -> DiskDevice:
    """Plug the disk on ``path`` in as disk ``idx`` (``blockdev-add`` + virtio-blk-pci)."""
    hvp = _hvparams(runtime)
    devices = devices_of(runtime)
    if devices.disk_index(path) >= 0:
        raise errors.HypervisorError(f"Instance {runtime.get('name')} already has disk {path}")
    dev = new_disk(devices, path, uuid)
    disk_type = str(hvp.get("disk_type") or "paravirtual")
    cache = str(hvp.get("disk_cache") or "default")
    plug_disk(client, dev, disk_type, cache)
    disks = list(devices.disks)
    disks.insert(min(idx, len(disks)), dev)
    _store(client, runtime, Devices(devices.nics, tuple(disks)),
           list(runtime.get("argv") or []) + disk_argv(dev, disk_type, cache))
    logger.info("Instance %s: disk %s plugged in as %s", runtime.get("name"), path, dev.device)
    return dev


def remove_disk(client: qmp.QmpClient, runtime: dict[str, Any], path: str, timeout: float,
                clock: Callable[[], float]) -> DiskDevice:
    """Unplug the disk on ``path``: ``device_del``, the guest's release, then
    ``blockdev-del`` (a ``-drive`` disk goes away with its device)."""
    instance = runtime.get("name")
    devices = devices_of(runtime)
    idx = devices.disk_index(path)
    if idx < 0:
        raise errors.HypervisorError(f"Instance {instance} has no disk {path}")
    dev = devices.disks[idx]
    qdev = dev.device or boot_disk_qdev(client.execute("query-block"), dev.drive)
    if qdev:
        unplug(client, qdev, timeout, clock)
    if dev.node:
        try:
            client.execute("blockdev-del", **{"node-name": dev.node})
        except qmp.QmpCommandError as exc:
            logger.warning("Instance %s: blockdev-del %s: %s", instance, dev.node, exc)
    disks = list(devices.disks)
    disks.pop(idx)
    _store(client, runtime, Devices(devices.nics, tuple(disks)),
           drop_argv(runtime.get("argv") or [],
                     [i for i in (dev.drive, dev.node, dev.device) if i]))
    logger.info("Instance %s: disk %s unplugged", instance, path)
    return dev


def query_balloon(client: qmp.QmpClient) -> int | None:
    """The guest's memory in MiB as its balloon says (None: no balloon device)."""
    try:
        return balloon_mib(client.execute("query-balloon"))
    except qmp.QmpCommandError:
        return None


def balloon(client: qmp.QmpClient, runtime: dict[str, Any], memory_mib: int) -> None:
    """Set the balloon target to ``memory_mib`` MiB (the guest's driver gives the
    rest back); recorded as ``runtime["balloon"]``.

    Refuses more than the instance started with, and instances without a
    balloon device (started before it was added to every command line).
    """
    instance = runtime.get("name")
    started = int((runtime.get("spec") or {}).get("memory", 0))
    if started and memory_mib > started:
        raise errors.HypervisorError(f"Instance {instance} started with {started} MiB; its"
                                     f" memory cannot grow to {memory_mib} MiB before a"
                                     " restart")
    try:
        client.execute("balloon", **balloon_args(memory_mib))
    except qmp.QmpCommandError as exc:
        if exc.error_class == "DeviceNotActive":
            raise errors.HypervisorError(f"Instance {instance} has no balloon device (it was"
                                         " started before it had one); restart it") from exc
        raise
    runtime["balloon"] = memory_mib
    logger.info("Instance %s: balloon target %d MiB", instance, memory_mib)


def migration_template(runtime: dict[str, Any]) -> dict[str, Any] | None:
    """What a migration target needs to start the running qemu's machine after
    a hotplug (None: none happened, the instance's spec describes it).

    The target starts from the recorded command line (PCI slots pinned) on
    its own disk paths: see :func:`retarget`.
    """
    if "devices" not in runtime:
        return None
    return {"argv": list(runtime.get("argv") or []), "disks": list(runtime.get("disks") or []),
            "devices": runtime["devices"]}


def retarget(template: dict[str, Any], block_devices: Sequence[str],
             binary: str) -> tuple[list[str], dict[str, Any]]:
    """``(argv, devices)`` for a migration target from a :func:`migration_template`:
    the source's command line with this node's binary and disk paths (in
    instance order), and the device table with those paths.

    The caller adds ``-S``/``-incoming``.  Refuses a template whose disks do
    not match ``block_devices`` in number.
    """
    old = [str(p) for p in template.get("disks") or []]
    if len(old) != len(block_devices):
        raise errors.HypervisorError(f"Migration data lists {len(old)} disks, the target"
                                     f" has {len(block_devices)}")
    paths = dict(zip(old, block_devices))
    argv = [str(w) for w in template.get("argv") or []]
    out = [binary]
    for flag, value in zip(argv, argv[1:]):     # every word after the binary, with its flag
        if flag == "-drive":
            for src, dst in paths.items():
                prefix = f"file={cmdline.escape_option(src)},"
                if value.startswith(prefix):
                    value = f"file={cmdline.escape_option(dst)}," + value[len(prefix):]
                    break
        elif flag == "-blockdev" and value.startswith("{"):
            spec = json.loads(value)
            filename = (spec.get("file") or {}).get("filename")
            if filename in paths:
                spec["file"]["filename"] = paths[filename]
                value = json.dumps(spec, sort_keys=True)
        out.append(value)
    devices = serializer.from_data(Devices, template.get("devices") or {})
    moved = Devices(devices.nics, tuple(
        DiskDevice(path=paths.get(d.path, d.path), uuid=d.uuid, drive=d.drive, node=d.node,
                   device=d.device) for d in devices.disks))
    return out, serializer.to_data(moved)
