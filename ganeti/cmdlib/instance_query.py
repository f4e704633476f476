"""The ``instance`` query resource and OP_INSTANCE_QUERY_DATA.

Listing is config-only unless a *live* field (``status``, ``oper_state``,
``oper_ram``, ``oper_vcpus``) is requested or filtered on; then one
``all_instances_info`` call goes to every online node (in parallel), never
one per instance.  ``hv_jobs`` (live) adds the master's own running disk
copies (``context.runtime_jobs``) to what the hypervisors report.  Instances on offline nodes get status 4 (offline)
cells without any RPC; a node that does not answer gives status 3 cells
and the status ``ERROR_nodedown``.
"""

from __future__ import annotations

import time
from typing import Any

from ganeti import constants, errors, locking, parameters, progress, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import drbd
from ganeti.cmdlib.base import LogicalUnit, NoHooksLU
from ganeti.cmdlib.common import find_instance, select_named
from ganeti.cmdlib.instance import hv_list_and_params, instance_rpc_dict, runtime_status
from ganeti.config import ConfigReader
from ganeti.ha import policy as ha_policy
from ganeti.ha import recovery as ha_recovery
from ganeti.context import MasterContext
from ganeti.objects import NIC, Disk, Instance
from ganeti.opcodes.instance import OpInstanceQueryData

__all__ = ["INSTANCE_FIELDS", "collect_instances", "param_title", "InstanceQueryContext",
           "LUInstanceQueryData", "instance_query_data", "runtime_jobs"]

LIVE = frozenset(["live"])
#: the ``console`` field: live state, then the primary's console description
CONSOLE = frozenset(["live", "console"])
_MAX_DISKS = 16
_MAX_NICS = 8


class InstanceQueryContext:
    """What the getters read: config snapshots, live data and caches."""

    def __init__(self, cfg: ConfigReader, live: dict[str, Any] | None, failed: set[str],
                 runtime_table: progress.RuntimeTable | None = None) -> None:
        data = cfg.get_config_data()
        self.cfg = cfg
        self.runtime_table = runtime_table   # disk copies running on the master
        self.cluster = data.cluster
        self.nodes = data.nodes
        self.disks = data.disks
        self.networks = data.networks
        self.nodegroups = data.nodegroups
        self.now = time.time()        # the auto-repair suspensions' clock (ha_* fields)
        self.live = live              # node uuid -> {name: info}, None: not collected
        self.failed = failed          # node uuids that did not answer
        self._be: dict[str, dict[str, Any]] = {}
        self._be_base: dict[str, Any] | None = None    # defaults <- cluster, once per query
        self._hv: dict[str, dict[str, Any]] = {}
        self._where: dict[str, str] | None = None
        #: instance name -> its console description (``console`` field), if collected
        self.consoles: dict[str, Any] = {}

    def be(self, inst: Instance) -> dict[str, Any]:
        res = self._be.get(inst.uuid)
        if res is None:
            base = self._be_base
            if base is None:
                base = self._be_base = parameters.fill_beparams(self.cluster)
            # (the getters only read: instances without own values share the base)
            res = self._be[inst.uuid] = (parameters.fill_dict(base, inst.beparams)
                                         if inst.beparams else base)
        return res

    def hv(self, inst: Instance) -> dict[str, Any]:
        res = self._hv.get(inst.uuid)
        if res is None:
            res = self._hv[inst.uuid] = parameters.fill_instance_hvparams(self.cluster, inst)
        return res

    def inst_disks(self, inst: Instance) -> list[Any]:
        return [self.disks[d] for d in inst.disks if d in self.disks]

    def network_name(self, uuid: str | None) -> str | None:
        """The name of network ``uuid`` (None for no network; the UUID if unknown)."""
        if uuid is None:
            return None
        net = self.networks.get(uuid)
        return net.name if net is not None else uuid

    def node_name(self, uuid: str) -> str:
        node = self.nodes.get(uuid)
        return node.name if node is not None else uuid

    def live_entry(self, inst: Instance) -> Any:
        """The primary's info for ``inst``, or a Sentinel, or None (not running)."""
        if self.live is None:
            return query.NODATA
        pnode = self.nodes.get(inst.primary_node)
        if pnode is not None and pnode.offline:
            return query.OFFLINE
        if inst.primary_node in self.failed:
            return query.UNAVAIL
        return self.live.get(inst.primary_node, {}).get(inst.name)

    def elsewhere(self, inst: Instance) -> bool:
        if self._where is None:
            self._where = {}
            for node_uuid, entries in (self.live or {}).items():
                for name in entries:
                    self._where.setdefault(name, node_uuid)
        where = self._where.get(inst.name)
        return where is not None and where != inst.primary_node


