"""Cluster verification: OP_CLUSTER_VERIFY, _VERIFY_CONFIG, _VERIFY_GROUP and _VERIFY_DISKS.

``OP_CLUSTER_VERIFY`` only submits jobs: one VERIFY_CONFIG job and one
VERIFY_GROUP job per node group (result ``{"jobs": [[true, id], ...]}``).
The two workers report every problem as a feedback line in Ganeti's
format (doc/protocols/opcodes.md, "Cluster verify output") and return
False when an error (not a warning) was found:

* with ``error_codes``: ``ERROR:ENODEVERSION:node:node2:<message>``
* without: ``ERROR: node node2: <message>``

(each line is sent as ``"  - " + line``, like Ganeti).  Codes listed in
``ignore_errors`` are reported as warnings.  ``debug_simulate_errors``
turns every check into a failure (to test the reporting path).

``OP_CLUSTER_VERIFY_DISKS`` also only submits jobs: one
``OP_GROUP_VERIFY_DISKS`` per node group (see
:class:`ganeti.cmdlib.group.LUGroupVerifyDisks`).

The group check asks every online node of the group (``node_verify``
RPC) for its versions, clock, host and cluster name, TCP reachability of
the group's other nodes and the checksums of the cluster files, and
compares those with the master's own files: ``config.data`` on master
candidates, ``server.pem`` and the ssconf files everywhere.  The
``cluster-verify`` post hooks run on the group's nodes and their failures
are folded into the result (``ENODEHOOKS``).  As in Ganeti, the
out-of-band program of the nodes (``oob_program``) must be an executable
file on the master candidates and master-capable nodes (``ENODEOOBPATH``),
and the config check refuses a file storage directory of an enabled
``file``/``sharedfile`` template below a system directory such as ``/boot``
(``ENODEFILESTORAGEPATHUNUSABLE``, :data:`FORBIDDEN_FILE_STORAGE_PATHS`).  Instances whose primary node
is in the group and that break the group's instance policy are reported as
warnings (``EINSTANCEPOLICY``, naming each spec and value; doc/ipolicy.md).
With a volume group set and ``plain`` (or ``drbd``) enabled, each node lists
its volumes (``lvlist``): a group it cannot list is ``ENODELVM``, a volume of
an instance's disk that is missing ``EINSTANCEMISSINGDISK``, one of another
size ``EINSTANCEFAULTYDISK`` (smaller: error, larger: warning), a volume no
disk owns ``ENODEORPHANLV`` (doc/storage.md).  With ``drbd`` enabled each
node's side of every DRBD disk is read (``blockdev_getmirrorstatus``): a
disk that should be active but is not set up, is degraded (peer gone, not
up to date), has a faulty local disk or is primary on the secondary node is
``EINSTANCEFAULTYDISK`` (a resync running: a warning with its percent), and
a configured minor that no disk of the node owns is ``ENODEDRBD``
(``drbd_node_info``), and a kernel module whose usermode helper is not the
cluster's ``drbd_usermode_helper`` is ``ENODEDRBDHELPER``.  When the
cluster's kvm defaults or a kvm instance of the group use ``firmware=uefi``
or ``tpm=tpm2``, each node checks that OVMF or swtpm is installed
(``kvm_firmware``; missing: ``ENODEHV``, doc/kvm.md); with kvm enabled,
a UEFI/TPM state directory on a node that no instance placed there owns
is a warning (``ENODEORPHANFIRMWARE``).
"""

from __future__ import annotations

import glob
import os
import time
from typing import Any

from ganeti import constants, crypto, ipolicy, locking, opcodes, parameters
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import drbd, firmware_state, lvm, policy, verify_n1
from ganeti.cmdlib.base import NoHooksLU
from ganeti.cmdlib.common import expand_group
from ganeti.objects import disk_tree
from ganeti.opcodes.cluster import (OpClusterVerify, OpClusterVerifyConfig, OpClusterVerifyDisks,
                                    OpClusterVerifyGroup)
from ganeti.opcodes.group import OpGroupVerifyDisks
from ganeti.rpc.defs import to_canonical
from ganeti.utils import io as uio

__all__ = ["LUClusterVerify", "LUClusterVerifyConfig", "LUClusterVerifyGroup",
           "LUClusterVerifyDisks", "Reporter",
           "format_verify_line", "NODE_MAX_CLOCK_SKEW", "FORBIDDEN_FILE_STORAGE_PATHS",
           "file_storage_path_problem"]

