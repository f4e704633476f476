"""The ``gnt-instance info`` page: one instance's query data as :mod:`ganeti.cli.info` data.

Ganeti's keys and nesting (doc/commands.md, "Common behaviour"): ``Instance
name``, ``State``, ``Nodes`` (``primary``/``group``, ``secondaries``),
``Hypervisor parameters`` (own values, or ``default (VALUE)``), ``NICs``
(``nic/N`` with MAC, IP, mode, link...), ``Disks`` (``disk/N: TYPE, size
SIZE`` with ``access mode``, ``logical_id``...).  Pure: takes the dict of
``OP_INSTANCE_QUERY_DATA``, returns ``(key, value)`` pairs.
"""

from __future__ import annotations

from ganeti.cli import info
from ganeti.cli.output import format_timestamp

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["format_instance_info"]

Pairs = list  # (key, value) pairs: an ordered mapping for format_info


def _size_text(size: Any) -> str:
    if isinstance(size, int) and not isinstance(size, bool):
        from ganeti.utils import units
        return units.format_unit(size, "h")
    return str(size)


def _nodes(d: dict[str, Any]) -> list[Pairs]:
    secondaries = ", ".join(
        f"{name} (group {gname}, group UUID {guuid})"
        for name, gname, guuid in zip(d.get("snodes") or [], d.get("snodes_group_names") or [],
                                      d.get("snodes_group_uuids") or []))
    return [[("primary", d["pnode"]),
             ("group", f"{d.get('pnode_group_name')} (UUID {d.get('pnode_group_uuid')})")],
            [("secondaries", secondaries)]]


def _nic(idx: int, nic: list[Any]) -> Pairs:
    # rows as Ganeti 3.0: [name, uuid, ip, mac, mode, link, vlan, network, netinfo]
    name, uuid, ip, mac, mode, link, vlan, network, netinfo = (list(nic) + [None] * 9)[:9]
    network_name = netinfo.get("name") if isinstance(netinfo, dict) else network
    return [(f"nic/{idx}", ""), ("MAC", str(mac)), ("IP", str(ip)), ("mode", str(mode)),
            ("link", str(link)), ("vlan", str(vlan if vlan is not None else "")),
            ("network", str(network_name)), ("UUID", str(uuid)), ("name", str(name))]


def _logical_id(disk: dict[str, Any]) -> Pairs:
    """``logical_id`` (or DRBD's ``nodeA``/``nodeB``/``port``) entries of a disk."""
    lid = disk.get("logical_id")
    drbd = disk.get("drbd_info")
    if isinstance(drbd, dict):
        return [("nodeA", f"{drbd.get('primary_node')}, minor={drbd.get('primary_minor')}"),
                ("nodeB", f"{drbd.get('secondary_node')}, minor={drbd.get('secondary_minor')}"),
                ("port", drbd.get("port"))]
    if lid is None:
        return []
    if disk.get("dev_type") == "plain" and isinstance(lid, (list, tuple)) and len(lid) == 2:
        return [("logical_id", f"{lid[0]}/{lid[1]}")]
    if isinstance(lid, (list, tuple)):
        return [("logical_id", tuple(str(x) for x in lid))]
    return [("logical_id", str(lid))]