def _status(ctx: InstanceQueryContext, inst: Instance) -> Any:
    if ctx.live is None:
        return query.NODATA
    pnode = ctx.nodes.get(inst.primary_node)
    entry = ctx.live.get(inst.primary_node, {}).get(inst.name)
    running_elsewhere = entry is None and ctx.elsewhere(inst)
    return runtime_status(inst, pnode, entry, inst.primary_node in ctx.failed, running_elsewhere)


def _live_value(key: str) -> Any:
    def getter(ctx: InstanceQueryContext, inst: Instance) -> Any:
        entry = ctx.live_entry(inst)
        if isinstance(entry, query.fields.Sentinel):
            return entry
        if entry is None or entry.get("state") != 0:
            return query.UNAVAIL
        return entry.get(key)
    return getter


def runtime_jobs(ctx: InstanceQueryContext, inst: Instance) -> Any:
    """The ``jobs`` runtime field: the hypervisor's (migrations, block jobs)
    and those of the disk copies running in jobs on the master
    (doc/progress.md, "Runtime jobs"); a Sentinel when the primary node
    could not tell and nothing runs on the master."""
    entry = ctx.live_entry(inst)
    ours = ctx.runtime_table.jobs(inst.name) if ctx.runtime_table is not None else []
    if isinstance(entry, query.fields.Sentinel):
        return ours or entry
    hv_jobs = entry.get("jobs") if isinstance(entry, dict) else None
    return list(hv_jobs if isinstance(hv_jobs, list) else []) + ours


def _oper_state(ctx: InstanceQueryContext, inst: Instance) -> Any:
    entry = ctx.live_entry(inst)
    if isinstance(entry, query.fields.Sentinel):
        return entry
    return entry is not None and entry.get("state") == 0


def _console(ctx: InstanceQueryContext, inst: Instance) -> Any:
    """The console description of a running instance; None when it does not run."""
    entry = ctx.live_entry(inst)
    if isinstance(entry, query.fields.Sentinel):
        return entry
    if entry is None or entry.get("state") != 0:
        return None
    return ctx.consoles.get(inst.name, query.UNAVAIL)


def _collect_consoles(context: MasterContext, cfg: ConfigReader, items: list[Instance],
                      ctx: InstanceQueryContext) -> None:
    """Ask the primary of every running instance in ``items`` how to reach its console.

    One ``instance_console_info`` call per instance, to all primaries at
    once per round (an instance whose node does not answer gets no entry:
    the field is then unavailable).
    """
    if context.rpc is None:
        return
    pending = [inst for inst in items
               if isinstance(entry := ctx.live_entry(inst), dict) and entry.get("state") == 0]
    while pending:
        by_node: dict[str, Instance] = {}
        rest = []
        for inst in pending:
            node = ctx.node_name(inst.primary_node)
            if node in by_node:
                rest.append(inst)
            else:
                by_node[node] = inst
        results = context.rpc.per_node(by_node, lambda rpc, node: rpc.call_instance_console_info(
            node, instance=instance_rpc_dict(cfg, by_node[node])))
        for node, inst in by_node.items():
            res = results.get(node)
            if res is not None and not res.failed and isinstance(res.payload, dict):
                # the field keeps Ganeti's shape, one console (its clients build
                # an InstanceConsole of it, which refuses other keys); every
                # console ("consoles") is RAPI's console resource's
                ctx.consoles[inst.name] = {k: v for k, v in res.payload.items()
                                           if k != "consoles"}
        pending = rest


def _node_group(cfg: ConfigReader, node_name: str | None) -> tuple[str | None, str | None]:
    """(group name, group uuid) of the node called ``node_name``; Nones when unknown."""
    node = cfg.get_node_info_by_name(node_name) if node_name else None
    group = cfg.get_nodegroup(node.group) if node is not None and node.group else None
    return (group.name, group.uuid) if group is not None else (None, None)


