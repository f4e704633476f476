"""Instance procedures: start/stop/reboot, runtime info, console, migration, memory.

An *instance dict* is ``serializer.to_data(objects.Instance)`` where the
master has replaced ``hvparams``, ``beparams`` and ``osparams`` by the
*filled* (effective) values and each NIC's ``nicparams`` by its filled
``mode``/``link``/``vlan``; procedures that need the disks take them as
``disks`` (a list of ``serializer.to_data(objects.Disk)`` in instance
order) or, for OS scripts and hard reboots, from the extra instance key
``disks_info`` (same list; Ganeti 3.0 naming).  The node needs no config.

Runtime info (``instance_info``, ``all_instances_info``) follows Ganeti's
wire format ``{"memory": MiB, "vcpus": n, "state": 0|1, "time": seconds}``
where ``state`` 0 means the guest runs (also paused or migrating) and 1
that it is shut down (it powered itself off, or crashed).  The extra key
``hv_state`` carries the hypervisor's own word (``running``, ``paused``,
``shutdown``, ``crashed``, ``incoming``, ``migrating``) so the master can
tell USER_down (``shutdown``) from ERROR_down (``crashed``).  While the
hypervisor runs a migration or block job of the instance, ``jobs`` lists
them (doc/progress.md, "Runtime jobs"); the key is absent otherwise.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ganeti import constants, errors, hypervisor, objects, serializer
from ganeti.backend import blockdev, osimage
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, SLOW, URGENT, procedure
from ganeti.hypervisor import base as hv_base
from ganeti.utils import io as uio

# The node daemon loads the backend before it forks a child per request:
# the hypervisor implementations are imported here, once, in the parent.
hypervisor.import_all()

__all__ = [
    "instance_start", "instance_shutdown", "instance_reboot", "instance_info",
    "all_instances_info", "instance_list", "instance_console_info", "instance_migratable",
    "migration_info", "accept_instance", "instance_migrate", "instance_finalize_migration_dst",
    "instance_finalize_migration_src", "instance_get_migration_status",
    "instance_balloon_memory", "hypervisor_validate_params",
]

logger = logging.getLogger(__name__)

# Ganeti's HvInstanceState as seen on the wire
HV_STATE_CODE_RUNNING = 0
HV_STATE_CODE_SHUTDOWN = 1
_SHUTDOWN_STATES = frozenset([hv_base.HV_STATE_SHUTDOWN, hv_base.HV_STATE_CRASHED])
REBOOT_SOFT = "soft"
REBOOT_HARD = "hard"
REBOOT_FULL = "full"
REBOOT_TYPES = frozenset([REBOOT_SOFT, REBOOT_HARD, REBOOT_FULL])
#: Part of instance_start's refusal of a running instance; the master's
#: ``LUInstanceStartup`` matches it (keep both in sync; a test checks).
ALREADY_RUNNING = "is already running"
_FAKE_NODE_INFO_FILE = "fake-node-info.json"   # same file as backend.node reads


# --- helpers -------------------------------------------------------------------

def _node_overrides(ctx: NodeContext) -> dict[str, Any]:
    path = os.path.join(ctx.paths.conf_dir, _FAKE_NODE_INFO_FILE)
    if not os.path.exists(path):
        return {}
    try:
        data = serializer.loads(uio.read_file(path))
    except (OSError, errors.GanetiError) as exc:
        raise errors.OpExecError(f"Cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise errors.OpExecError(f"{path} must hold a JSON object")
    return data


def hypervisor_for(ctx: NodeContext, name: str) -> hv_base.BaseHypervisor:
    """The hypervisor ``name`` on this node.

    For the fake, ``memory_total``/``memory_dom0``/``cpu_total`` of the
    node's ``etc/ganeti/fake-node-info.json`` (when present) size the node.
    """
    kwargs: dict[str, Any] = {}
    if name == constants.HT_FAKE:
        over = _node_overrides(ctx)
        for key, kwarg in (("memory_total", "node_memory"), ("memory_dom0", "dom0_memory"),
                           ("cpu_total", "cpu_total")):
            if isinstance(over.get(key), int) and not isinstance(over.get(key), bool):
                kwargs[kwarg] = over[key]
        kwargs["clock"] = ctx.clock
    return hypervisor.get_hypervisor(name, ctx.paths, **kwargs)


def parse_instance(data: Any) -> objects.Instance:
    """An :class:`objects.Instance` from an instance dict (extra keys ignored)."""
    if not isinstance(data, dict):
        raise errors.OpExecError(f"Invalid instance description {data!r}: expected an object")
    try:
        inst = serializer.from_data(objects.Instance, data)
    except errors.SerializationError as exc:
        raise errors.OpExecError(f"Invalid instance description: {exc}") from exc
    if not inst.name:
        raise errors.OpExecError("Instance description without a name")
    return inst


def instance_disks_info(data: dict) -> list[Any]:
    """The ``disks_info`` list of an instance dict ([] when absent)."""
    disks = data.get("disks_info") or []
    if not isinstance(disks, list):
        raise errors.OpExecError(f"Instance {data.get('name')}: disks_info must be a list")
    return disks


def _nic_spec(nic: objects.NIC) -> hv_base.NicSpec:
    params = nic.nicparams or {}
    return hv_base.NicSpec(mac=nic.mac, ip=nic.ip,
                           mode=params.get("mode", constants.NIC_MODE_BRIDGED),
                           link=str(params.get("link", "")), uuid=nic.uuid, name=nic.name,
                           vlan=str(params.get("vlan") or ""))


def instance_spec(inst: objects.Instance) -> hv_base.InstanceSpec:
    """The hypervisor's view of an instance (memory = beparams maxmem)."""
    be = inst.beparams or {}
    memory = be.get("maxmem", be.get("memory", 128))
    vcpus = be.get("vcpus", 1)
    if not isinstance(memory, int) or memory <= 0:
        raise errors.OpExecError(f"Instance {inst.name}: invalid maxmem {memory!r}")
    if not isinstance(vcpus, int) or vcpus <= 0:
        raise errors.OpExecError(f"Instance {inst.name}: invalid vcpus {vcpus!r}")
    return hv_base.InstanceSpec(name=inst.name, uuid=inst.uuid, memory=memory, vcpus=vcpus,
                                hvparams=dict(inst.hvparams), beparams=dict(be),
                                nics=tuple(_nic_spec(n) for n in inst.nics), os=inst.os)


