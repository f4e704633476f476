"""Changing instances: parameters/NICs/disks, grow-disk, activate/deactivate disks.

``OP_INSTANCE_SET_PARAMS`` takes NIC/disk changes in the forms of
:mod:`ganeti.cmdlib.instance_mods` (an item named by index, name or UUID).
Every change is checked in CheckPrereq before any is applied.  ``pnode``
(``--new-primary``) only records another primary node, the disks having
been moved there by hand, as Ganeti's.
"""

from __future__ import annotations

import copy
import uuid as uuidlib
from typing import Any

from ganeti import constants, errors, ipolicy, parameters
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import disk_wipe, drbd, instance_convert, lvm, os_image, policy
from ganeti.cmdlib import instance_communication as communication
from ganeti.cmdlib.common import expand_node
from ganeti.cmdlib.instance import (InstanceLU, check_device_names, check_node_online,
                                    disk_rpc_dicts, file_logical_id, storage_dir_for)
from ganeti.cmdlib.instance_create import build_nics, check_disk_specs, check_spindles
from ganeti.cmdlib.instance_networks import attach_networks, check_routed, find_network
from ganeti.config.netusers import Holding
from ganeti.cmdlib.instance_mods import normalise_mods, resolve_index
from ganeti.cmdlib.instance_operation import check_os, check_stopped
from ganeti.objects import NIC, Disk, Node, NodeGroup
from ganeti.private import reveal
from ganeti.opcodes.instance import (DDM_ADD, DDM_REMOVE,
                                     OpInstanceActivateDisks, OpInstanceDeactivateDisks,
                                     OpInstanceGrowDisk, OpInstanceSetParams)

__all__ = ["LUInstanceSetParams", "LUInstanceGrowDisk", "LUInstanceActivateDisks",
           "LUInstanceDeactivateDisks"]