def _snodes(ctx: InstanceQueryContext, inst: Instance) -> list[str]:
    result: list[str] = []
    for disk in ctx.inst_disks(inst):
        for n in disk.nodes:
            if n != inst.primary_node:
                name = ctx.node_name(n)
                if name not in result:
                    result.append(name)
    return result


def _group_tags(ctx: InstanceQueryContext, inst: Instance) -> list[str]:
    node = ctx.nodes.get(inst.primary_node)
    group = ctx.nodegroups.get(node.group) if node is not None else None
    return group.tags if group is not None else []


def _ha_policy(ctx: InstanceQueryContext, inst: Instance) -> str:
    return ha_policy.effective_policy(inst.tags, _group_tags(ctx, inst), ctx.cluster.tags,
                                      ctx.now).describe()


def _ha_last(ctx: InstanceQueryContext, inst: Instance) -> str | None:
    last = ha_policy.last_repair(inst.tags)
    return None if last is None else last.describe()


def _ha_state(ctx: InstanceQueryContext, inst: Instance) -> str:
    text = ha_policy.ha_state(inst.tags, _group_tags(ctx, inst), ctx.cluster.tags, ctx.now)
    counts = ha_recovery.describe_counts(inst.tags)
    return text if counts is None else f"{text}; {counts}"


def _nicp(ctx: InstanceQueryContext, nic: NIC) -> dict[str, Any]:
    return parameters.fill_nicparams(ctx.cluster, nic.nicparams)


def _f(name: str, title: str, kind: str, doc: str, getter: Any,
       needs: frozenset[str] = frozenset(), *, listed: bool = True) -> query.FieldDef:
    return query.FieldDef(name, title, kind, doc, getter, needs, listed)


def _indexed(name: str, title: str, kind: str, doc: str, count: int, listget: Any,
             *, listed: bool = True) -> list[Any]:
    result = []
    for i in range(count):
        def getter(ctx: Any, inst: Instance, i: int = i) -> Any:
            values = listget(ctx, inst)
            return values[i] if i < len(values) else query.UNAVAIL
        result.append(_f(f"{name}/{i}", f"{title}/{i}", kind, f"{doc} of item {i}", getter,
                         listed=listed))
    return result


#: Hypervisor parameters Ganeti keeps at cluster level only (no ``hv/`` field
#: there); ours may be set per instance, so their fields exist, unlisted.
_CLUSTER_LEVEL_HV = frozenset(["migration_bandwidth", "migration_mode", "migration_port"])
#: Hypervisor parameters of ours that Ganeti 3.0 does not have
#: (doc/kvm.md, "UEFI and TPM"; doc/images.md): their fields exist, unlisted
_OWN_HV = frozenset(["firmware", "tpm", "cloud_init_source"])


def param_title(kind: str, key: str) -> str:
    """The column title of the ``be/KEY``/``hv/KEY`` field: ``BE_KEY``/``HV_KEY``.

    The prefix keeps backend and hypervisor columns apart (and apart from
    the other instance fields) in ``gnt-instance list`` headers.
    """
    return f"{kind.upper()}_{key}"


#: query field kind of a parameter type (strings may be unset: "other", as Ganeti)
_PARAM_KINDS = {parameters.P_INT: constants.QFT_NUMBER, parameters.P_SIZE: constants.QFT_UNIT,
                parameters.P_BOOL: constants.QFT_BOOL, parameters.P_FLOAT: constants.QFT_NUMBER}


def _param_kind(defs: list[parameters.ParamDef]) -> str:
    """The field kind of a parameter (of one type in every table that has it)."""
    kinds = {_PARAM_KINDS.get(d.kind, constants.QFT_OTHER) for d in defs}
    return kinds.pop() if len(kinds) == 1 else constants.QFT_OTHER


def _param_fields() -> list[query.FieldDef]:
    result = []
    for key in sorted(parameters.BE_PARAMETERS):
        result.append(_f(f"be/{key}", param_title("be", key),
                         _param_kind([parameters.BE_PARAMETERS[key]]),
                         f"The effective backend parameter '{key}'",
                         lambda ctx, inst, key=key: ctx.be(inst).get(key, query.UNAVAIL)))
    hv_keys = sorted({k for table in parameters.HV_PARAMETERS.values() for k in table})
    for key in hv_keys:
        defs = [table[key] for table in parameters.HV_PARAMETERS.values() if key in table]
        result.append(_f(f"hv/{key}", param_title("hv", key), _param_kind(defs),
                         f"The effective hypervisor parameter '{key}'",
                         lambda ctx, inst, key=key: ctx.hv(inst).get(key, query.UNAVAIL),
                         listed=key not in _CLUSTER_LEVEL_HV | _OWN_HV))
    return result