def device_status_text(status: Any) -> str:
    """One side's block device status as Ganeti prints it ("/dev/drbd0 (147:0) in
    sync, status ok"), with the DRBD state after it. Pure."""
    if not isinstance(status, dict):
        return str(status)
    pct, eta = status.get("sync_percent"), status.get("estimated_time")
    major = "N/A" if status.get("major") is None else status.get("major")
    minor = "N/A" if status.get("minor") is None else status.get("minor")
    state = status.get("drbd")
    if isinstance(state, dict) and state.get("cstate") == "Unconfigured":
        return f"{status.get('dev_path')} ({major}:{minor}) not active"
    if isinstance(pct, (int, float)):
        sync = f"*RECOVERING* {pct:5.2f}%, ETA {f'{eta}s' if eta is not None else 'unknown'}"
    elif status.get("is_degraded"):
        sync = "*DEGRADED*"
    else:
        sync = "in sync"
    ldisk = status.get("ldisk_status")
    extra = {"faulty": " *MISSING DISK*", "unknown": " *UNCERTAIN STATE*"}.get(str(ldisk), "")
    text = (f"{status.get('dev_path')} ({major}:{minor}) {sync}, status"
            f" {'*DEGRADED*' if status.get('is_degraded') else 'ok'}{extra}")
    if isinstance(state, dict):
        parts = [str(state.get("cstate"))]
        if state.get("role"):
            parts.append(f"{state.get('role')}/{state.get('peer_role')}")
        if state.get("disk"):
            parts.append(f"{state.get('disk')}/{state.get('peer_disk')}")
        text += f" ({', '.join(parts)})"
    return text


def _disk(idx: int, disk: dict[str, Any], top_level: bool) -> Pairs:
    if top_level:
        title = disk.get("iv_name") or f"disk/{idx}"
    else:
        title = f"child {idx}"
    data: Pairs = [(title, f"{disk.get('dev_type')}, size {_size_text(disk.get('size'))}")]
    if top_level:
        if disk.get("spindles") is not None:
            data.append(("spindles", disk["spindles"]))
        data.append(("access mode", disk.get("mode")))
    data += _logical_id(disk)
    for key, label in (("pstatus", "on primary"), ("sstatus", "on secondary")):
        if disk.get(key):
            data.append((label, device_status_text(disk[key])))
    data.append(("name", str(disk.get("name"))))
    data.append(("UUID", str(disk.get("uuid"))))
    if disk.get("children"):
        data.append(("child devices", [_disk(i, c, False)
                                       for i, c in enumerate(disk["children"])]))
    return data


def format_instance_info(d: dict[str, Any], *, static: bool = False) -> Pairs:
    """One instance's ``gnt-instance info`` entry (``static``: no runtime data)."""
    state = f"configured to be {d['config_state']}"
    if d.get("run_state"):
        state += f", actual state is {d['run_state']}"
    data: Pairs = [
        ("Instance name", d["name"]),
        ("UUID", d["uuid"]),
        ("Serial number", d.get("serial_no")),
        ("Creation time", format_timestamp(d.get("ctime"))),
        ("Modification time", format_timestamp(d.get("mtime"))),
        ("State", state),
    ]
    if not static and d.get("status"):
        data.append(("Status", d["status"]))
    data += [
        ("Nodes", _nodes(d)),
        ("Operating system", d.get("os")),
        ("Operating system parameters", info.params_info(d.get("os_instance"),
                                                         d.get("os_actual"))),
    ]
    if "network_port" in d:
        data.append(("Allocated network port", d.get("network_port")))
    data.append(("Hypervisor", d.get("hypervisor")))
    be_actual = dict(d.get("be_actual") or {})
    if "maxmem" in be_actual:   # Ganeti's deprecated alias, still shown
        be_actual.setdefault("memory", be_actual["maxmem"])
    data += [
        ("Hypervisor parameters", info.params_info(d.get("hv_instance"), d.get("hv_actual"))),
        ("Back-end parameters", info.params_info(d.get("be_instance"), be_actual)),
        ("NICs", [_nic(i, nic) for i, nic in enumerate(d.get("nics") or [])]),
        ("Disk template", d.get("disk_template")),
        ("Disks", [_disk(i, disk, True) for i, disk in enumerate(d.get("disks") or [])]),
    ]
    if not static and d.get("oper_ram") is not None:
        data += [("Runtime memory", f"{d['oper_ram']} MiB"), ("Runtime vcpus", d.get("oper_vcpus"))]
    if not static and d.get("jobs"):
        from ganeti import progress   # lazy: most instances run no job
        data.append(("Running jobs", [progress.render_runtime_job(j) for j in d["jobs"]]))
    data.append(("Tags", ", ".join(d.get("tags") or [])))
    return data