class LUInstanceSetParams(InstanceLU[OpInstanceSetParams]):
    """Modify an instance; returns ``[[param, new value], ...]``."""

    HPATH = "instance-modify"

    def CheckArguments(self) -> None:
        op = self.op
        #: MACs generated for added or changed NICs, released when the LU ends
        self.generated_macs: list[str] = []
        #: network addresses handed out for the NICs, released when the LU ends
        self.held_ips: list[Holding] = []
        self.nic_mods = normalise_mods(op.nics, "NIC")
        self.disk_mods = normalise_mods(op.disks, "disk")
        comm = op.instance_communication is not None
        if not (self.nic_mods or self.disk_mods or op.beparams or op.hvparams
                or op.osparams is not None or op.os_name or op.offline is not None
                or op.osparams_private is not None or op.runtime_mem is not None
                or op.disk_template or op.pnode or comm):
            raise errors.OpPrereqError("No changes submitted", errors.ECODE_INVAL)
        instance_convert.check_arguments(op, bool(self.nic_mods or self.disk_mods or comm))
        if op.pnode and (self.nic_mods or self.disk_mods or op.disk_template or comm):
            raise errors.OpPrereqError("A new primary node cannot be combined with disk or"
                                       " NIC changes; run them one after the other",
                                       errors.ECODE_INVAL)

    def ExpandExtra(self) -> None:
        instance_convert.expand_extra(self)
        if self.op.pnode:
            node = expand_node(self.cfg, self.op.pnode)
            self.op.pnode = node.name
            self.extra_node_uuids = [*self.extra_node_uuids, node.uuid]

    def DeclareLocks(self, level: int) -> None:
        super().DeclareLocks(level)
        instance_convert.declare_locks(self, level)

    def CheckInstance(self) -> None:
        op, inst, cfg = self.op, self.instance, self.cfg
        try:
            self.be_new = parameters.update_params(
                inst.beparams, parameters.check_params("be", op.beparams, allow_default=True))
            self.hv_new = parameters.update_params(
                inst.hvparams, parameters.check_params("hv", op.hvparams, inst.hypervisor,
                                                       allow_default=True))
            self.os_new = parameters.update_params(
                inst.osparams, parameters.check_params("os", op.osparams, allow_default=True)) \
                if op.osparams is not None else None
            self.os_private_new = parameters.update_params(
                inst.osparams_private, reveal(op.osparams_private)) \
                if op.osparams_private is not None else None
        except errors.ParameterError as exc:
            raise errors.OpPrereqError(str(exc), errors.ECODE_INVAL) from None
        if self.os_new is not None:
            os_image.check_seed_params(self.os_new)
        be = parameters.fill_beparams(cfg.get_cluster_info(), self.be_new)
        if be["minmem"] > be["maxmem"]:
            raise errors.OpPrereqError(f"minmem ({be['minmem']}) is larger than maxmem"
                                       f" ({be['maxmem']})", errors.ECODE_INVAL)
        if op.os_name:
            check_node_online(self.pnode, " as primary node")
            check_os(self, self.pnode.name, op.os_name,
                     parameters.fill_osparams(cfg.get_cluster_info(), op.os_name,
                                              self.os_new if self.os_new is not None
                                              else inst.osparams),
                     self.os_private_new if self.os_private_new is not None
                     else inst.osparams_private)
        elif (self.os_new is not None or self.os_private_new is not None) \
                and not self.pnode.offline and inst.os:
            # new OS parameters must be accepted by the instance's OS
            check_os(self, self.pnode.name, inst.os,
                     parameters.fill_osparams(cfg.get_cluster_info(), inst.os,
                                              self.os_new if self.os_new is not None
                                              else inst.osparams),
                     self.os_private_new if self.os_private_new is not None
                     else inst.osparams_private)
        if op.runtime_mem is not None:
            self._check_runtime_mem(be)
        #: the new primary node (--new-primary), or None
        self.new_pnode = self._check_new_primary() if op.pnode else None
        if op.offline is not None:
            # as Ganeti: either way only for a stopped instance (online means down)
            check_stopped(self, "marking it offline" if op.offline else
                          "marking it online (it must be offline first)")
        if op.instance_communication is not None:
            # as Ganeti: one more NIC change, adding or removing the NIC
            change = communication.nic_change(
                inst, op.instance_communication,
                cfg.get_cluster_info().instance_communication_network)
            if change is not None:
                self.nic_mods = [*self.nic_mods, change]
        self._plan_nics()
        if op.hvparams or self.nic_mods or op.osparams is not None:
            # as at add: metad needs a NIC address to know the guest by
            os_image.check_cloud_init_source(
                parameters.fill_hvparams(cfg.get_cluster_info(), inst.hypervisor, self.hv_new,
                                         os_name=inst.os or None),
                self.os_new if self.os_new is not None else inst.osparams,
                [nic.ip for nic in self.nic_sim])
        #: whether NIC/disk changes are plugged into the running instance
        self.hotplug = False
        if (op.hotplug or op.hotplug_if_possible) and (self.nic_mods or self.disk_mods):
            self.hotplug = self._check_hotplug()
        # (uuid, name) of each disk as the changes so far leave them
        sim: list[tuple[str | None, str | None]] = [(d.uuid, d.name) for d in self.disks]
        # (op, real index, spec for add / changed values for modify / {} for remove)
        self.disk_plan: list[tuple[str, int, dict[str, Any]]] = []
        for dop, idx, params in self.disk_mods:
            if dop == DDM_ADD:
                if inst.disk_template == constants.DT_DISKLESS:
                    raise errors.OpPrereqError("Cannot add disks to a diskless instance",
                                               errors.ECODE_INVAL)
                if inst.disk_template in constants.DTS_INT_MIRROR:
                    snodes = drbd.secondary_nodes(self, self.disks, inst.primary_node)
                    if len(snodes) != 1:
                        raise errors.OpPrereqError(
                            f"Instance {inst.name} has {len(snodes)} secondary nodes;"
                            " expected one", errors.ECODE_STATE)
                    check_node_online(snodes[0], " as secondary node")
                    self.mirror_snode = snodes[0]
                check_node_online(self.pnode, " as primary node")
                check_spindles([params], self._exclusive_storage(),
                               required=inst.disk_template in constants.DTS_LVM)
                spec = check_disk_specs(inst.disk_template, [params])[0]
                real = resolve_index(idx, sim, "disk", adding=True)
                self.disk_plan.append((dop, real, spec))
                sim.insert(real, (None, spec.get("name")))
                if len(sim) > constants.MAX_DISKS:
                    raise errors.OpPrereqError(f"Instance {inst.name} would have {len(sim)}"
                                               f" disks, at most {constants.MAX_DISKS} are"
                                               " allowed", errors.ECODE_STATE)
            elif dop == DDM_REMOVE:
                if inst.admin_state == constants.ADMINST_UP and not self.hotplug:
                    raise errors.OpPrereqError("Stop the instance before removing disks"
                                               " (or unplug them with --hotplug)",
                                               errors.ECODE_STATE)
                real = resolve_index(idx, sim, "disk")
                if len(sim) <= 1:
                    raise errors.OpPrereqError("Cannot remove the last disk of an instance",
                                               errors.ECODE_INVAL)
                self.disk_plan.append((dop, real, {}))
                sim.pop(real)
            else:
                unknown = set(params) - {"mode", "name"}
                if unknown:
                    raise errors.OpPrereqError(f"Cannot modify disk parameter(s)"
                                               f" {sorted(unknown)} (use grow-disk for size)",
                                               errors.ECODE_INVAL)
                if params.get("mode") not in (None, constants.DISK_RDWR, constants.DISK_RDONLY):
                    raise errors.OpPrereqError(f"Invalid disk mode {params['mode']!r}",
                                               errors.ECODE_INVAL)
                real = resolve_index(idx, sim, "disk")
                self.disk_plan.append((dop, real, params))
                if "name" in params:
                    sim[real] = (sim[real][0], params["name"] or None)
        check_device_names("disk", sim)
        check_device_names("NIC", self._nic_ids())
        if op.beparams or self.disk_mods or self.nic_mods:
            self._check_ipolicy(be)
        if op.disk_template:
            instance_convert.check(self)

    def _check_ipolicy(self, be: dict[str, Any]) -> None:
        """Refuse new sizes outside the group's policy (maxmem and minmem, as Ganeti)."""
        sizes = [d.size for d in self.disks]
        for dop, idx, spec in self.disk_plan:
            if dop == DDM_ADD:
                sizes.insert(idx, spec["size"])
            elif dop == DDM_REMOVE:
                sizes.pop(idx)
        nics = len(self.instance.nics) + sum(
            1 if nop == DDM_ADD else -1 if nop == DDM_REMOVE else 0 for nop, _, _ in self.nic_plan)
        specs = [policy.spec_from_values(be, sizes, nics, memory=mem)
                 for mem in ("maxmem", "minmem")]
        ignored = policy.check_allocation(self.cfg, self.pnode.group, specs,
                                          self.instance.disk_template,
                                          ignore=self.op.ignore_ipolicy)
        if ignored:
            self.LogWarning("Instance policy ignored: " + ipolicy.format_violations(ignored))

    def _check_hotplug(self) -> bool:
        """Whether to hotplug: the primary must say the running instance can.

        With ``hotplug`` a refusal is a prereq error; with only
        ``hotplug_if_possible`` it is a warning and the changes take effect
        at the next start, as without either.
        """
        check_node_online(self.pnode, " as primary node")
        res = self.require_rpc().call_hotplug_supported(
            [self.pnode.name], instance=self.rpc_instance()).get(self.pnode.name)
        problem = "no answer from the node" if res is None else res.fail_msg
        if problem is None:
            return True
        if self.op.hotplug:
            raise errors.OpPrereqError(f"Hotplug is not possible: {problem}",
                                       errors.ECODE_STATE)
        self.LogWarning(f"Hotplug is not possible: {problem}")
        self.LogInfo("The changes take effect at the next start of the instance")
        return False

    def _hotplug(self, action: str, dev_type: str, idx: int,
                 feedback_fn: FeedbackFn) -> str | None:
        """Plug device ``idx`` of the instance (as it is in memory now) in or out.

        Returns None on success, else the node's error (the caller decides
        whether that is a warning or fatal).
        """
        res = self.require_rpc().call_hotplug_device(
            [self.pnode.name], instance=self.rpc_instance(), action=action, dev_type=dev_type, idx=idx,
        ).get(self.pnode.name)
        problem = "no answer from the node" if res is None else res.fail_msg
        if problem is None:
            feedback_fn(f"* hotplug: {dev_type} {idx} "
                        + ("plugged in" if action == DDM_ADD else "unplugged"))
        return problem

    def _hotplug_nic(self, action: str, idx: int, feedback_fn: FeedbackFn) -> None:
        problem = self._hotplug(action, "nic", idx, feedback_fn)
        if problem is not None:
            self.LogWarning(f"Hotplug ({action}) of NIC {idx} failed: {problem}; the change"
                            " takes effect at the next start of the instance")

    def _check_runtime_mem(self, be: dict[str, Any]) -> None:
        """``runtime_mem``: the instance runs, and the size is within min/maxmem (or force).

        Growth beyond what the node has free is refused by the node when
        ballooning.
        """
        inst, op = self.instance, self.op
        assert op.runtime_mem is not None
        check_node_online(self.pnode, " as primary node")
        live = self.require_rpc().call_instance_info(
            self.pnode.name, instance_name=inst.name, hypervisor=inst.hypervisor, hvparams={},
        ).one(self.pnode.name)
        if live is None or live.get("state") != 0:
            raise errors.OpPrereqError(f"Instance {inst.name} is not running; its runtime"
                                       " memory cannot change", errors.ECODE_STATE)
        if not op.force and not be["minmem"] <= op.runtime_mem <= be["maxmem"]:
            raise errors.OpPrereqError(
                f"Instance {inst.name} must have memory between {be['minmem']} and"
                f" {be['maxmem']} MiB unless force is given", errors.ECODE_INVAL)

    def _plan_nics(self) -> None:
        """Check the NIC changes on a simulated NIC list; fills ``nic_plan``.

        A ``modify`` entry becomes a dict of only the given, normalised
        values (``mac`` "" = generate a new one, ``ip`` None = remove it,
        ``nicparams``).  MACs must not be used by any other NIC.
        """
        inst, cfg = self.instance, self.cfg
        used = {nic.mac.lower() for other in cfg.get_all_instances_info().values()
                if other.uuid != inst.uuid for nic in other.nics if nic.mac}
        macs = [nic.mac for nic in inst.nics]
        #: the NICs as the changes so far leave them (what a later change sees)
        self.nic_sim = [copy.copy(nic) for nic in inst.nics]
        # (op, real index, the new NIC for add / None for remove / changes for modify)
        self.nic_plan: list[tuple[str, int, NIC | dict[str, Any] | None]] = []
        for nop, idx, params in self.nic_mods:
            if nop == DDM_ADD:
                nic = build_nics(cfg, [params], generated=self.generated_macs)[0]
                real = resolve_index(idx, self._nic_ids(), "NIC", adding=True)
                attach_networks(cfg, [nic], [params], self._group(), check=self.op.conflicts_check,
                                held=self.held_ips, first=real, generated=self.generated_macs)
                check_routed(cfg.get_cluster_info(), [nic], real)
                self._check_mac(nic.mac, used, macs)
                macs.insert(real, nic.mac)
                self.nic_sim.insert(real, copy.copy(nic))
                if len(macs) > constants.MAX_NICS:
                    raise errors.OpPrereqError(f"Instance {inst.name} would have {len(macs)}"
                                               f" NICs, at most {constants.MAX_NICS} are"
                                               " allowed", errors.ECODE_STATE)
                self.nic_plan.append((nop, real, nic))
            elif nop == DDM_REMOVE:
                real = resolve_index(idx, self._nic_ids(), "NIC")
                macs.pop(real)
                self.nic_sim.pop(real)
                self.nic_plan.append((nop, real, None))
            else:
                real = resolve_index(idx, self._nic_ids(), "NIC")
                if not params:
                    raise errors.OpPrereqError(f"No changes for NIC {idx}", errors.ECODE_INVAL)
                built = build_nics(cfg, [{**params, "mac": params.get("mac") or "auto"}],
                                   generate=False)[0]
                spec: dict[str, Any] = {"nicparams": built.nicparams}
                if "mac" in params:
                    if built.mac:
                        self._check_mac(built.mac, used, macs[:real] + macs[real + 1:])
                    spec["mac"] = built.mac
                    macs[real] = built.mac
                self._plan_nic_network(real, params, built, spec)
                if spec.get("mac") and "mac" not in params:
                    macs[real] = spec["mac"]
                if "name" in params:
                    spec["name"] = params["name"] or None
                self._simulate(real, spec)
                self.nic_plan.append((nop, real, spec))

    def _group(self) -> NodeGroup:
        """The node group of the instance's primary node (its network connections)."""
        node = self.cfg.get_node_info(self.instance.primary_node)
        group = self.cfg.get_nodegroup(node.group) if node is not None else None
        return group or NodeGroup(name="?")

    def _plan_nic_network(self, real: int, params: dict[str, Any], built: NIC,
                          spec: dict[str, Any]) -> None:
        """A modification of NIC ``real``: on a network (staying, or moving to one) its
        mode, link and VLAN are the connection's (refused when given); a new ``ip``
        or ``network`` is resolved and its address handed out (doc/networks.md)."""
        current = self.nic_sim[real]
        target = current.network
        if "network" in params:
            found = find_network(self.cfg, built.network) if built.network else None
            target = found.uuid if found else built.network
        given = [key for key in ("mode", "link", "vlan", "bridge") if params.get(key)]
        if target and given:
            name = getattr(self.cfg.get_network(target), "name", target)
            raise errors.OpPrereqError(
                f"NIC {real}: on network {name} its {', '.join(given)} come from the"
                " network's connection to the node group; change the connection, or take"
                " the NIC off the network (network=none)", errors.ECODE_INVAL)
        if "ip" not in params and "network" not in params:
            return
        ip = built.ip if "ip" in params else current.ip
        if target and target == current.network and ip == current.ip:
            spec["ip"], spec["network"] = ip, target       # nothing moves
            return
        nic = NIC(mac=current.mac, ip=ip, network=built.network if "network" in params
                  else current.network, nicparams=dict(current.nicparams))
        attach_networks(self.cfg, [nic], [params], self._group(),
                        check=self.op.conflicts_check, held=self.held_ips, first=real)
        spec["ip"], spec["network"] = nic.ip, nic.network
        if nic.network:
            # the connection's parameters, as they are (none kept from before)
            spec["nicparams"], spec["replace_nicparams"] = dict(nic.nicparams), True
        if nic.network != current.network and "mac" not in params:
            # another network's MAC prefix: a new MAC with it, as Ganeti does
            prefixes = [getattr(self.cfg.get_network(n), "mac_prefix", None) if n else None
                        for n in (current.network, nic.network)]
            if prefixes[0] != prefixes[1]:
                mac = self.cfg.generate_mac(prefixes[1])
                self.generated_macs.append(mac)
                spec["mac"] = mac
        check_routed(self.cfg.get_cluster_info(), [
            NIC(ip=nic.ip, nicparams=spec["nicparams"] if nic.network else
                {**current.nicparams, **spec.get("nicparams", {})})], real)

    def _check_new_primary(self) -> Node | None:
        """The node of ``pnode`` (None: already the primary); as Ganeti, unless
        ``force``, refused while the instance runs on its current primary."""
        inst, node = self.instance, expand_node(self.cfg, self.op.pnode or "")
        if node.uuid == inst.primary_node:
            return None
        if inst.disk_template in constants.DTS_INT_MIRROR:
            raise errors.OpPrereqError(f"Instance {inst.name} has mirrored disks: change its"
                                       " primary node with failover or migrate",
                                       errors.ECODE_INVAL)
        check_node_online(node, " as new primary node")
        if not self.op.force and not self.pnode.offline and self.rpc is not None:
            res = self.rpc.call_instance_info([self.pnode.name], instance_name=inst.name,
                                              hypervisor=inst.hypervisor, hvparams={})
            live = res.get(self.pnode.name)
            if live is None or live.failed:
                self.LogWarning(f"Cannot tell whether {inst.name} runs on {self.pnode.name}")
            elif live.payload:
                raise errors.OpPrereqError(f"Instance {inst.name} is still running on"
                                           f" {self.pnode.name}", errors.ECODE_STATE)
        return node

    def _exclusive_storage(self) -> bool:
        """Whether any node of the instance has the exclusive_storage node parameter."""
        cluster = self.cfg.get_cluster_info()
        return any(lvm.exclusive_storage(cluster, node, self.cfg.get_nodegroup(node.group))
                   for uuid in self.cfg.get_instance_nodes(self.instance.uuid)
                   if (node := self.cfg.get_node_info(uuid)) is not None)

    def _nic_ids(self) -> list[tuple[str | None, str | None]]:
        """``(uuid, name)`` of each NIC as the changes so far leave them."""
        return [(nic.uuid, nic.name) for nic in self.nic_sim]

    def _simulate(self, real: int, spec: dict[str, Any]) -> None:
        """Apply a planned modification to the simulated NIC ``real``."""
        nic = self.nic_sim[real]
        if spec.get("replace_nicparams"):
            nic.nicparams = dict(spec["nicparams"])
        else:
            nic.nicparams = {**nic.nicparams, **spec.get("nicparams", {})}
        for key in ("mac", "ip", "network", "name"):
            if key in spec and spec[key] != "":
                setattr(nic, key, spec[key])

    def release_reservations(self) -> None:
        """Release the MACs and addresses handed out here (in use by now, or free again)."""
        if self.generated_macs:
            self.cfg.release_macs(self.generated_macs)
            self.generated_macs = []
        if self.held_ips:
            self.cfg.release_ips(self.held_ips)
            self.held_ips = []

    @staticmethod
    def _check_mac(mac: str, used: set[str], own: list[str]) -> None:
        if mac and (mac in used or mac in own):
            raise errors.OpPrereqError(f"MAC address {mac} already in use",
                                       errors.ECODE_NOTUNIQUE)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        op, inst, cfg = self.op, self.instance, self.cfg
        changes: list[list[Any]] = []
        for key in sorted(set(op.beparams)):
            changes.append([f"be/{key}", self.be_new.get(key, "default")])
        for key in sorted(set(op.hvparams)):
            changes.append([f"hv/{key}", self.hv_new.get(key, "default")])
        inst.beparams = self.be_new
        inst.hvparams = self.hv_new
        if self.os_new is not None:
            inst.osparams = self.os_new
            changes.extend([f"os/{k}", v] for k, v in sorted((op.osparams or {}).items()))
        if self.os_private_new is not None:
            inst.osparams_private = self.os_private_new
            # the values stay Private: the result shows them redacted
            changes.extend([f"os_private/{k}", v]
                           for k, v in sorted((op.osparams_private or {}).items()))
        if op.os_name:
            inst.os = op.os_name
            changes.append(["os_name", op.os_name])
        for _, idx, data in self.nic_plan:
            if isinstance(data, NIC):       # add
                data.uuid = data.uuid or str(uuidlib.uuid4())
                inst.nics.insert(idx, data)
                changes.append([f"nic.{idx}", f"add:mac={data.mac},ip={data.ip}"])
                if self.hotplug:
                    self._hotplug_nic(DDM_ADD, idx, feedback_fn)
            elif data is None:              # remove
                if self.hotplug:
                    self._hotplug_nic(DDM_REMOVE, idx, feedback_fn)
                inst.nics.pop(idx)
                changes.append([f"nic.{idx}", "remove"])
            else:                           # modify
                # a NIC seen differently by the guest is unplugged and plugged in again
                replug = self.hotplug and ("mac" in data or bool(data.get("nicparams")))
                if replug:
                    self._hotplug_nic(DDM_REMOVE, idx, feedback_fn)
                nic = inst.nics[idx]
                if data.get("replace_nicparams"):   # the new network's connection, whole
                    nic.nicparams = dict(data["nicparams"])
                    changes.extend([f"nic.{key}/{idx}", value]
                                   for key, value in sorted(nic.nicparams.items()))
                else:
                    for key, value in sorted(data.get("nicparams", {}).items()):
                        nic.nicparams = parameters.update_params(nic.nicparams, {key: value})
                        changes.append([f"nic.{key}/{idx}", value])
                if "mac" in data:
                    if not data["mac"]:
                        self.generated_macs.append(cfg.generate_mac())
                    nic.mac = data["mac"] or self.generated_macs[-1]
                    changes.append([f"nic.mac/{idx}", nic.mac])
                if "ip" in data:
                    nic.ip = data["ip"]
                    changes.append([f"nic.ip/{idx}", nic.ip])
                if "network" in data and data["network"] != nic.network:
                    nic.network = data["network"]
                    changes.append([f"nic.network/{idx}", nic.network])
                if "name" in data:
                    nic.name = data["name"]
                    changes.append([f"nic.name/{idx}", nic.name])
                if replug:
                    self._hotplug_nic(DDM_ADD, idx, feedback_fn)
        if self.new_pnode is not None:      # the disks were moved there by hand
            for disk in cfg.get_instance_disks(inst.uuid):
                disk.nodes = [self.new_pnode.uuid]
                cfg.update(disk)
            inst.primary_node = self.new_pnode.uuid
            changes.append(["pnode", self.new_pnode.name])
        cfg.update(inst)
        for dop, idx, data in self.disk_plan:
            if dop == DDM_ADD:
                self._add_disk(idx, data, feedback_fn)
                changes.append([f"disk/{idx}", f"add:size={data['size']},mode={data['mode']}"])
                if self.hotplug:
                    problem = self._hotplug(DDM_ADD, "disk", idx, feedback_fn)
                    if problem is not None:
                        self.LogWarning(f"Hotplug of disk {idx} failed: {problem}; the disk"
                                        " is attached at the next start of the instance")
            elif dop == DDM_REMOVE:
                if self.hotplug:
                    problem = self._hotplug(DDM_REMOVE, "disk", idx, feedback_fn)
                    if problem is not None:
                        raise errors.OpExecError(f"Cannot unplug disk {idx}: {problem};"
                                                 " it was not removed")
                disk = cfg.get_instance_disks(inst.uuid)[idx]
                if drbd.is_drbd(disk):
                    drbd.remove_mirror_disk(self, disk, [
                        n for n in (cfg.get_node_info(u) for u in disk.logical_id[:2])
                        if n is not None and not n.offline])
                elif disk.dev_type != constants.DT_DISKLESS:
                    res = self.require_rpc().call_blockdev_remove(
                        [self.pnode.name], disk=disk_rpc_dicts([disk], self.cfg)[0])
                    r = res.get(self.pnode.name)
                    if r is None or r.failed:
                        self.LogWarning(f"Could not remove disk {idx} on {self.pnode.name}")
                cfg.remove_instance_disk(inst.uuid, disk.uuid)
                changes.append([f"disk/{idx}", "remove"])
            else:
                disk = cfg.get_instance_disks(inst.uuid)[idx]
                if data.get("mode"):
                    disk.mode = data["mode"]
                    changes.append([f"disk.mode/{idx}", disk.mode])
                if "name" in data:
                    disk.name = data["name"]
                    changes.append([f"disk.name/{idx}", disk.name])
                cfg.update(disk)
        if op.disk_template:
            instance_convert.convert(self, feedback_fn)
            changes.append(["disk_template", op.disk_template])
        if op.runtime_mem is not None:
            self.require_rpc().call_instance_balloon_memory(
                self.pnode.name, instance=self.rpc_instance(), memory=op.runtime_mem,
            ).one(self.pnode.name, "Cannot modify instance runtime memory")
            changes.append(["runtime_memory", op.runtime_mem])
        if op.offline is not None:
            state = constants.ADMINST_OFFLINE if op.offline else constants.ADMINST_DOWN
            cfg.set_instance_admin_state(inst.uuid, state)
            changes.append(["admin_state", state])
        if (self.os_new is not None or self.os_private_new is not None or self.nic_plan) \
                and os_image.image_of(inst.osparams) is not None and not self.pnode.offline:
            # doc/images.md: the seed and the metadata service follow the change
            os_image.modified_seed(self, self.pnode.name, inst, feedback_fn)
        return changes

    def _add_disk(self, idx: int, spec: dict[str, Any], feedback_fn: FeedbackFn) -> None:
        inst, cfg = self.instance, self.cfg
        uuid = str(uuidlib.uuid4())
        logical_id: list[Any] = []
        if inst.disk_template in constants.DTS_FILEBASED:
            existing = cfg.get_instance_disks(inst.uuid)
            if existing and existing[0].logical_id:
                sdir = existing[0].logical_id[1].rsplit("/", 2)[0]
                driver = existing[0].logical_id[0]
            else:
                paths = getattr(self.context, "paths", None)
                sdir = storage_dir_for(cfg.get_cluster_info(), inst.disk_template, None,
                                       paths.root if paths is not None else None)
                driver = "loop"
            logical_id = file_logical_id(sdir, inst.name, uuid, idx, driver)
        if inst.disk_template == constants.DT_DRBD8:
            self._add_mirror(idx, spec, uuid, feedback_fn)
            return
        excl_stor = False
        if inst.disk_template == constants.DT_PLAIN:
            cluster = cfg.get_cluster_info()
            logical_id = lvm.lv_logical_id(lvm.disk_vg(cluster, spec), uuid, idx)
            lvm.check_vg_free(self, [self.pnode], {logical_id[0]: spec["size"]})
            excl_stor = lvm.exclusive_storage(cluster, self.pnode,
                                              cfg.get_nodegroup(self.pnode.group))
        disk = Disk(uuid=uuid, dev_type=inst.disk_template, size=spec["size"], mode=spec["mode"],
                    name=spec["name"], logical_id=logical_id, iv_name=f"disk/{idx}",
                    nodes=[inst.primary_node])
        feedback_fn(f"* creating disk {idx} ({spec['size']} MiB) on {self.pnode.name}")
        self.require_rpc().call_blockdev_create(
            self.pnode.name, disk=disk_rpc_dicts([disk], self.cfg)[0], size=disk.size,
            owner_instance_name=inst.name, on_primary=True, info=constants.DISK_INFO_PREFIX + inst.name,
            excl_stor=excl_stor).one(self.pnode.name, f"Could not create disk {idx}")
        cfg.add_instance_disk(inst.uuid, disk, idx)

    def _add_mirror(self, idx: int, spec: dict[str, Any], uuid: str,
                    feedback_fn: FeedbackFn) -> None:
        """A new drbd disk: made on the secondary, then the primary (the initial sync
        starts), recorded, waited for; taken down again when the disks are not active."""
        inst, cfg, snode = self.instance, self.cfg, self.mirror_snode
        vg = lvm.disk_vg(cfg.get_cluster_info(), spec)
        need = {vg: drbd.drbd_disk_size(spec["size"])}
        lvm.check_vg_free(self, [self.pnode, snode], need)
        disk, reserved = drbd.create_mirror_disk(
            self, inst.name, (self.pnode, snode), uuid=uuid, index=idx, spec=spec, vg=vg,
            feedback_fn=feedback_fn)
        try:
            cfg.add_instance_disk(inst.uuid, disk, idx)
        except BaseException:
            drbd.remove_mirror_disk(self, disk, (self.pnode, snode))
            raise
        finally:
            cfg.release_drbd([reserved])
        active = inst.disks_active or inst.admin_state == constants.ADMINST_UP
        if self.op.wait_for_sync or not active:
            drbd.wait_for_sync(self, self.pnode, [disk], feedback_fn, cfg=cfg,
                               instance=inst.name)
        if not active:
            drbd.shutdown_mirrors(self, [disk], [self.pnode, snode])


