"""OP_INSTANCE_CREATE with ``mode=remote-import``: receive the disks of an instance
moved from another cluster (doc/exports.md, "Moves between clusters").

The destination's side of Ganeti's inter-cluster move (upstream's
``move-instance`` drives both clusters through RAPI).  Once the new disks
exist on the primary node, :func:`remote_import_disks`

1. makes a transfer key on the primary node (``x509_cert_create``);
2. starts one listener per disk there (``impexp_listen``), each trusting
   only the source's certificate and expecting its own magic;
3. writes a ``remote-import`` entry to the job log: the disks' signed
   ``[host, port, magic, hmac, salt]`` and the signed certificate, which
   the source cluster's remote export needs;
4. follows the listeners in disk order (the source sends the disks one after
   the other): each must see its sender within
   :data:`~ganeti.cmdlib.backup_remote.CONNECT_TIMEOUT` seconds of the
   previous disk's end (the first, that plus the opcode's
   ``source_shutdown_timeout``) and then keep moving data
   (:data:`~ganeti.cmdlib.impexp.STALL_TIMEOUT`);
5. stops the listeners and removes the key, whatever happened.

A kvm instance whose own hvparams ask for ``firmware=uefi`` or
``tpm=tpm2`` (:func:`wants_firmware`) gets one listener more, after the
disks: the source's remote export sends its UEFI NVRAM and TPM state
there (a tar.gz, empty when it has none), unpacked into the new
instance's state directory (doc/exports.md, "Moves between clusters").

A failure raises :class:`errors.OpExecError`; the create LU then removes
the disks and the instance again.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import backup_remote, firmware_state
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.common import read_domain_secret
from ganeti.cmdlib.impexp import LOST_AFTER, POLL_INTERVAL, STALL_TIMEOUT, Stall
from ganeti.cmdlib.instance import instance_rpc_dict, with_secret_osparams
from ganeti.impexp import stream as diskstream
from ganeti.objects import Instance, Node
from ganeti.opcodes.instance import OpInstanceCreate

__all__ = ["remote_import_disks", "wants_firmware", "Listener", "LISTEN_TIMEOUT"]

#: the listeners' own bound (seconds): the master stops them long before
LISTEN_TIMEOUT = 86400.0


@dataclass
class Listener:
    """One disk's listener on the primary node."""

    index: int
    transfer_id: str
    port: int
    magic: str
    #: what the progress and messages call it (default ``disk/INDEX``)
    label: str = ""


def _status(lu: LogicalUnit[Any], node: str, transfer_id: str) -> dict[str, Any]:
    res = lu.require_rpc().call_impexp_status([node], ids=[transfer_id]).get(node)
    if res is None or res.failed or not isinstance(res.payload, list) or not res.payload:
        raise errors.RpcError(res.fail_msg if res is not None and res.fail_msg else "no answer")
    status = res.payload[0]
    if not isinstance(status, dict):
        raise errors.OpExecError(f"The listener of transfer {transfer_id} vanished on {node}")
    return status


def _follow(lu: LogicalUnit[Any], node: str, inst: str, listener: Listener,
            feedback_fn: FeedbackFn, *, clock: Callable[[], float],
            connect_timeout: float) -> None:
    """Wait for one disk's sender and its data; OpExecError when it fails or stalls."""
    label = listener.label or f"disk/{listener.index}"
    started = clock()
    connected = False
    with lu.progress_reporter("import", clock=clock, instance=inst, device=label) as reporter:
        stall = Stall(STALL_TIMEOUT, started)
        lost_since: float | None = None
        while True:
            try:
                status = _status(lu, node, listener.transfer_id)
                lost_since = None
            except errors.RpcError as exc:
                lost_since = lost_since if lost_since is not None else clock()
                if clock() - lost_since >= LOST_AFTER:
                    raise errors.OpExecError(f"{label}: node {node} stopped answering: {exc}"
                                             ) from None
                status = {"state": "unknown"}
            state = status.get("state")
            done, total = int(status.get("done") or 0), status.get("total")
            if state == "failed":
                raise errors.OpExecError(f"{label}: {status.get('error')}")
            if state == "done":
                elapsed = float(status.get("elapsed") or 0.0)
                reporter.update(done, int(total or done))
                feedback_fn(f"{label}: received {diskstream.format_progress(done, total, elapsed)}"
                            f", SHA-256 {str(status.get('sha256'))[:16]}... checked")
                return
            if state == "running" and not connected:
                connected = True
                feedback_fn(f"{label} is receiving data on {node}")
                stall = Stall(STALL_TIMEOUT, clock())
            if not connected and clock() - started >= connect_timeout:
                raise errors.OpExecError(f"{label}: the source did not connect within"
                                         f" {connect_timeout:.0f} s")
            if connected:
                reporter.update(done, int(total or 0))
                if stall.seen(done, clock()) and (not total or done < int(total)):
                    raise errors.OpExecError(f"{label}: no data arrived for"
                                             f" {STALL_TIMEOUT:.0f} s (after {done} bytes)")
            if lu.proc.wait_interrupt(POLL_INTERVAL):
                raise errors.OpExecError(f"{label}: import interrupted: the job was killed")