def _assemble_all(ctx: NodeContext, disks: list[Any], instance_name: str) -> list[str]:
    paths = []
    for idx, disk in enumerate(disks):
        _, path = blockdev.assemble_disk(ctx, disk, instance_name, idx)
        if path:
            paths.append(path)
    return paths


def _wire_info(info: dict[str, Any]) -> dict[str, Any]:
    state = info.get("state")
    code = HV_STATE_CODE_SHUTDOWN if state in _SHUTDOWN_STATES else HV_STATE_CODE_RUNNING
    wire = {"memory": info.get("memory", 0), "vcpus": info.get("vcpus", 1), "state": code,
            "time": info.get("time", 0), "hv_state": state}
    if info.get("jobs"):    # running migrations and block jobs (doc/progress.md)
        wire["jobs"] = list(info["jobs"])
    return wire


def _is_running(hv: hv_base.BaseHypervisor, name: str) -> bool:
    info = hv.get_instance_info(name)
    return info is not None and info.get("state") not in _SHUTDOWN_STATES


# --- lifecycle ---------------------------------------------------------------

@procedure(NORMAL)
def instance_start(ctx: NodeContext, instance: dict, disks: list,
                   startup_paused: bool) -> None:
    """Assemble the disks ([disk dict] in instance order) and start the instance; refuses a
    running instance. -> None

    Assemble ``disks`` and start the instance on its hypervisor.

    Refuses an instance that is already running (the message contains
    :data:`ALREADY_RUNNING`, which the master's startup LU relies on to
    treat the start as done, without asking ``instance_info`` first),
    missing disks and starts that do not fit in the node's free memory.
    An instance that stopped by itself (``shutdown``/``crashed``) is
    cleaned up (stopped with timeout 0) and started again.
    """
    inst = parse_instance(instance)
    hv = hypervisor_for(ctx, inst.hypervisor)
    info = hv.get_instance_info(inst.name)
    if info is not None:
        if info.get("state") not in _SHUTDOWN_STATES:
            raise errors.HypervisorError(
                f"Instance {inst.name} {ALREADY_RUNNING} on {ctx.hostname}")
        hv.stop_instance(inst.name, force=False, timeout=0.0)
    paths = _assemble_all(ctx, disks, inst.name)
    osimage.refresh_seed(ctx, instance)     # doc/images.md, "cloud-init"
    hv.start_instance(instance_spec(inst), paths, startup_paused)