class LUInstanceGrowDisk(InstanceLU[OpInstanceGrowDisk]):
    """Grow one disk of an instance."""

    HPATH = "disk-grow"

    def CheckInstance(self) -> None:
        op = self.op
        check_node_online(self.pnode, " as primary node")
        if op.disk >= len(self.disks):
            raise errors.OpPrereqError(f"Instance {self.instance.name} has no disk {op.disk}",
                                       errors.ECODE_INVAL)
        disk = self.disks[op.disk]
        if disk.dev_type == constants.DT_DISKLESS:
            raise errors.OpPrereqError("Diskless disks cannot grow", errors.ECODE_INVAL)
        self.delta = op.amount - disk.size if op.absolute else op.amount
        if self.delta < 0:
            raise errors.OpPrereqError(f"Cannot shrink disk {op.disk} from {disk.size} MiB to"
                                       f" {op.amount} MiB", errors.ECODE_INVAL)
        if self.delta == 0 and not op.absolute:
            raise errors.OpPrereqError("Growing by 0 MiB does nothing", errors.ECODE_INVAL)
        if disk.dev_type == constants.DT_PLAIN and self.delta > 0:
            lvm.check_vg_free(self, [self.pnode], {disk.logical_id[0]: self.delta})
        self.mirror_nodes: list[Node] = []
        if drbd.is_drbd(disk) and self.delta > 0:
            # the data volume grows on both nodes, then the mirror on the primary
            self.mirror_nodes = drbd.secondary_nodes(self, [disk], self.instance.primary_node)
            for node in self.mirror_nodes:
                check_node_online(node, " as secondary node (its volume grows too)")
            lvm.check_vg_free(self, [*self.mirror_nodes, self.pnode],
                              {disk.children[0].logical_id[0]: self.delta})
            if not (self.instance.disks_active
                    or self.instance.admin_state == constants.ADMINST_UP):
                raise errors.OpPrereqError(
                    f"The disks of instance {self.instance.name} are not active; a mirror"
                    " grows while it is set up (activate-disks first)", errors.ECODE_STATE)

    def HookExtra(self) -> dict[str, Any]:
        return {"DISK": self.op.disk, "AMOUNT": self.delta, "ABSOLUTE": self.op.absolute}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        disk = self.disks[self.op.disk]
        if self.delta == 0:
            return None
        data = disk_rpc_dicts([disk], self.cfg)[0]
        excl = disk.dev_type == constants.DT_PLAIN and lvm.exclusive_storage(
            self.cfg.get_cluster_info(), self.pnode, self.cfg.get_nodegroup(self.pnode.group))
        self.require_rpc().call_blockdev_grow(
            self.pnode.name, disk=data, amount=self.delta, dryrun=True, backingstore=False,
            excl_stor=excl).one(self.pnode.name, f"Cannot grow disk {self.op.disk}")
        if self.mirror_nodes:
            # DRBD refuses a resize during a resync ("Resize not allowed during resync"),
            # e.g. right after a failover, while the old primary catches up: let it end
            drbd.wait_for_sync(self, self.pnode, [disk], feedback_fn, cfg=self.cfg,
                               instance=self.instance.name, stall=drbd.ACTIVATE_SYNC_STALL)
        for node in [*self.mirror_nodes, self.pnode] if self.mirror_nodes else []:
            feedback_fn(f"* growing the data volume of disk {self.op.disk} on {node.name}")
            self.require_rpc().call_blockdev_grow(
                node.name, disk=data, amount=self.delta, dryrun=False, backingstore=True,
                excl_stor=False).one(node.name, f"Growing the data volume of disk"
                                                f" {self.op.disk} on {node.name} failed")
        new_size = self.require_rpc().call_blockdev_grow(
            self.pnode.name, disk=data, amount=self.delta, dryrun=False, backingstore=False,
            excl_stor=excl).one(self.pnode.name, f"Growing disk {self.op.disk} failed")
        old_size = disk.size
        disk.size = new_size if isinstance(new_size, int) and new_size > 0 \
            else disk.size + self.delta
        if drbd.is_drbd(disk) and disk.children:
            disk.children[0].size = disk.size      # the data volume under the mirror
        self.cfg.update(disk)
        feedback_fn(f"Disk {self.op.disk} of {self.instance.name} is now {disk.size} MiB")
        if disk_wipe.wipe_wanted(self):
            # the grown part only (the size stays: the space is the instance's)
            disk_wipe.wipe_disks(self, self.pnode.name, self.instance.name,
                                 [(self.op.disk, disk, old_size)], feedback_fn)
        if self.instance.admin_state == constants.ADMINST_UP:
            self._tell_guest(feedback_fn)
        return None

    def _tell_guest(self, feedback_fn: FeedbackFn) -> None:
        """Let the running instance see the new size (a warning if it cannot)."""
        res = self.require_rpc().call_instance_resize_disk(
            [self.pnode.name], instance=self.rpc_instance(), idx=self.op.disk).get(self.pnode.name)
        problem = "no answer from the node" if res is None else res.fail_msg
        if problem is not None:
            self.LogWarning(f"The running instance was not told of the new size ({problem});"
                            " it sees it at its next start")
        elif res is not None and res.payload:
            feedback_fn(f"* the running instance sees the new size of disk {self.op.disk}")
        else:
            self.LogInfo("The instance sees the new size at its next start")


