"""Consistency checks of a whole configuration (``ConfigWriter.verify_config``).

Pure: takes a :class:`ganeti.objects.ConfigData`, returns readable
problems (UUID keys, the master node, node groups, instance nodes, disks
and networks, duplicate names, MAC and IP addresses, the candidate pool).
"""

from __future__ import annotations

from ganeti.objects import ConfigData

__all__ = ["check_config"]


def check_config(d: ConfigData) -> list[str]:
    """Readable problems of ``d`` (empty when consistent)."""
    problems: list[str] = []

    def dup(kind: str, values: list[tuple[str, str]]) -> None:
        seen: dict[str, str] = {}
        for owner, value in values:
            if value in seen:
                problems.append(f"Duplicate {kind} '{value}' used by {seen[value]} and {owner}")
            else:
                seen[value] = owner

    for key, store in (("node", d.nodes), ("node group", d.nodegroups),
                       ("instance", d.instances), ("disk", d.disks), ("network", d.networks)):
        for uuid, obj in store.items():
            if obj.uuid != uuid:
                problems.append(f"The {key} stored under {uuid} has UUID {obj.uuid!r}")
    cluster = d.cluster
    master = d.nodes.get(cluster.master_node)
    if master is None:
        problems.append(f"The master node {cluster.master_node!r} is not in the configuration")
    elif not master.master_candidate:
        problems.append(f"The master node {master.name} is not a master candidate")
    for node in d.nodes.values():
        if node.group not in d.nodegroups:
            problems.append(f"Node {node.name} is in an unknown node group {node.group!r}")
    disk_owner: dict[str, str] = {}
    for inst in d.instances.values():
        if inst.primary_node not in d.nodes:
            problems.append(f"Instance {inst.name} has an unknown primary node {inst.primary_node!r}")
        if inst.hypervisor not in cluster.enabled_hypervisors:
            problems.append(f"Instance {inst.name} uses hypervisor {inst.hypervisor},"
                            " which is not enabled")
        for disk_uuid in inst.disks:
            if disk_uuid not in d.disks:
                problems.append(f"Instance {inst.name} refers to an unknown disk {disk_uuid!r}")
            elif disk_uuid in disk_owner:
                problems.append(f"Disk {disk_uuid} is used by both instance"
                                f" {disk_owner[disk_uuid]} and instance {inst.name}")
            else:
                disk_owner[disk_uuid] = inst.name
        for nic in inst.nics:
            if nic.network and nic.network not in d.networks:
                problems.append(f"Instance {inst.name} has a NIC on an unknown network {nic.network!r}")
    for uuid, disk in d.disks.items():
        if uuid not in disk_owner:
            problems.append(f"Disk {uuid} does not belong to any instance")
        for node_uuid in disk.nodes:
            if node_uuid not in d.nodes:
                problems.append(f"Disk {uuid} refers to an unknown node {node_uuid!r}")
    names = ([(f"node {u}", n.name) for u, n in d.nodes.items()]
             + [(f"instance {u}", i.name) for u, i in d.instances.items()]
             + [(f"node group {u}", g.name) for u, g in d.nodegroups.items()])
    dup("name", names)
    dup("MAC address", [(f"instance {i.name}", nic.mac.lower())
                        for i in d.instances.values() for nic in i.nics if nic.mac])
    ips: list[tuple[str, str]] = []
    for node in d.nodes.values():
        ips.append((f"node {node.name}", node.primary_ip))
        if node.secondary_ip and node.secondary_ip != node.primary_ip:
            ips.append((f"node {node.name}", node.secondary_ip))
    for inst in d.instances.values():
        ips.extend((f"instance {inst.name}", f"{nic.network or ''}/{nic.ip}" if nic.network else nic.ip)
                   for nic in inst.nics if nic.ip)
    dup("IP address", [(o, ip) for o, ip in ips if ip])
    candidates = sum(1 for n in d.nodes.values() if n.master_candidate)
    if d.nodes and candidates == 0:
        problems.append("There are no master candidates")
    return problems