@procedure(NORMAL)
def instance_shutdown(ctx: NodeContext, instance: dict, timeout: float) -> None:
    """Stop the instance: soft for timeout seconds, then hard; not running is fine. -> None

    Stop the instance: soft for ``timeout`` seconds, then hard.

    An instance that is not running is fine (nothing to do), as in Ganeti.
    """
    inst = parse_instance(instance)
    hv = hypervisor_for(ctx, inst.hypervisor)
    osimage.metadata_forget(ctx, inst.name)     # doc/images.md, "The metadata service"
    if inst.name not in hv.list_instances():
        logger.info("Instance %s is not running, nothing to shut down", inst.name)
        return
    hv.stop_instance(inst.name, force=False, timeout=float(timeout))


def _reboot_disk_paths(ctx: NodeContext, hv: hv_base.BaseHypervisor, instance: dict,
                       name: str) -> tuple[list[Any] | None, list[str]]:
    disks = instance_disks_info(instance)
    if disks:
        return disks, []
    getter = getattr(hv, "get_instance_state", None)
    state = getter(name) if getter else None
    return None, list((state or {}).get("disks") or [])


@procedure(NORMAL)
def instance_reboot(ctx: NodeContext, instance: dict, reboot_type: str,
                    shutdown_timeout: float) -> None:
    """Reboot soft|hard|full (full: stop, re-assemble instance['disks_info'], start). -> None

    Reboot: ``soft`` (inside the guest), ``hard`` (stop + start) or ``full``.

    ``full`` stops the instance (soft for ``shutdown_timeout`` s, then hard;
    fine if it is not running), re-assembles the disks and starts it.
    ``hard`` and ``full`` use the disks of ``instance["disks_info"]``, or
    the ones the running instance has when that key is missing.  The
    cloud-init seed and metadata entry of an image-based instance are
    rebuilt first, as on a start (a soft reboot keeps its qemu: the guest
    sees the new seed drive after a hard or full reboot, the metadata
    service answers the new data at once; doc/images.md, "cloud-init").
    """
    if reboot_type not in REBOOT_TYPES:
        raise errors.OpExecError(f"Invalid reboot type {reboot_type!r}"
                                 f" (one of {', '.join(sorted(REBOOT_TYPES))})")
    inst = parse_instance(instance)
    hv = hypervisor_for(ctx, inst.hypervisor)
    running = _is_running(hv, inst.name)
    if reboot_type != REBOOT_FULL and not running:
        raise errors.HypervisorError(f"Cannot reboot instance {inst.name}: it is not running")
    osimage.refresh_seed(ctx, instance)     # the OS parameters may have changed meanwhile
    if reboot_type == REBOOT_SOFT:
        hv.reboot_instance(inst.name)
        return
    disks, old_paths = _reboot_disk_paths(ctx, hv, instance, inst.name)
    if inst.name in hv.list_instances():
        hv.stop_instance(inst.name, force=reboot_type == REBOOT_HARD,
                         timeout=float(shutdown_timeout))
    if disks is not None:
        if reboot_type == REBOOT_FULL:
            for disk in disks:
                blockdev.blockdev_shutdown(ctx, disk)
        paths = _assemble_all(ctx, disks, inst.name)
    else:
        paths = old_paths
    hv.start_instance(instance_spec(inst), paths, False)


