"""Instance policy checks for the logical units (doc/ipolicy.md, "Enforcement").

The pure rules live in :mod:`ganeti.ipolicy`; this module ties them to
the configuration: the effective policy of a node group, an instance's
spec, and the checks the LUs make (create, modify, moves to another
group, policy changes, verify).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ganeti import errors, ipolicy, parameters
from ganeti.config import ConfigWriter
from ganeti.objects import Instance, Node, NodeGroup

__all__ = ["group_policy", "spec_from_values", "instance_spec", "instance_violations",
           "check_allocation", "check_target_node", "new_violations", "cluster_policy_change",
           "group_policy_change"]


def group_policy(cfg: ConfigWriter, group: NodeGroup | str | None) -> dict[str, Any]:
    """The effective policy of a node group (object or UUID): its keys over the cluster's."""
    if isinstance(group, str):
        group = cfg.get_nodegroup(group)
    cluster_policy = cfg.get_cluster_info().ipolicy
    return ipolicy.fill_ipolicy(cluster_policy, group.ipolicy if group is not None else None)


def spec_from_values(beparams: Mapping[str, Any], disk_sizes: Sequence[int],
                     nic_count: int, *, memory: str = "maxmem") -> dict[str, Any]:
    """An instance spec from filled backend parameters, disk sizes and a NIC count.

    ``memory`` picks the backend parameter checked as ``memory-size``
    (``maxmem``; modify checks ``minmem`` too, as Ganeti does).
    """
    return ipolicy.make_spec(memory_size=beparams.get(memory), cpu_count=beparams.get("vcpus"),
                             disk_sizes=list(disk_sizes), nic_count=nic_count,
                             spindle_use=beparams.get("spindle_use"))


def instance_spec(cfg: ConfigWriter, inst: Instance) -> dict[str, Any]:
    """The spec of a configured instance (its filled backend parameters)."""
    be = parameters.fill_instance_beparams(cfg.get_cluster_info(), inst)
    sizes = [d.size for d in cfg.get_instance_disks(inst.uuid)]
    return spec_from_values(be, sizes, len(inst.nics))


def instance_violations(cfg: ConfigWriter, inst: Instance,
                        policy: Mapping[str, Any] | None = None) -> list[str]:
    """How ``inst`` breaks ``policy`` (default: its primary node's group policy)."""
    if policy is None:
        node = cfg.get_node_info(inst.primary_node)
        policy = group_policy(cfg, node.group if node is not None else None)
    return ipolicy.compute_violations(policy, instance_spec(cfg, inst), inst.disk_template)


def check_allocation(cfg: ConfigWriter, group_uuid: str, specs: Iterable[Mapping[str, Any]],
                     disk_template: str, *, ignore: bool = False) -> list[str]:
    """Refuse specs that break the policy of the group ``group_uuid``.

    Raises :class:`errors.OpPrereqError` (``ECODE_INVAL``) with Ganeti's
    message ``Instance allocation to group G (NAME) violates policy: ...``
    naming each spec and value; with ``ignore`` (``--ignore-ipolicy``)
    returns the violations instead, for a warning.
    """
    policy = group_policy(cfg, group_uuid)
    found: list[str] = []
    for spec in specs:
        for msg in ipolicy.compute_violations(policy, spec, disk_template):
            if msg not in found:
                found.append(msg)
    if found and not ignore:
        group = cfg.get_nodegroup(group_uuid)
        name = group.name if group is not None else group_uuid
        raise errors.OpPrereqError(f"Instance allocation to group {group_uuid} ({name})"
                                   f" violates policy: {ipolicy.format_violations(found)}",
                                   errors.ECODE_INVAL)
    return found


def check_target_node(cfg: ConfigWriter, inst: Instance, target: Node, *,
                      ignore: bool = False) -> str | None:
    """Check ``inst`` against the policy of ``target``'s group before a move there.

    Nothing is checked when the target is in the instance's own group.
    Raises :class:`errors.OpPrereqError` naming the violations; with
    ``ignore`` returns the message instead (for a warning).
    """
    source = cfg.get_node_info(inst.primary_node)
    if source is not None and source.group == target.group:
        return None
    group = cfg.get_nodegroup(target.group)
    found = instance_violations(cfg, inst, group_policy(cfg, group))
    if not found:
        return None
    name = group.name if group is not None else target.group
    msg = (f"Instance {inst.name} does not meet target node group's ({name}) instance"
           f" policy: {ipolicy.format_violations(found)}")
    if not ignore:
        raise errors.OpPrereqError(msg, errors.ECODE_INVAL)
    return msg


def new_violations(cfg: ConfigWriter, instances: Iterable[Instance],
                   old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Names of the instances that conform to ``old`` but not to ``new`` (sorted)."""
    names = []
    for inst in instances:
        if (not instance_violations(cfg, inst, old)
                and instance_violations(cfg, inst, new)):
            names.append(inst.name)
    return sorted(names)


def _check_dts_enabled(policy: Mapping[str, Any], changes: Mapping[str, Any],
                       enabled: Iterable[str]) -> None:
    if ipolicy.IPOLICY_DTS not in changes:
        return
    extra = sorted(set(policy[ipolicy.IPOLICY_DTS]) - set(enabled))
    if extra:
        raise errors.OpPrereqError("The following disk templates are allowed by the ipolicy,"
                                   f" but not enabled on the cluster: {', '.join(extra)}",
                                   errors.ECODE_INVAL)


def _group_instances(cfg: ConfigWriter) -> dict[str, list[Instance]]:
    node_group = {n.uuid: n.group for n in cfg.get_all_nodes_info().values()}
    found: dict[str, list[Instance]] = {}
    for inst in cfg.get_all_instances_info().values():
        found.setdefault(node_group.get(inst.primary_node, ""), []).append(inst)
    return found


def cluster_policy_change(cfg: ConfigWriter, changes: Mapping[str, Any],
                          enabled_disk_templates: Iterable[str]) -> tuple[dict[str, Any],
                                                                          list[str]]:
    """The cluster's new policy after ``changes``, and the instances it newly breaks.

    Validates the complete result; disk templates named in the change must
    be enabled.  Raises :class:`errors.OpPrereqError`.  The instance names
    are for a warning (Ganeti changes the policy anyway).
    """
    old = cfg.get_cluster_info().ipolicy
    new = ipolicy.check_ipolicy(ipolicy.update_ipolicy(old, changes))
    _check_dts_enabled(new, changes, enabled_disk_templates)
    by_group = _group_instances(cfg)
    names: list[str] = []
    for uuid, group in cfg.get_all_nodegroups_info().items():
        names += new_violations(cfg, by_group.get(uuid, []),
                                ipolicy.fill_ipolicy(old, group.ipolicy),
                                ipolicy.fill_ipolicy(new, group.ipolicy))
    return new, sorted(names)


def group_policy_change(cfg: ConfigWriter, group: NodeGroup,
                        changes: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A group's new stored policy after ``changes``, and the instances it newly breaks.

    ``"default"`` resets a key to the cluster's value; ``std`` is refused.
    The filled result is validated.  Raises :class:`errors.OpPrereqError`.
    """
    cluster = cfg.get_cluster_info()
    custom = ipolicy.update_ipolicy(group.ipolicy, changes, group=True)
    filled = ipolicy.fill_ipolicy(cluster.ipolicy, custom)
    ipolicy.check_ipolicy(filled, check_std=False)
    _check_dts_enabled(filled, changes, cluster.enabled_disk_templates)
    names = new_violations(cfg, _group_instances(cfg).get(group.uuid, []),
                           group_policy(cfg, group), filled)
    return custom, names
