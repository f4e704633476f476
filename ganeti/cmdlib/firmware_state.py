"""Moving a kvm instance's UEFI NVRAM and TPM state between nodes (doc/kvm.md, "UEFI and TPM").

The state lives on the node that runs the instance
(:mod:`ganeti.hypervisor.kvm.firmware`); before the instance starts on
another node (failover, move) or that node's qemu is started for an
incoming migration, the master copies it over with
``instance_firmware_get``/``instance_firmware_put``.  An instance with
``firmware=bios`` and ``tpm=none`` has none and nothing is sent.  Once the
instance runs (or, stopped, lives) on the new node, the copy on the node it
left is removed, but only when the new node received it (:func:`drop_left`):
a failed or skipped copy leaves the source's, perhaps the only one.
After ``migrate --cleanup`` (:func:`settle`) the side that keeps the
instance keeps its state and the other side's copy goes, once the keeping
side is known to have one.
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, parameters
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import LogicalUnit
from ganeti.objects import Instance

__all__ = ["kvm_firmware_needs", "has_state", "carry", "drop_left", "settle", "fetch", "restore",
           "remove", "remove_everywhere", "orphans"]


def kvm_firmware_needs(hvparams: dict[str, Any]) -> list[str]:
    """``uefi`` and/or ``tpm2``: which of OVMF and swtpm filled kvm hvparams use."""
    needs = []
    if hvparams.get("firmware") == constants.HT_KVM_FIRMWARE_UEFI:
        needs.append(constants.HT_KVM_FIRMWARE_UEFI)
    if hvparams.get("tpm") == constants.HT_KVM_TPM_TPM2:
        needs.append(constants.HT_KVM_TPM_TPM2)
    return needs


def has_state(lu: LogicalUnit[Any], inst: Instance) -> bool:
    """True for a kvm instance whose hvparams ask for UEFI or a TPM."""
    if inst.hypervisor != constants.HT_KVM:
        return False
    return bool(kvm_firmware_needs(parameters.fill_instance_hvparams(
        lu.cfg.get_cluster_info(), inst)))


def carry(lu: LogicalUnit[Any], inst: Instance, src: str, dst: str,
          feedback_fn: FeedbackFn, *, required: bool = False) -> bool:
    """Copy the instance's firmware state from node ``src`` to node ``dst``.

    Nothing to copy (the source never ran it with UEFI/TPM) is not an
    error.  A failure is a warning (the target then uses what it has, else
    a fresh NVRAM and TPM), or, ``required``, raises
    :class:`errors.OpExecError` (a migration or a move: the guest's state
    would be lost).  True when ``dst`` received the state: only then may
    ``src``'s copy go (:func:`drop_left`), else it may be the only one.
    """
    if src == dst or not has_state(lu, inst):
        return False
    rpc = lu.require_rpc()
    try:
        data = rpc.call_instance_firmware_get(src, instance_uuid=inst.uuid).one(
            src, f"Could not read the UEFI/TPM state of {inst.name} on {src}")
        if data is None:
            return False
        feedback_fn(f"* copying the UEFI/TPM state of {inst.name} to {dst}")
        rpc.call_instance_firmware_put(dst, instance_uuid=inst.uuid, data=str(data)).one(
            dst, f"Could not write the UEFI/TPM state of {inst.name} on {dst}")
    except errors.GanetiError as exc:
        if required:
            raise errors.OpExecError(str(exc)) from exc
        lu.LogWarning(f"{exc}; {dst} uses the state it has, else a fresh one")
        return False
    return True


def drop_left(lu: LogicalUnit[Any], inst: Instance, src: str, carried: bool) -> None:
    """Remove the stale copy on ``src``, the node the instance left, once it
    runs (or lives, stopped) elsewhere; only when :func:`carry` answered
    ``carried`` (the new node has the state).  A failure is a warning."""
    if carried:
        remove(lu, inst, [src])


def settle(lu: LogicalUnit[Any], inst: Instance, keep: str, drop: str) -> None:
    """After ``migrate --cleanup``: the instance lives on ``keep``, so the copy of
    its state on ``drop`` (the source it left, or the target a rolled-back
    migration received it on) is stale and goes.  Only when ``keep`` answers
    that it has the state: else ``drop``'s may be the only one, and stays
    (with a warning; verify then reports it as an orphan, doc/kvm.md).
    A failure is a warning; nothing happens for an instance without state."""
    if keep == drop or not has_state(lu, inst):
        return
    try:
        data = _read(lu, inst, keep)
    except errors.GanetiError as exc:
        lu.LogWarning(f"{exc}; the copy on {drop} is kept")
        return
    if data:
        _remove(lu, inst, [drop])
        return
    res = lu.require_rpc().call_instance_firmware_get([drop], instance_uuid=inst.uuid).get(drop)
    if res is None or res.failed or res.payload:
        # perhaps the only copy (an instance never started has none anywhere: no warning)
        lu.LogWarning(f"{keep} has no UEFI/TPM state of {inst.name}; the copy on {drop}"
                      " (if any) is kept")


def _read(lu: LogicalUnit[Any], inst: Instance, node: str) -> Any:
    """The instance's state as ``node`` gives it (falsy: none); an error when it cannot."""
    return lu.require_rpc().call_instance_firmware_get(
        node, instance_uuid=inst.uuid).one(node, f"Could not read the UEFI/TPM state of"
                                                 f" {inst.name} on {node}")