def _disk_sizes(ctx: Any, inst: Instance) -> list[int]:
    return [d.size for d in ctx.inst_disks(inst)]


def _nic_attr(attr: str) -> Any:
    return lambda ctx, inst: [getattr(n, attr) for n in inst.nics]


def _nic_param(key: str) -> Any:
    return lambda ctx, inst: [_nicp(ctx, n).get(key) for n in inst.nics]


_TEXT, _NUM, _UNIT, _OTHER, _BOOL = (constants.QFT_TEXT, constants.QFT_NUMBER,
                                     constants.QFT_UNIT, constants.QFT_OTHER, constants.QFT_BOOL)

INSTANCE_FIELDS = query.make_table([
    query.simple_field("name", "Instance", _TEXT, "Instance name", "name"),
    query.uuid_field("Instance"),
    query.simple_field("os", "OS", _TEXT, "Operating system", "os"),
    _f("pnode", "Primary_node", _TEXT, "Primary node",
       lambda ctx, inst: ctx.node_name(inst.primary_node)),
    _f("pnode.group", "PrimaryNodeGroup", _TEXT, "Primary node's group",
       lambda ctx, inst: ctx.nodes[inst.primary_node].group
       if inst.primary_node in ctx.nodes else query.UNAVAIL),
    _f("snodes", "Secondary_Nodes", _OTHER, "Secondary nodes", _snodes),
    query.simple_field("admin_state", "InstanceState", _TEXT,
                       "Desired state of the instance", "admin_state"),
    query.simple_field("admin_state_source", "InstanceStateSource", _TEXT,
                       "Who last set the desired state", "admin_state_source"),
    _f("admin_up", "Autostart", _BOOL, "Whether the instance should run",
       lambda ctx, inst: inst.admin_state == constants.ADMINST_UP),
    query.simple_field("disks_active", "DisksActive", _BOOL,
                       "Whether the disks are assembled", "disks_active"),
    _f("status", "Status", _TEXT, "Instance status (running, ADMIN_down, ERROR_...)",
       _status, LIVE),
    _f("oper_state", "Running", _BOOL, "Whether the instance actually runs", _oper_state, LIVE),
    _f("oper_ram", "Memory", _UNIT, "Actual memory usage", _live_value("memory"), LIVE),
    _f("oper_vcpus", "VCPUs", _NUM, "Actual number of VCPUs", _live_value("vcpus"), LIVE),
    _f("hv_jobs", "Jobs", _OTHER, "Running migrations, mirrors and disk copies, with"
       " their progress (doc/progress.md)", runtime_jobs, LIVE, listed=False),
    query.simple_field("disk_template", "Disk_template", _TEXT, "Disk template",
                       "disk_template"),
    query.simple_field("hypervisor", "Hypervisor", _TEXT, "Hypervisor", "hypervisor"),
    query.simple_field("network_port", "Network_port", _OTHER,
                       "Network port of the console", "network_port"),
    _f("disk.count", "Disks", _NUM, "Number of disks", lambda ctx, inst: len(inst.disks)),
    _f("disk.sizes", "Disk_sizes", _OTHER, "Disk sizes (MiB)", _disk_sizes),
    _f("disk.modes", "Disk_modes", _OTHER, "Disk modes",
       lambda ctx, inst: [d.mode for d in ctx.inst_disks(inst)], listed=False),
    _f("disk.names", "Disk_names", _OTHER, "Disk names",
       lambda ctx, inst: [d.name for d in ctx.inst_disks(inst)]),
    _f("disk.uuids", "Disk_UUIDs", _OTHER, "Disk UUIDs", lambda ctx, inst: list(inst.disks)),
    _f("disk.spindles", "Disk_spindles", _OTHER, "Disk spindles",
       lambda ctx, inst: [d.spindles for d in ctx.inst_disks(inst)]),
    _f("disk_usage", "DiskUsage", _UNIT, "Total disk space used (MiB)",
       lambda ctx, inst: sum(_disk_sizes(ctx, inst))),
    *_indexed("disk.size", "Disk", _UNIT, "Disk size", _MAX_DISKS, _disk_sizes),
    *_indexed("disk.mode", "DiskMode", _TEXT, "Disk mode", _MAX_DISKS,
              lambda ctx, inst: [d.mode for d in ctx.inst_disks(inst)], listed=False),
    _f("nic.count", "NICs", _NUM, "Number of NICs", lambda ctx, inst: len(inst.nics)),
    _f("nic.macs", "NIC_MACs", _OTHER, "NIC MAC addresses", _nic_attr("mac")),
    _f("nic.ips", "NIC_IPs", _OTHER, "NIC IP addresses", _nic_attr("ip")),
    _f("nic.names", "NIC_Names", _OTHER, "NIC names", _nic_attr("name")),
    _f("nic.uuids", "NIC_UUIDs", _OTHER, "NIC UUIDs", _nic_attr("uuid")),
    _f("nic.networks", "NIC_networks", _OTHER, "NIC networks", _nic_attr("network")),
    _f("nic.networks.names", "NIC_networks_names", _OTHER, "NIC network names",
       lambda ctx, inst: [ctx.network_name(n.network) for n in inst.nics]),
    _f("nic.modes", "NIC_modes", _OTHER, "NIC modes", _nic_param("mode")),
    _f("nic.links", "NIC_links", _OTHER, "NIC links", _nic_param("link")),
    _f("nic.vlans", "NIC_VLANs", _OTHER, "NIC VLANs", _nic_param("vlan")),
    _f("nic.bridges", "NIC_bridges", _OTHER, "NIC bridges (bridged mode)",
       lambda ctx, inst: [p.get("link") if p.get("mode") == constants.NIC_MODE_BRIDGED else None
                          for p in (_nicp(ctx, n) for n in inst.nics)]),
    *_indexed("nic.mac", "NicMAC", _TEXT, "NIC MAC address", _MAX_NICS, _nic_attr("mac")),
    *_indexed("nic.ip", "NicIP", _TEXT, "NIC IP address", _MAX_NICS, _nic_attr("ip")),
    *_indexed("nic.mode", "NicMode", _TEXT, "NIC mode", _MAX_NICS, _nic_param("mode")),
    *_indexed("nic.link", "NicLink", _TEXT, "NIC link", _MAX_NICS, _nic_param("link")),
    *_indexed("nic.vlan", "NicVLAN", _TEXT, "NIC VLAN", _MAX_NICS, _nic_param("vlan")),
    *_indexed("nic.name", "NicName", _TEXT, "NIC name", _MAX_NICS, _nic_attr("name")),
    *_indexed("nic.uuid", "NicUUID", _TEXT, "NIC UUID", _MAX_NICS, _nic_attr("uuid")),
    *_indexed("nic.network", "NicNetwork", _TEXT, "NIC network (UUID)", _MAX_NICS,
              _nic_attr("network")),
    *_indexed("nic.network.name", "NicNetworkName", _TEXT, "NIC network name", _MAX_NICS,
              lambda ctx, inst: [ctx.network_name(n.network) for n in inst.nics]),
    _f("beparams", "BackendParameters", _OTHER, "Effective backend parameters",
       lambda ctx, inst: ctx.be(inst)),
    _f("hvparams", "HypervisorParameters", _OTHER, "Effective hypervisor parameters",
       lambda ctx, inst: ctx.hv(inst)),
    _f("osparams", "OSParameters", _OTHER, "Effective OS parameters",
       lambda ctx, inst: parameters.fill_osparams(ctx.cluster, inst.os, inst.osparams)),
    query.simple_field("custom_beparams", "CustomBackendParameters", _OTHER,
                       "Custom backend parameters", "beparams"),
    query.simple_field("custom_hvparams", "CustomHypervisorParameters", _OTHER,
                       "Custom hypervisor parameters", "hvparams"),
    query.simple_field("custom_osparams", "CustomOSParameters", _OTHER,
                       "Custom OS parameters", "osparams"),
    _f("custom_nicparams", "CustomNicParameters", _OTHER, "Custom NIC parameters",
       lambda ctx, inst: [dict(n.nicparams) for n in inst.nics]),
    *_param_fields(),
    _f("console", "Console", _OTHER, "How to reach the console of a running instance"
       " (what OpInstanceConsole returns; null when it does not run)", _console,
       CONSOLE),
    _f("ha_state", "HAState", _TEXT, "Auto-repair policy from the ganeti:watcher:autorepair"
       " tags (instance, group, cluster), harep's last repair and node loss recovery's"
       " counts (doc/ha.md)", _ha_state,
       listed=False),
    _f("ha_policy", "HAPolicy", _TEXT, "Auto-repair policy: the repair type allowed and the"
       " tagged object, suspended, or disabled (doc/ha.md)",
       _ha_policy, listed=False),
    _f("ha_last_repair", "HALastRepair", _TEXT, "harep's pending repair, else its newest"
       " result tag (doc/ha.md)", _ha_last, listed=False),
    query.tags_field(),
    query.serial_no_field("Instance"),
    *query.timestamp_fields("Instance"),
])


