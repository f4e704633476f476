"""Asking the iallocator from an LU (doc/protocols/iallocator.md), and OP_TEST_ALLOCATOR.

:func:`ask` builds the input document from the configuration and the
nodes' live figures (``node_info``, through the node-info cache), runs the
allocator (:func:`ganeti.iallocator.runner.run_allocator`) and returns the
checked answer.  The allocator's name is the one given, else the
cluster's ``default_iallocator``, else the built-in one; the cluster's
``default_iallocator_params`` are passed along.  Nothing is changed here:
a failing or malformed allocator raises :class:`errors.OpPrereqError`.
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, parameters, serializer
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit, NoHooksLU
from ganeti.cmdlib.node import collect_live
from ganeti.iallocator import answer as answer_mod
from ganeti.iallocator import document, runner
from ganeti.objects import Cluster, NodeGroup
from ganeti.opcodes.test import OpTestAllocator

__all__ = ["ask", "allocator_name", "build_document", "LUTestAllocator", "ipolicy_of",
           "allocate_request_for", "group_uuids"]


def ipolicy_of(cluster: Cluster, group: NodeGroup | None) -> dict[str, Any]:
    """A group's effective ipolicy (the cluster's when ``group`` is None)."""
    return document.group_ipolicy(cluster, group)


def allocator_name(lu: LogicalUnit[Any], given: str | None) -> str | None:
    """``given``, else (also for Ganeti's shortcut ``.``) the cluster's default; None
    means the built-in allocator."""
    return (given if given != "." else None) \
        or lu.cfg.get_cluster_info().default_iallocator or None


def build_document(lu: LogicalUnit[Any], request: dict[str, Any]) -> dict[str, Any]:
    """The input document for ``request`` from the current config and live node data."""
    data = lu.cfg.get_config_data()
    nodes = [n for n in data.nodes.values() if n.vm_capable and not n.offline]
    live = collect_live(lu.context, nodes) if lu.rpc is not None else {}
    return document.build_input(data, live, request, ipolicy_fn=ipolicy_of)


def ask(lu: LogicalUnit[Any], name: str | None, request: dict[str, Any],
        doc: dict[str, Any] | None = None) -> tuple[answer_mod.Answer, dict[str, Any]]:
    """Run the allocator on ``request``; returns ``(answer, input document)``.

    Raises OpPrereqError when the allocator cannot be found or run, or
    answers something malformed.  ``answer.success`` may be false.
    """
    if doc is None:
        doc = build_document(lu, request)
    cluster = lu.cfg.get_cluster_info()
    alloc = allocator_name(lu, name)
    paths = lu.context.paths
    answer = runner.run_allocator(alloc, doc, search_path=paths.iallocator_search_path,
                                  params=cluster.default_iallocator_params)
    return answer, doc


def allocate_request_for(cluster: Cluster, *, name: str, disk_template: str,
                         disks: list[dict[str, Any]], nics: list[dict[str, Any]],
                         beparams: dict[str, Any], os_name: str, tags: list[str],
                         hypervisor: str, group_name: str | None = None) -> dict[str, Any]:
    """The ``allocate`` request of an instance to create (beparams filled from the cluster)."""
    be = parameters.fill_beparams(cluster, parameters.check_params("be", beparams))
    return document.allocate_request(
        name=name, disk_template=disk_template, memory=int(be.get("maxmem", 128)),
        vcpus=int(be.get("vcpus", 1)), spindle_use=int(be.get("spindle_use", 1)),
        disks=disks, nics=nics, os=os_name, tags=tags, hypervisor=hypervisor,
        group_name=group_name)


class LUTestAllocator(NoHooksLU[OpTestAllocator]):
    """Show an iallocator input document (``in``) or the allocator's answer (``out``).

    Result: the document or the answer as JSON text.  No locks; changes nothing.
    """

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def _request(self) -> dict[str, Any]:
        op, cfg = self.op, self.cfg
        cluster = cfg.get_cluster_info()
        if op.mode == document.REQ_ALLOCATE:
            if not op.name:
                raise errors.OpPrereqError("An allocate request needs the instance name",
                                           errors.ECODE_INVAL)
            return allocate_request_for(
                cluster, name=op.name, disk_template=op.disk_template, disks=op.disks,
                nics=op.nics, beparams={"maxmem": op.memory, "minmem": op.memory,
                                        "vcpus": op.vcpus, "spindle_use": op.spindle_use},
                os_name=op.os, tags=op.tags,
                hypervisor=op.hypervisor or cluster.primary_hypervisor,
                group_name=op.group_name)
        if op.mode == document.REQ_MULTI_ALLOCATE:
            return document.multi_allocate_request([dict(i) for i in op.instances
                                                    if isinstance(i, dict)])
        if op.mode in (document.REQ_RELOCATE, document.REQ_ALLOCATE_SECONDARY):
            inst = cfg.get_instance_info_by_name(op.name)
            if inst is None:
                raise errors.OpPrereqError(f"Instance '{op.name}' not known", errors.ECODE_NOENT)
            if op.mode == document.REQ_ALLOCATE_SECONDARY:
                if inst.disk_template != constants.DT_PLAIN:
                    raise errors.OpPrereqError(
                        f"Instance '{inst.name}' has disk template {inst.disk_template}; an"
                        " allocate-secondary request is for a plain instance (to convert to"
                        " drbd)", errors.ECODE_INVAL)
                return document.allocate_secondary_request(inst.name)
            disks = [{"size": d.size} for d in cfg.get_instance_disks(inst.uuid)]
            return document.relocate_request(inst.name, inst.disk_template, disks,
                                             op.relocate_from)
        names = [str(i) for i in op.instances]
        for name in names:
            if cfg.get_instance_info_by_name(name) is None:
                raise errors.OpPrereqError(f"Instance '{name}' not known", errors.ECODE_NOENT)
        if op.mode == document.REQ_NODE_EVACUATE:
            return document.node_evacuate_request(names, op.evac_mode)
        return document.change_group_request(names, group_uuids(self, op.target_groups))

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        request = self._request()
        doc = build_document(self, request)
        if self.op.direction == constants.IALLOCATOR_DIR_IN:
            return serializer.dumps(doc, pretty=True)
        answer, _ = ask(self, self.op.iallocator, request, doc)
        return serializer.dumps({"success": answer.success, "info": answer.info,
                                 "result": answer.result}, pretty=True)


def group_uuids(lu: LogicalUnit[Any], names: list[str]) -> list[str]:
    """The UUIDs of the node groups ``names`` (names or UUIDs); ECODE_NOENT if unknown."""
    result = []
    for name in names:
        group = lu.cfg.get_nodegroup_by_name(name) or lu.cfg.get_nodegroup(name)
        if group is None:
            raise errors.OpPrereqError(f"Node group '{name}' not known", errors.ECODE_NOENT)
        result.append(group.uuid)
    return result