#: Clock differences (seconds) between master and node tolerated by verify.
NODE_MAX_CLOCK_SKEW = 150.0

#: Directories (and everything below them) that may not hold file storage,
#: as in Ganeti: system and home directories.
FORBIDDEN_FILE_STORAGE_PATHS = frozenset(
    ["/boot", "/dev", "/etc", "/home", "/proc", "/root", "/sys"]
    + [f"{prefix}/{sub}" for prefix in ("", "/usr", "/usr/local")
       for sub in ("bin", "lib", "lib32", "lib64", "sbin")])


def file_storage_path_problem(path: str) -> str:
    """Why ``path`` may not be a file storage directory ('' when it may)."""
    if not os.path.isabs(path):
        return f"file storage path '{path}' is not absolute"
    norm = os.path.normpath(path)
    for bad in sorted(FORBIDDEN_FILE_STORAGE_PATHS):
        if norm == bad or norm.startswith(bad + "/"):
            return f"file storage path '{path}' is forbidden (below {bad})"
    return ""

ETYPE_ERROR = "ERROR"
ETYPE_WARNING = "WARNING"
OT_CLUSTER = "cluster"
OT_NODE = "node"
OT_GROUP = "group"
OT_INSTANCE = "instance"


def format_verify_line(etype: str, code: str, otype: str, name: str, msg: str,
                       error_codes: bool) -> str:
    """One verify result line (without the ``"  - "`` feedback prefix)."""
    if error_codes:
        return f"{etype}:{code}:{otype}:{name}:{msg}"
    return f"{etype}: {otype} {name}: {msg}" if name else f"{etype}: {otype}: {msg}"


class Reporter:
    """Collects verify findings and sends them as feedback lines."""

    def __init__(self, op: OpClusterVerify | OpClusterVerifyConfig | OpClusterVerifyGroup,
                 feedback_fn: FeedbackFn) -> None:
        self.error_codes = bool(getattr(op, "error_codes", False))
        self.ignore = set(getattr(op, "ignore_errors", []) or [])
        self.simulate = bool(getattr(op, "debug_simulate_errors", False))
        self.feedback_fn = feedback_fn
        self.bad = False
        self.lines: list[str] = []

    def report(self, code: str, otype: str, name: str, msg: str, *,
               warning: bool = False) -> None:
        """Report one finding (an error unless ``warning`` or its code is ignored)."""
        etype = ETYPE_WARNING if warning or code in self.ignore else ETYPE_ERROR
        if etype == ETYPE_ERROR:
            self.bad = True
        line = format_verify_line(etype, code, otype, name, msg, self.error_codes)
        self.lines.append(line)
        self.feedback_fn(f"  - {line}")

    def error_if(self, cond: Any, code: str, otype: str, name: str, msg: str, *,
                 warning: bool = False) -> bool:
        """Report when ``cond`` is true (or errors are simulated); returns whether reported."""
        if cond or self.simulate:
            self.report(code, otype, name, msg, warning=warning)
            return True
        return False


#: DRBD connection states of a side that is not talking to its peer
_UNCONNECTED = frozenset(["StandAlone", "WFConnection", "Unconnected", "NetworkFailure",
                          "BrokenPipe", "Timeout", "Disconnecting", "ProtocolError",
                          "TearDown"])


class LUClusterVerify(NoHooksLU[OpClusterVerify]):
    """Submit the config job and one job per node group (or the given group)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        op = self.op
        jobs: list[list[dict[str, Any]]] = []
        if op.group_name is None:
            groups = sorted(g.name for g in self.cfg.get_all_nodegroups_info().values())
            jobs.append([opcodes.to_dict(OpClusterVerifyConfig(
                error_codes=op.error_codes, debug_simulate_errors=op.debug_simulate_errors,
                ignore_errors=list(op.ignore_errors), verbose=op.verbose))])
        else:
            groups = [expand_group(self.cfg, op.group_name).name]
        for name in groups:
            vop = OpClusterVerifyGroup(
                group_name=name, skip_checks=list(op.skip_checks),
                verify_clutter=op.verify_clutter, error_codes=op.error_codes,
                debug_simulate_errors=op.debug_simulate_errors,
                ignore_errors=list(op.ignore_errors), verbose=op.verbose)
            jobs.append([opcodes.to_dict(vop)])
        return {"jobs": self.proc.submit_many_jobs(jobs)}


class LUClusterVerifyDisks(NoHooksLU[OpClusterVerifyDisks]):
    """Submit one OP_GROUP_VERIFY_DISKS job per node group (or the given group)."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        if self.op.group_name is None:
            groups = sorted(g.name for g in self.cfg.get_all_nodegroups_info().values())
        else:
            groups = [expand_group(self.cfg, self.op.group_name).name]
        jobs = [[opcodes.to_dict(OpGroupVerifyDisks(group_name=name, priority=self.op.priority))]
                for name in groups]
        return {"jobs": self.proc.submit_many_jobs(jobs)}