class LUInstanceActivateDisks(InstanceLU[OpInstanceActivateDisks]):
    """Assemble the disks; returns ``[[node, iv_name, path], ...]``."""

    def CheckInstance(self) -> None:
        check_node_online(self.pnode, " as primary node")

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        result = []
        # mirrors: the secondaries first, so that the primary finds its peer
        drbd.assemble_secondaries(self, self.instance.name, self.disks,
                                  self.instance.primary_node)
        for idx, disk in enumerate(self.disks):
            if disk.dev_type == constants.DT_DISKLESS:
                continue
            out = self.require_rpc().call_blockdev_assemble(
                self.pnode.name, disk=disk_rpc_dicts([disk], self.cfg)[0],
                instance_name=self.instance.name,
                as_primary=True, idx=idx,
            ).one(self.pnode.name, f"Cannot activate disk {idx} of {self.instance.name}")
            result.append([self.pnode.name, disk.iv_name or f"disk/{idx}",
                           (out or {}).get("link") or (out or {}).get("path")])
        self.cfg.set_instance_disks_active(self.instance.uuid, True)
        if self.op.wait_for_sync:
            # a side that came back resyncs now: this job follows it (progress
            # entries, the runtime block job); a peer that does not connect within
            # ACTIVATE_SYNC_STALL seconds is not waited for (a warning)
            drbd.wait_for_sync(self, self.pnode, self.disks, feedback_fn, cfg=self.cfg,
                               instance=self.instance.name, stall=drbd.ACTIVATE_SYNC_STALL)
        return result