def _collect_live(context: MasterContext,
                  cfg: ConfigReader) -> tuple[dict[str, Any], set[str]]:
    live: dict[str, Any] = {}
    failed: set[str] = set()
    nodes = [n for n in cfg.get_all_nodes_info().values() if not n.offline and n.vm_capable]
    if not nodes:
        return live, failed
    if context.rpc is None:
        return live, {n.uuid for n in nodes}
    hvs, hvparams = hv_list_and_params(cfg)
    results = context.rpc.call_all_instances_info(
        [n.name for n in nodes], hypervisor_list=hvs, all_hvparams=hvparams)
    for node in nodes:
        res = results.get(node.name)
        if res is None or res.failed or not isinstance(res.payload, dict):
            failed.add(node.uuid)
        else:
            live[node.uuid] = res.payload
    return live, failed


def collect_instances(context: MasterContext, qfilter: Any,
                      needs: set[str]) -> tuple[list[Any], Any]:
    """Items and context of the ``instance`` resource (see module docstring)."""
    cfg = context.committed_cfg()
    items = select_named(cfg.get_all_instances_info().values(),
                         query.requested_names(qfilter, "name"), "Instance(s)",
                         verdict="not known")
    live, failed = (_collect_live(context, cfg) if "live" in needs else (None, set()))
    ctx = InstanceQueryContext(cfg, live, failed, context.runtime_jobs)
    if "console" in needs:
        _collect_consoles(context, cfg, items, ctx)
    return items, ctx