class LUClusterVerifyConfig(NoHooksLU[OpClusterVerifyConfig]):
    """Verify the configuration itself and the master's certificate."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> bool:
        rep = Reporter(self.op, feedback_fn)
        feedback_fn("* Verifying cluster config")
        problems = self.cfg.verify_config()
        for msg in problems:
            rep.report("ECLUSTERCFG", OT_CLUSTER, "", msg)
        if not problems:
            rep.error_if(False, "ECLUSTERCFG", OT_CLUSTER, "", "simulated configuration error")
        feedback_fn("* Verifying cluster certificate files")
        paths = self.context.paths
        for msg in crypto.verify_cert(paths.server_pem):
            expiring = "expires in" in msg
            rep.report("ECLUSTERCERT", OT_CLUSTER, "", msg, warning=expiring)
        feedback_fn("* Verifying hypervisor parameters")
        cluster = self.cfg.get_cluster_info()
        master = self.cfg.get_master_node_name()
        for template, code, path in (
                (constants.DT_FILE, "ENODEFILESTORAGEPATHUNUSABLE", cluster.file_storage_dir),
                (constants.DT_SHARED_FILE, "ENODESHAREDFILESTORAGEPATHUNUSABLE",
                 cluster.shared_file_storage_dir)):
            if template in cluster.enabled_disk_templates:
                problem = file_storage_path_problem(path or "")
                rep.error_if(problem, code, OT_NODE, master, problem)
        for hv in cluster.hvparams:
            rep.error_if(hv not in constants.HYPER_TYPES, "ECLUSTERCFG", OT_CLUSTER, "",
                         f"unknown hypervisor '{hv}' in the cluster hypervisor parameters")
        return not rep.bad


_sha1 = uio.file_checksum


class LUClusterVerifyGroup(NoHooksLU[OpClusterVerifyGroup]):
    """Verify the nodes of one node group against each other and the master."""

    REQ_BGL = False
    VERIFY_HPATH = "cluster-verify"

    def ExpandNames(self) -> None:
        self.group = expand_group(self.cfg, self.op.group_name)
        self.needed_locks = {locking.LEVEL_NODEGROUP: [self.group.uuid],
                             locking.LEVEL_NODE: []}
        self.share_locks = {locking.LEVEL_NODEGROUP: 1, locking.LEVEL_NODE: 1}

    def DeclareLocks(self, level: int) -> None:
        if level == locking.LEVEL_NODE:
            self.needed_locks[locking.LEVEL_NODE] = sorted(
                n.uuid for n in self.cfg.get_all_nodes_info().values()
                if n.group == self.group.uuid)

    # -- helpers ---------------------------------------------------------------
    def _file_lists(self) -> tuple[list[str], list[str]]:
        """``(files for every node, files only for candidates)`` as local paths."""
        paths = self.context.paths
        everywhere = [p for p in [paths.server_pem] if os.path.exists(p)]
        everywhere += sorted(glob.glob(paths.ssconf_file("*")))
        return everywhere, [paths.config_file]

    def _check_files(self, rep: Reporter, nodes: list[Any], answers: dict[str, Any],
                     master_sums: dict[str, str | None], cand_files: list[str]) -> None:
        paths = self.context.paths
        for path, master_sum in sorted(master_sums.items()):
            canonical = to_canonical(paths.root, path)
            only_mc = path in cand_files
            missing, differ = [], []
            for node in nodes:
                if only_mc and not node.master_candidate:
                    continue
                data = answers.get(node.name)
                if data is None:
                    continue
                node_sum = (data.get("filelist") or {}).get(canonical)
                if node_sum is None:
                    missing.append(node.name)
                elif master_sum is not None and node_sum != master_sum:
                    differ.append(node.name)
            rep.error_if(missing, "ECLUSTERFILECHECK", OT_CLUSTER, "",
                         f"File {canonical} is missing from node(s) {', '.join(missing)}")
            rep.error_if(differ, "ECLUSTERFILECHECK", OT_CLUSTER, "",
                         f"File {canonical} differs from the master's copy on node(s)"
                         f" {', '.join(differ)}")

    def _check_volumes(self, rep: Reporter, nodes: list[Any], answers: dict[str, Any],
                       vg: str) -> None:
        """Missing VG, missing/wrong-sized/orphan volumes (doc/storage.md)."""
        expected: dict[str, dict[str, tuple[str, int]]] = {}
        for inst in self.cfg.get_all_instances_info().values():
            for disk in (d for top in self.cfg.get_instance_disks(inst.uuid)
                         for d in disk_tree(top)):
                if disk.dev_type == constants.DT_PLAIN and len(disk.logical_id) == 2 \
                        and disk.logical_id[0] == vg:
                    for uuid in disk.nodes or [inst.primary_node]:
                        expected.setdefault(uuid, {})[str(disk.logical_id[1])] = \
                            (inst.name, disk.size)
        for node in nodes:
            if node.name not in answers or not node.vm_capable:
                continue
            found = answers[node.name].get("lvlist")
            if not isinstance(found, dict):
                rep.report("ENODELVM", OT_NODE, node.name, f"LVM problem on node: {found}")
                continue
            for p in lvm.volume_problems(node.name, vg, expected.get(node.uuid, {}), found):
                rep.report(p.code, p.otype, p.name, p.message, warning=p.warning)

    def _mirror_disks(self) -> dict[str, list[tuple[Any, int, Any]]]:
        """``{node uuid: [(instance, index, disk), ...]}`` of every DRBD disk by node."""
        found: dict[str, list[tuple[Any, int, Any]]] = {}
        for inst in self.cfg.get_all_instances_info().values():
            for idx, disk in enumerate(self.cfg.get_instance_disks(inst.uuid)):
                if drbd.is_drbd(disk) and len(disk.logical_id) >= 5:
                    for uuid in disk.logical_id[:2]:
                        found.setdefault(uuid, []).append((inst, idx, disk))
        return found

    def _check_mirrors(self, rep: Reporter, nodes: list[Any]) -> None:
        """Degraded, resyncing, inactive and two-primary DRBD disks (``EINSTANCEFAULTYDISK``,
        a resync a warning), and minors in use that no disk owns (``ENODEDRBD``)."""
        rpc = self.require_rpc()
        by_node = self._mirror_disks()
        # one fan-out each: the nodes' DRBD facts, then their sides of the disks
        infos = rpc.call_drbd_node_info([n.name for n in nodes]) if nodes else {}
        wanted_disks = {n.name: [drbd.rpc_disk(d, self.cfg) for _, _, d in by_node[n.uuid]]
                        for n in nodes if by_node.get(n.uuid)}
        states = rpc.per_node(wanted_disks, lambda r, name: r.call_blockdev_getmirrorstatus(
            name, disks=wanted_disks[name])) if wanted_disks else {}
        wanted = self.cfg.get_cluster_info().drbd_usermode_helper
        #: (instance, disk index) -> (node, connection state) of each answering side
        sides: dict[tuple[str, int], list[tuple[str, str]]] = {}
        for node in nodes:
            entries = by_node.get(node.uuid, [])
            info = infos.get(node.name)
            if info is None or info.failed or not isinstance(info.payload, dict):
                rep.report("ENODEDRBD", OT_NODE, node.name, "cannot read the node's DRBD"
                           f" state: {info.fail_msg if info is not None else 'no answer'}")
                continue
            if entries and not info.payload.get("version"):
                rep.report("ENODEDRBD", OT_NODE, node.name,
                           "the DRBD kernel module is not loaded")
                continue
            helper = info.payload.get("helper")
            rep.error_if(wanted and info.payload.get("version") and helper != wanted,
                         "ENODEDRBDHELPER", OT_NODE, node.name,
                         f"wrong drbd usermode helper: {helper} (the cluster wants {wanted})")
            owned = {disk.logical_id[3] if disk.logical_id[0] == node.uuid
                     else disk.logical_id[4] for _, _, disk in entries}
            for minor in info.payload.get("minors") or []:
                rep.error_if(minor not in owned, "ENODEDRBD", OT_NODE, node.name,
                             f"unallocated drbd minor {minor} is in use")
            if not entries:
                continue
            res = states.get(node.name)
            if res is None or res.failed or not isinstance(res.payload, list) \
                    or len(res.payload) != len(entries):
                rep.report("ENODEDRBD", OT_NODE, node.name, "cannot read the state of its"
                           f" DRBD disks: {res.fail_msg if res is not None else 'no answer'}")
                continue
            for (inst, idx, disk), state in zip(entries, res.payload):
                self._check_mirror(rep, node, inst, idx, state)
                if isinstance(state, dict):
                    sides.setdefault((inst.name, idx), []).append(
                        (node.name, str((state.get("drbd") or {}).get("cstate"))))
        for (name, idx), seen in sorted(sides.items()):
            # both ends up, one StandAlone and neither connected: DRBD dropped the
            # connection and stays off (a split brain: their data diverged; the
            # other end may wait for it again, activated by verify-disks or the
            # watcher); neither resyncs by itself
            conns = [c for _, c in seen]
            rep.error_if(len(seen) == 2 and "StandAlone" in conns
                         and all(c in _UNCONNECTED for c in conns),
                         "EINSTANCEFAULTYDISK", OT_INSTANCE, name,
                         f"disk/{idx} is not connected ("
                         + ", ".join(f"{c} on {n}" for n, c in seen)
                         + "): DRBD refuses to connect its sides (a split brain: each may"
                         " hold writes the other lacks); keep the primary's data with"
                         " 'gnt-instance replace-disks -s', or fail over first to keep the"
                         " secondary's")

    def _check_mirror(self, rep: Reporter, node: Any, inst: Any, idx: int, state: Any) -> None:
        if not isinstance(state, dict):
            return       # its volumes are missing: the volume check reports that
        should_run = inst.admin_state == constants.ADMINST_UP or inst.disks_active
        what = f"disk/{idx} on node {node.name}"
        mirror = state.get("drbd") or {}
        cstate = mirror.get("cstate")
        primary = inst.primary_node == node.uuid
        if cstate == "Unconfigured":
            rep.error_if(should_run, "EINSTANCEFAULTYDISK", OT_INSTANCE, inst.name,
                         f"{what} is not active")
            return
        if mirror.get("mismatch"):
            rep.report("EINSTANCEFAULTYDISK", OT_INSTANCE, inst.name,
                       f"{what} {mirror['mismatch']}")
        if not should_run:
            return
        if isinstance(state.get("sync_percent"), (int, float)):
            eta = state.get("estimated_time")
            rep.report("EINSTANCEFAULTYDISK", OT_INSTANCE, inst.name,
                        f"{what} is resyncing: {state['sync_percent']:.1f}% done"
                        + (f", {eta}s remaining" if eta is not None else ""), warning=True)
        elif state.get("is_degraded"):
            rep.report("EINSTANCEFAULTYDISK", OT_INSTANCE, inst.name,
                       f"{what} is degraded (connection {cstate}, disks"
                       f" {mirror.get('disk')}/{mirror.get('peer_disk')})")
        if state.get("ldisk_status") == constants.LDS_FAULTY:
            rep.report("EINSTANCEFAULTYDISK", OT_INSTANCE, inst.name,
                       f"{what}: the local disk is faulty ({mirror.get('disk')})")
        if not primary and mirror.get("role") == "Primary":
            rep.report("EINSTANCEFAULTYDISK", OT_INSTANCE, inst.name,
                       f"{what} is primary, but node {node.name} is the instance's secondary")

    def _run_hooks(self, rep: Reporter, nodes: list[Any], feedback_fn: FeedbackFn) -> None:
        runner = getattr(self.context, "hooks_runner", None)
        if runner is None or not hasattr(runner, "run_path"):
            return
        cluster = self.cfg.get_cluster_info()
        env: dict[str, Any] = {"CLUSTER_TAGS": " ".join(sorted(cluster.tags))}
        for node in nodes:
            env[f"NODE_TAGS_{node.name}"] = " ".join(sorted(node.tags))
        names = [n.name for n in nodes if not n.offline]
        results = runner.run_path(self, self.VERIFY_HPATH, constants.HTYPE_CLUSTER,
                                  constants.HOOKS_PHASE_POST, env, names)
        for node_name, entries in sorted(results.items()):
            for script, status, output in entries:
                if status == constants.HKR_FAIL:
                    text = output.strip().replace("\n", "\n      ")
                    rep.report("ENODEHOOKS", OT_NODE, node_name,
                               f"Script {script} failed, output: {text}")

    def _check_instance_policy(self, rep: Reporter, nodes: list[Any],
                               feedback_fn: FeedbackFn) -> None:
        """Warn about the group's instances that break its policy (EINSTANCEPOLICY)."""
        members = {n.uuid for n in nodes}
        instances = sorted((i for i in self.cfg.get_all_instances_info().values()
                            if i.primary_node in members), key=lambda i: i.name)
        if not instances:
            return
        feedback_fn("* Verifying instance policies")
        group_policy = policy.group_policy(self.cfg, self.group)
        for inst in instances:
            found = policy.instance_violations(self.cfg, inst, group_policy)
            rep.error_if(found, "EINSTANCEPOLICY", OT_INSTANCE, inst.name,
                         ipolicy.format_violations(found), warning=True)

    def _kvm_firmware_needs(self, cluster: Any, online: list[Any]) -> list[str]:
        """``uefi``/``tpm2`` when the cluster's kvm defaults or a kvm instance of the
        group's nodes uses them: each node must then have OVMF/swtpm (doc/kvm.md)."""
        if constants.HT_KVM not in cluster.enabled_hypervisors:
            return []
        uuids = {n.uuid for n in online}
        hvps = [parameters.fill_hvparams(cluster, constants.HT_KVM)] + [
            parameters.fill_instance_hvparams(cluster, inst)
            for inst in self.cfg.get_all_instances_info().values()
            if inst.hypervisor == constants.HT_KVM and inst.primary_node in uuids]
        return sorted({need for h in hvps for need in firmware_state.kvm_firmware_needs(h)})

    def _check_firmware_states(self, rep: Reporter, nodes: list[Any],
                               answers: dict[str, Any]) -> None:
        """A warning per kvm UEFI/TPM state directory no instance on that node
        owns (``ENODEORPHANFIRMWARE``, doc/kvm.md), as orphan volumes are."""
        instances = self.cfg.get_all_instances_info()
        inodes = {u: self.cfg.get_instance_nodes(u) for u in instances}
        for node in nodes:
            keys = (answers.get(node.name) or {}).get("kvm_firmware_states")
            if not isinstance(keys, list):
                continue
            for key, why in firmware_state.orphans([str(k) for k in keys], node.uuid,
                                                   instances, inodes):
                rep.report("ENODEORPHANFIRMWARE", OT_NODE, node.name,
                           f"orphan UEFI/TPM state kvm-firmware/{key} ({why})", warning=True)

    # -- main ------------------------------------------------------------------
    def Exec(self, feedback_fn: FeedbackFn) -> bool:  # noqa: C901 - a list of checks
        rep = Reporter(self.op, feedback_fn)
        cfg, rpc = self.cfg, self.rpc
        cluster = cfg.get_cluster_info()
        nodes = sorted((n for n in cfg.get_all_nodes_info().values()
                        if n.group == self.group.uuid), key=lambda n: n.name)
        online = [n for n in nodes if not n.offline]
        for node in nodes:
            if node.offline:
                feedback_fn(f"* Skipping offline node {node.name}")
        self._check_instance_policy(rep, nodes, feedback_fn)
        if rpc is None:
            rep.report("ENODERPC", OT_GROUP, self.group.name,
                       "node RPC is not available on this master", warning=True)
            return not rep.bad
        everywhere, cand_files = self._file_lists()
        paths = self.context.paths
        node_port = getattr(getattr(rpc, "resolver", None), "port", None)
        nodelist = [[n.name, n.primary_ip] + ([node_port] if node_port else [])
                    for n in online]
        files = [to_canonical(paths.root, p) for p in everywhere + cand_files]
        checks: dict[str, Any] = {"version": None, "filelist": files, "nodelist": nodelist,
                                  "hooks": None, "time": None, "hostname": None,
                                  "cluster_name": None}
        oob_paths = sorted({parameters.fill_ndparams(cluster, self.group, n).get("oob_program")
                            or "" for n in online} - {""})
        if oob_paths:
            checks["oob_paths"] = oob_paths
        vg = cluster.volume_group_name if any(
            t in constants.DTS_LVM for t in cluster.enabled_disk_templates) else None
        if vg:
            checks["lvlist"] = vg
        kvm_needs = self._kvm_firmware_needs(cluster, online)
        if kvm_needs:
            checks["kvm_firmware"] = kvm_needs
        if constants.HT_KVM in cluster.enabled_hypervisors:
            checks["kvm_firmware_states"] = None
        feedback_fn(f"* Gathering data ({len(online)} nodes)")
        before = {p: _sha1(p) for p in everywhere + cand_files}
        start = time.time()
        results = rpc.call_node_verify(
            [n.name for n in online], checks=checks, cluster_name=cluster.cluster_name) if online else {}
        end = time.time()
        after = {p: _sha1(p) for p in everywhere + cand_files}
        # a file that changed on the master meanwhile (a concurrent job) is not compared
        master_sums = {p: s for p, s in after.items() if before.get(p) == s}
        feedback_fn("* Verifying node status")
        answers: dict[str, dict[str, Any]] = {}
        for node in online:
            res = results.get(node.name)
            msg = "no answer" if res is None else res.fail_msg
            if rep.error_if(msg, "ENODERPC", OT_NODE, node.name,
                            f"while contacting node: {msg}") or res is None:
                continue
            data = res.payload if isinstance(res.payload, dict) else {}
            answers[node.name] = data
            version = data.get("version")
            if not isinstance(version, list) or len(version) != 2:
                rep.error_if(True, "ENODEVERSION", OT_NODE, node.name,
                             "connection to node returned invalid data")
                continue
            rep.error_if(version[0] != constants.PROTOCOL_VERSION, "ENODEVERSION", OT_NODE,
                         node.name, f"incompatible protocol versions: master"
                         f" {constants.PROTOCOL_VERSION}, node {version[0]}")
            rep.error_if(version[1] != constants.RELEASE_VERSION, "ENODEVERSION", OT_NODE,
                         node.name, f"software version mismatch: master"
                         f" {constants.RELEASE_VERSION}, node {version[1]}", warning=True)
            ntime = data.get("time")
            if isinstance(ntime, (int, float)):
                skew = 0.0
                if ntime < start - NODE_MAX_CLOCK_SKEW:
                    skew = start - ntime
                elif ntime > end + NODE_MAX_CLOCK_SKEW:
                    skew = ntime - end
                rep.error_if(skew, "ENODETIME", OT_NODE, node.name,
                             f"Node time diverges by at least {skew:.1f}s from master node"
                             " time")
            else:
                rep.report("ENODETIME", OT_NODE, node.name, "Node returned invalid time")
            hostname = data.get("hostname")
            rep.error_if(hostname and hostname != node.name, "ENODESETUP", OT_NODE, node.name,
                         f"node reports its name as {hostname}")
            cname = data.get("cluster_name")
            rep.error_if(cname != cluster.cluster_name, "ENODESETUP", OT_NODE, node.name,
                         f"node belongs to cluster {cname!r}, not {cluster.cluster_name!r}")
            for other, err in sorted((data.get("nodelist") or {}).items()):
                rep.report("ENODENET", OT_NODE, node.name,
                           f"tcp communication with node '{other}': {err}")
            if node.master_candidate or node.master_capable:
                # as Ganeti: the out-of-band program runs on the master (candidates)
                for problem in data.get("oob_paths") or []:
                    rep.error_if(problem, "ENODEOOBPATH", OT_NODE, node.name, problem)
            for problem in data.get("kvm_firmware") or []:
                rep.report("ENODEHV", OT_NODE, node.name, str(problem))
        if "kvm_firmware_states" in checks:
            self._check_firmware_states(rep, online, answers)
        if vg:
            feedback_fn("* Verifying the volumes of volume group " + vg)
            self._check_volumes(rep, online, answers, vg)
        if constants.DT_DRBD8 in cluster.enabled_disk_templates:
            feedback_fn("* Verifying the DRBD mirrors")
            self._check_mirrors(rep, [n for n in online if n.name in answers])
            feedback_fn("* Verifying N+1 Memory redundancy")
            verify_n1.check(self, lambda code, name, msg: rep.report(code, OT_NODE, name, msg),
                            [n for n in online if n.name in answers])
        feedback_fn("* Verifying configuration file consistency")
        self._check_files(rep, online, answers, master_sums, cand_files)
        self._run_hooks(rep, online, feedback_fn)
        return not rep.bad