class LUInstanceDeactivateDisks(InstanceLU[OpInstanceDeactivateDisks]):
    """Shut down the disks of a stopped instance."""

    def CheckInstance(self) -> None:
        inst = self.instance
        if not self.op.force and not self.pnode.offline and self.rpc is not None:
            live = self.require_rpc().call_instance_info(
                self.pnode.name, instance_name=inst.name, hypervisor=inst.hypervisor, hvparams={},
            ).one(self.pnode.name)
            if live is not None and live.get("state") == 0:
                raise errors.OpPrereqError(f"Instance {inst.name} is running; stop it first",
                                           errors.ECODE_STATE)

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        for disk in self.disks:
            if disk.dev_type == constants.DT_DISKLESS or self.pnode.offline:
                continue
            res = self.require_rpc().call_blockdev_shutdown(
                [self.pnode.name], disk=disk_rpc_dicts([disk], self.cfg)[0]).get(self.pnode.name)
            if res is None or res.failed:
                msg = f"Could not shut down disk {disk.iv_name}"
                if not self.op.force:
                    raise errors.OpExecError(msg)
                self.LogWarning(msg)
        drbd.shutdown_mirrors(self, self.disks, drbd.secondary_nodes(
            self, self.disks, self.instance.primary_node), strict=not self.op.force)
        self.cfg.set_instance_disks_active(self.instance.uuid, False)
        return None