def _plain(value: Any) -> Any:
    return None if isinstance(value, query.fields.Sentinel) else value


def _disk_data(lu: LogicalUnit[Any], ctx: InstanceQueryContext, inst: Instance, disk: Disk,
               idx: int, static: bool) -> dict[str, Any]:
    """One disk of the OP_INSTANCE_QUERY_DATA result (a DRBD secret is never shown)."""
    data: dict[str, Any] = {
        "iv_name": disk.iv_name or f"disk/{idx}", "size": disk.size, "mode": disk.mode,
        "name": disk.name, "uuid": disk.uuid, "dev_type": disk.dev_type,
        "logical_id": drbd.public_logical_id(disk),
        "nodes": [ctx.node_name(n) for n in disk.nodes], "spindles": disk.spindles,
        "pstatus": None, "sstatus": None,
        "children": [_disk_data(lu, ctx, inst, c, i, True) for i, c in enumerate(disk.children)],
        "drbd_info": None}
    if not drbd.is_drbd(disk) or len(disk.logical_id) < 5:
        return data
    node_a, node_b, port, minor_a, minor_b = disk.logical_id[:5]
    if inst.primary_node == node_b:
        node_a, node_b, minor_a, minor_b = node_b, node_a, minor_b, minor_a
    data["drbd_info"] = {"primary_node": ctx.node_name(node_a), "primary_minor": minor_a,
                         "secondary_node": ctx.node_name(node_b), "secondary_minor": minor_b,
                         "port": port}
    if not static and lu.rpc is not None:
        data["pstatus"] = _blockdev_status(lu, ctx, disk, node_a)
        data["sstatus"] = _blockdev_status(lu, ctx, disk, node_b)
    return data


def _blockdev_status(lu: LogicalUnit[Any], ctx: InstanceQueryContext, disk: Disk,
                     node_uuid: str) -> dict[str, Any] | None:
    """``blockdev_find`` of ``disk`` on a node (None: offline, failed or missing)."""
    node = ctx.nodes.get(node_uuid)
    if node is None or node.offline or lu.rpc is None:
        return None
    res = lu.rpc.call_blockdev_find([node.name], disk=drbd.rpc_disk(disk, ctx.cfg)).get(
        node.name)
    if res is None or res.failed or not isinstance(res.payload, dict):
        return None
    return res.payload