def remove_everywhere(lu: LogicalUnit[Any], inst: Instance) -> None:
    """On instance removal: remove a kvm instance's firmware state from every
    online node (a node it left while unreachable may still hold a copy)."""
    if inst.hypervisor != constants.HT_KVM:
        return
    nodes = [lu.cfg.get_node_info(u) for u in lu.cfg.get_online_node_list()]
    _remove(lu, inst, [n.name for n in nodes if n is not None])


def fetch(lu: LogicalUnit[Any], inst: Instance, node: str) -> str | None:
    """The instance's firmware state on ``node`` for an export (None: it has none).

    A node that cannot give it is a warning: the export goes on without it
    (an import then starts with a fresh NVRAM and TPM).
    """
    if not has_state(lu, inst):
        return None
    try:
        data = _read(lu, inst, node)
    except errors.GanetiError as exc:
        lu.LogWarning(f"{exc}; the export has none")
        return None
    return str(data) if data else None


def restore(lu: LogicalUnit[Any], inst: Instance, node: str, data: str | None,
            feedback_fn: FeedbackFn) -> None:
    """Put an export's firmware state on the imported instance's node ``node``; a
    failure is a warning (the instance then starts with a fresh NVRAM and TPM)."""
    if not data:
        return
    feedback_fn(f"* restoring the UEFI/TPM state of {inst.name} on {node}")
    try:
        lu.require_rpc().call_instance_firmware_put(
            node, instance_uuid=inst.uuid, data=data).one(
                node, f"Could not write the UEFI/TPM state of {inst.name} on {node}")
    except errors.GanetiError as exc:
        lu.LogWarning(f"{exc}; it starts with a fresh one")


def remove(lu: LogicalUnit[Any], inst: Instance, nodes: list[str]) -> None:
    """Remove the instance's firmware state from ``nodes``; failures are warnings."""
    if has_state(lu, inst):
        _remove(lu, inst, nodes)


def _remove(lu: LogicalUnit[Any], inst: Instance, nodes: list[str]) -> None:
    if not nodes:
        return
    results = lu.require_rpc().call_instance_firmware_remove(nodes, instance_uuid=inst.uuid)
    for node in nodes:
        res = results.get(node)
        if res is None or res.failed:
            lu.LogWarning(f"Could not remove the UEFI/TPM state of {inst.name} on {node}:"
                          f" {res.fail_msg if res else 'no answer'}")


def orphans(keys: list[str], node_uuid: str, instances: dict[str, Instance],
            instance_nodes: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The state directories on node ``node_uuid`` (``keys``: instance UUIDs, else
    names) that no instance placed on it owns: ``[(key, why), ...]`` (pure).

    ``instances`` by UUID, ``instance_nodes`` the UUIDs of each instance's
    primary and secondary nodes.  A state is an orphan when no instance has
    that UUID (or name), or when its instance lives on other nodes: a copy
    the node kept when the instance left it unreachable, or the target of a
    migration that was never cleaned up.
    """
    by_name = {inst.name: inst for inst in instances.values()}
    found = []
    for key in keys:
        inst = instances.get(key) or by_name.get(key)
        if inst is None:
            found.append((key, "no such instance"))
        elif node_uuid not in instance_nodes.get(inst.uuid, []):
            found.append((key, f"instance {inst.name} is not on this node"))
    return found