def wants_firmware(inst: Instance) -> bool:
    """Whether a remote import asks the source for the instance's UEFI/TPM state: a kvm
    instance whose own hvparams (what the move copies from the source instance)
    ask for ``firmware=uefi`` or ``tpm=tpm2``.  Not the cluster's defaults: a
    source whose instance does not name them (another Ganeti) would refuse
    the extra destination."""
    return inst.hypervisor == constants.HT_KVM and \
        bool(firmware_state.kvm_firmware_needs(inst.hvparams or {}))


def remote_import_disks(lu: LogicalUnit[OpInstanceCreate], inst: Instance, pnode: Node,
                        source_ca: str, feedback_fn: FeedbackFn, *,
                        clock: Callable[[], float] = time.monotonic,
                        connect_timeout: float = backup_remote.CONNECT_TIMEOUT) -> None:
    """Receive every disk of ``inst`` from the other cluster (see the module docstring).

    The first disk's sender gets ``connect_timeout`` plus the opcode's
    ``source_shutdown_timeout`` (the source stops its instance first, as in
    Ganeti); each later one ``connect_timeout`` from the previous disk's end.
    """
    cds = read_domain_secret(lu.context.paths)
    rpc, node = lu.require_rpc(), pnode.name
    feedback_fn(f"Generating X509 certificate on {node}")
    created = rpc.call_x509_cert_create(node, validity=backup_remote.CERT_VALIDITY).one(
        node, f"Cannot make the transfer key on {node}")
    key_name, cert_pem = str(created[0]), str(created[1])
    listeners: list[Listener] = []
    try:
        data = with_secret_osparams(instance_rpc_dict(lu.cfg, inst), lu.op.osparams_secret)
        base = secrets.token_hex(6)
        for idx in range(len(data["disks_info"])):
            magic = backup_remote.disk_magic(base, inst.name, idx)
            answer = rpc.call_impexp_listen(
                node, dest={"kind": "import", "instance": data, "index": idx,
                            "label": f"disk/{idx}"},
                host=pnode.primary_ip, key_name=key_name, ca=source_ca, magic=magic,
                timeout=LISTEN_TIMEOUT,
            ).one(node, f"disk/{idx}: cannot listen on {node}")
            listeners.append(Listener(idx, str(answer["id"]), int(answer["port"]), magic))
            feedback_fn(f"Disk {idx} is now listening")
        if wants_firmware(inst):
            # one more destination after the disks: the instance's UEFI/TPM state
            idx = len(listeners)
            magic = backup_remote.disk_magic(base, inst.name, idx)
            answer = rpc.call_impexp_listen(
                node, dest={"kind": "firmware", "instance_uuid": inst.uuid},
                host=pnode.primary_ip, key_name=key_name, ca=source_ca, magic=magic,
                timeout=LISTEN_TIMEOUT,
            ).one(node, f"the UEFI/TPM state: cannot listen on {node}")
            listeners.append(Listener(idx, str(answer["id"]), int(answer["port"]), magic,
                                      "firmware"))
            feedback_fn("The UEFI/TPM state is now listening")
        salt = backup_remote.new_salt()
        lu.proc.log(constants.ELOG_REMOTE_IMPORT, {
            "disks": [backup_remote.sign_disk_info(cds, salt, x.index, pnode.primary_ip,
                                                   x.port, x.magic) for x in listeners],
            "x509_ca": backup_remote.sign_certificate(cds, cert_pem,
                                                      backup_remote.new_salt()),
        })
        try:
            for listener in listeners:
                first = listener.index == 0
                _follow(lu, node, inst.name, listener, feedback_fn, clock=clock,
                        connect_timeout=connect_timeout
                        + (lu.op.source_shutdown_timeout if first else 0))
        except BaseException:
            if wants_firmware(inst):
                firmware_state.remove(lu, inst, [node])
            raise
    finally:
        for listener in listeners:
            res = rpc.call_impexp_cleanup([node], transfer_id=listener.transfer_id).get(node)
            if res is None or res.failed:
                lu.LogWarning(f"Could not stop the listener of disk/{listener.index} on"
                              f" {node}: {res.fail_msg if res else 'no answer'}")
        res = rpc.call_x509_cert_remove([node], name=key_name).get(node)
        if res is None or res.failed:
            lu.LogWarning(f"Could not remove the transfer key {key_name} on {node}:"
                          f" {res.fail_msg if res else 'no answer'}")