def instance_query_data(lu: LogicalUnit[Any], names: list[str], static: bool) -> dict[str, Any]:
    """The OP_INSTANCE_QUERY_DATA result: ``{name: details}``, from the committed config."""
    cfg = lu.cfg.committed()
    cluster = cfg.get_cluster_info()
    if names:
        insts = []
        for name in names:
            inst = cfg.get_instance_info_by_name(name)
            if inst is None:
                raise errors.OpPrereqError(f"Instance '{name}' not known", errors.ECODE_NOENT)
            insts.append(inst)
    else:
        insts = list(cfg.get_all_instances_info().values())
    live, failed = (None, set()) if static else _collect_live(lu.context, cfg)
    ctx = InstanceQueryContext(cfg, live, failed, lu.context.runtime_jobs)
    result = {}
    for inst in insts:
        pnode = ctx.nodes.get(inst.primary_node)
        entry = None if static else ctx.live_entry(inst)
        if static or isinstance(entry, query.fields.Sentinel):
            run_state = None   # Ganeti's: no actual state without the nodes' data
        else:
            run_state = "up" if entry is not None and entry.get("state") == 0 else "down"
        disks = []
        for idx, disk in enumerate(ctx.inst_disks(inst)):
            # Ganeti 3.0's disk keys (doc/compat.md, "Results"); the block-device
            # status (pstatus/sstatus) is asked of the nodes for mirrored disks only
            disks.append(_disk_data(lu, ctx, inst, disk, idx, static))
        # Ganeti 3.0's NIC rows: [name, uuid, ip, mac, mode, link, vlan, network, netinfo]
        nics = []
        for nic in inst.nics:
            p = _nicp(ctx, nic)
            nics.append([nic.name, nic.uuid, nic.ip, nic.mac, p.get("mode"), p.get("link"),
                         p.get("vlan"), nic.network, None])
        snodes = _snodes(ctx, inst)
        sgroups = [_node_group(cfg, name) for name in snodes]
        pgroup = _node_group(cfg, pnode.name if pnode else None)
        result[inst.name] = {
            "pnode_group_name": pgroup[0], "pnode_group_uuid": pgroup[1],
            "snodes_group_names": [g[0] for g in sgroups],
            "snodes_group_uuids": [g[1] for g in sgroups],
            "name": inst.name, "uuid": inst.uuid, "config_state": inst.admin_state,
            "admin_state_source": inst.admin_state_source, "run_state": run_state,
            "status": _plain(_status(ctx, inst)) if not static else None,
            "pnode": pnode.name if pnode else inst.primary_node, "snodes": snodes,
            "os": inst.os, "hypervisor": inst.hypervisor, "disk_template": inst.disk_template,
            "network_port": inst.network_port,
            "hv_instance": dict(inst.hvparams), "hv_actual": ctx.hv(inst),
            "be_instance": dict(inst.beparams), "be_actual": ctx.be(inst),
            "os_instance": dict(inst.osparams),
            "os_actual": parameters.fill_osparams(cluster, inst.os, inst.osparams),
            "oper_ram": entry.get("memory") if isinstance(entry, dict) else None,
            "oper_vcpus": entry.get("vcpus") if isinstance(entry, dict) else None,
            "jobs": [] if static else _plain(runtime_jobs(ctx, inst)),
            "disks": disks, "nics": nics, "disks_active": inst.disks_active,
            "tags": sorted(inst.tags), "ctime": inst.ctime, "mtime": inst.mtime,
            "serial_no": inst.serial_no,
        }
    return result


class LUInstanceQueryData(NoHooksLU[OpInstanceQueryData]):
    """Detailed information on instances (``gnt-instance info``)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        full = []
        for name in self.op.instances:
            inst = find_instance(self.cfg, name)
            if inst is None:
                raise errors.OpPrereqError(f"Instance '{name}' not known", errors.ECODE_NOENT)
            full.append(inst.name)
        self.op.instances = full
        self.needed_locks = {}
        if self.op.use_locking:
            self.needed_locks[locking.LEVEL_INSTANCE] = list(self.op.instances) or \
                locking.ALL_SET
            self.share_locks = {locking.LEVEL_INSTANCE: 1}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        return instance_query_data(self, list(self.op.instances), self.op.static)