# --- information ---------------------------------------------------------------

@procedure(URGENT)
def instance_info(ctx: NodeContext, instance_name: str, hypervisor: str,
                  hvparams: dict) -> dict[str, Any] | None:
    """Runtime info {memory, vcpus, state, time, hv_state} or None if unknown.

    Runtime info of one instance (see module docstring), None if unknown here.
    """
    info = hypervisor_for(ctx, hypervisor).get_instance_info(instance_name)
    return None if info is None else _wire_info(info)


def _hv_names(hypervisor_list: list) -> list[str]:
    names = []
    for name in hypervisor_list:
        if not isinstance(name, str):
            raise errors.HypervisorError(f"Invalid hypervisor name {name!r}")
        names.append(name)
    return names


@procedure(URGENT, keepalive=True)
def all_instances_info(ctx: NodeContext, hypervisor_list: list,
                       all_hvparams: dict) -> dict[str, dict[str, Any]]:
    """{name: {memory, vcpus, state 0 running|1 shutdown, time, hv_state}} of every instance of
    the listed hypervisors.

    ``{name: {"memory", "vcpus", "state", "time", "hv_state"}}`` for every
    instance of the listed hypervisors on this node.

    Raises if one instance is reported by two hypervisors.
    """
    result: dict[str, dict[str, Any]] = {}
    for name in _hv_names(hypervisor_list):
        for iname, info in hypervisor_for(ctx, name).get_all_instances_info().items():
            if iname in result:
                raise errors.HypervisorError(
                    f"Instance {iname} is running twice (hypervisor {name} and another)")
            result[iname] = _wire_info(info)
    return result


@procedure(URGENT, keepalive=True)
def instance_list(ctx: NodeContext, hypervisor_list: list, all_hvparams: dict) -> list[str]:
    """Sorted names of the instances the listed hypervisors know on the node."""
    names: set[str] = set()
    for name in _hv_names(hypervisor_list):
        names.update(hypervisor_for(ctx, name).list_instances())
    return sorted(names)


@procedure(URGENT)
def instance_console_info(ctx: NodeContext, instance: dict) -> dict[str, Any]:
    """Console description {instance, kind, message, host, port, user, command}.

    How to reach the console: ``{"instance", "kind", "message", "host",
    "port", "user", "command"}`` (``kind`` ``msg``/``ssh``/``vnc``/``spice``) of
    the first console, and ``consoles``: every console, that one first, each
    such a dict (a kvm instance may have a serial console and VNC)."""
    inst = parse_instance(instance)
    consoles = hypervisor_for(ctx, inst.hypervisor).get_consoles(instance_spec(inst),
                                                                 ctx.hostname)
    return {**consoles[0], "consoles": consoles}


@procedure(FAST)
def instance_migratable(ctx: NodeContext, instance: dict) -> None:
    """Raise unless the instance runs here and its disks_info disks exist. -> None

    Check the instance runs here and its disks are present; raise otherwise.
    """
    inst = parse_instance(instance)
    if not _is_running(hypervisor_for(ctx, inst.hypervisor), inst.name):
        raise errors.HypervisorError(f"Instance {inst.name} is not running on {ctx.hostname}")
    for idx, disk in enumerate(instance_disks_info(instance)):
        if blockdev.blockdev_find(ctx, disk) is None:
            raise errors.StorageError(f"Disk {idx} of instance {inst.name} is missing")


# --- migration ---------------------------------------------------------------

@procedure(FAST)
def migration_info(ctx: NodeContext, instance: dict) -> dict[str, Any]:
    """Source: migration data (opaque dict) to pass to accept_instance and
    instance_finalize_migration_dst on the target.

    Source: the data the target needs (pass it to accept_instance/finalize).
    """
    inst = parse_instance(instance)
    return hypervisor_for(ctx, inst.hypervisor).migration_info(inst.name)


@procedure(NORMAL)
def accept_instance(ctx: NodeContext, instance: dict, info: dict,
                    target: str) -> dict[str, Any] | None:
    """Target: assemble the disks, prepare to receive the instance (info from migration_info,
    target = this node's address). -> dict for instance_migrate (e.g. the port) or None

    Target: prepare to receive the instance (``info`` from migration_info,
    ``target`` this node's address).  The master assembles the disks here
    first; their paths are given to the hypervisor.  Returns what the
    source's instance_migrate needs (e.g. the port), or None."""
    inst = parse_instance(instance)
    paths = _assemble_all(ctx, instance_disks_info(instance), inst.name)
    osimage.refresh_seed(ctx, instance)     # the same devices as on the source
    return hypervisor_for(ctx, inst.hypervisor).accept_instance(instance_spec(inst), info,
                                                                target, paths)


@procedure(SLOW)
def instance_migrate(ctx: NodeContext, instance: dict, target_node: str,
                     target_address: str, live: bool, target_info: dict) -> None:
    """Source: send the instance to the target node (target_info: what accept_instance
    answered). -> None

    Source: send the instance to ``target_node`` (progress: get_migration_status);
    ``target_info`` is what accept_instance answered on the target.  The
    instance's current hvparams (migration bandwidth and downtime) apply."""
    inst = parse_instance(instance)
    hypervisor_for(ctx, inst.hypervisor).migrate_instance(
        inst.name, target_node, target_address, live, target_info, dict(inst.hvparams))


@procedure(NORMAL)
def instance_finalize_migration_dst(ctx: NodeContext, instance: dict, info: dict,
                                    success: bool) -> None:
    """Target: run the received instance (success) or drop it. -> None"""
    inst = parse_instance(instance)
    hypervisor_for(ctx, inst.hypervisor).finalize_migration_dst(instance_spec(inst), info,
                                                                success)
    if not success:
        osimage.metadata_forget(ctx, inst.name)


@procedure(NORMAL)
def instance_finalize_migration_src(ctx: NodeContext, instance: dict, success: bool,
                                    live: bool) -> None:
    """Source: forget the instance (success) or resume it. -> None"""
    inst = parse_instance(instance)
    hypervisor_for(ctx, inst.hypervisor).finalize_migration_src(inst.name, success, live)
    if success:
        osimage.metadata_forget(ctx, inst.name)     # it runs on the target now


@procedure(FAST)
def instance_get_migration_status(ctx: NodeContext, instance: dict) -> dict[str, Any]:
    """Source: {status setup|active|completed|failed|cancelled|..., info, ram, mbps,
    downtime_ms, total_time_ms} (figures when known).

    Source: ``{"status": "setup"|"active"|"completed"|"failed"|"cancelled"|...,
    "info": text}`` plus the figures the hypervisor knows (``ram`` bytes,
    ``mbps``, ``downtime_ms``, ``total_time_ms``; the fake hypervisor gives
    ``transferred_ram``/``total_ram`` in MiB)."""
    inst = parse_instance(instance)
    return hypervisor_for(ctx, inst.hypervisor).get_migration_status(inst.name)


@procedure(FAST)
def instance_balloon_memory(ctx: NodeContext, instance: dict, memory: int) -> None:
    """Set the memory (MiB) of the running instance. -> None

    Set the memory (MiB) of the running instance; growth must fit the node.
    """
    inst = parse_instance(instance)
    hypervisor_for(ctx, inst.hypervisor).balloon_instance_memory(inst.name, memory)


@procedure(FAST)
def hypervisor_validate_params(ctx: NodeContext, hvname: str, hvparams: dict) -> None:
    """Validate filled hvparams on the node; raise if bad. -> None

    Validate (filled) ``hvparams`` for ``hvname`` on this node; raise if bad.
    """
    hypervisor_for(ctx, hvname).validate_parameters(hvparams)
