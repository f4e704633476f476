"""Node loss recovery, the node's part (doc/ha.md, "Node loss recovery").

* A master candidate asked by the master whether it reaches a node the
  master no longer hears (:func:`ha_node_reachable`): its answer is one
  vote of the verdict of :func:`ganeti.ha.recovery.verdict`.
* Every node the master probes holds a *self-fence lease*
  (:func:`ha_lease`, recorded in ``var/lib/ganeti/ha_lease`` on the
  machine's monotonic clock): a node without out-of-band power control
  that is not renewed in time stops the instances the lease names (the
  ones the master would start elsewhere) itself (:func:`self_fence`, run by the node daemon's parent loop,
  :mod:`ganeti.server.selffence`) before the master, which waits the
  lease out, starts them elsewhere.
* A master candidate asked by the master to forward a lease to a node the
  master cannot reach itself (:func:`ha_lease_relay`): a node cut off from
  the master alone keeps its lease, so it does not stop its instances
  while nobody starts them elsewhere.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ganeti import constants, errors, hypervisor, serializer
from ganeti.backend import fencing
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import URGENT, procedure
from ganeti.pathutils import Paths
from ganeti.rpc.client import RpcRunner, StaticResolver, default_noded_port
from ganeti.rpc.transport import HttpsTransport
from ganeti.utils import io as uio

__all__ = ["ha_node_reachable", "ha_lease", "ha_lease_relay"]

logger = logging.getLogger(__name__)

#: the self-fence lease record, in the node's data directory
LEASE_FILE_NAME = "ha_lease"


@procedure(URGENT)
def ha_node_reachable(ctx: NodeContext, node: str, address: str,
                      timeout: float) -> dict[str, Any]:
    """Whether this node reaches the node daemon of node (at address; its version asked, waiting
    at most timeout seconds). -> {reachable, error}

    Whether this node reaches ``node``'s daemon at ``address``: it is asked for
    its protocol version over the cluster's mutual TLS, waiting at most
    ``timeout`` seconds.  ``{"reachable": bool, "error": text or ""}``."""
    port = default_noded_port()
    runner = RpcRunner(StaticResolver({node: (address, port, False)}, default_port=port),
                       HttpsTransport(ctx.paths.server_pem))
    result = runner.call_version([node], rpc_timeout=timeout)[node]
    if result.fail_msg:
        logger.info("Node loss check: %s (%s) not reachable: %s", node, address,
                    result.fail_msg)
        return {"reachable": False, "error": result.fail_msg}
    if result.payload != constants.PROTOCOL_VERSION:
        return {"reachable": True, "error": f"protocol version {result.payload}"}
    return {"reachable": True, "error": ""}


@procedure(URGENT, fenced=True)
def ha_lease_relay(ctx: NodeContext, node: str, address: str, master: str, lease: float,
                   instances: list, timeout: float) -> dict[str, Any]:
    """Forward the master's ha_lease to node (at address), which the master cannot reach itself:
    only for the master whose epoch this node accepted (the request's, fenced) and its ssconf
    names, with that epoch, the lease shortened by the time spent here, waiting at most timeout
    seconds. -> node's {lease, fenced}

    Forward ``master``'s :func:`ha_lease` to ``node`` (at ``address``), which the
    master cannot reach itself; ``node``'s answer.

    The node daemon checked the request's master epoch already (the procedure
    is fenced); this forwards only for ``master`` when it is the master whose
    epoch this node accepted and the one its ssconf names, and sends that
    epoch, so ``node`` checks it as it checks the master's own requests: no
    node but the master of the newest epoch extends a lease this way.  The
    lease is shortened by the time spent here before it is sent, and the
    call waits at most ``timeout`` seconds, so the lease never ends later on
    ``node`` than one the master sent directly at the moment this node got
    the request.  Raises :class:`errors.OpExecError` when ``node`` does not
    confirm, :class:`errors.NotMasterError` for another master."""
    start = time.monotonic()
    state = fencing.read_state(ctx)
    named = _ssconf_master(ctx)
    if not master or master != state["master"] or master != named:
        # not the Fenced: prefix: this is no epoch refusal (that one the node daemon
        # made already), and one candidate's lagging ssconf must not alarm the master
        raise errors.NotMasterError(
            f"ha_lease_relay for {master or 'unknown'} refused: this node"
            f" accepted epoch {state['epoch']} from {state['master'] or 'nobody'} and names"
            f" {named or 'nobody'} as the master")
    pairs = lease_instances(instances)
    if lease > 0:
        lease -= time.monotonic() - start
        if lease <= 0:
            raise errors.OpExecError(f"ha_lease_relay: the lease for {node} ran out here")
    port = default_noded_port()
    epoch = int(state["epoch"])
    runner = RpcRunner(StaticResolver({node: (address, port, False)}, default_port=port),
                       HttpsTransport(ctx.paths.server_pem), fence=lambda: (epoch, master))
    result = runner.call_ha_lease(
        [node], lease=max(0.0, lease),
        instances=[{"name": n, "hypervisor": h} for n, h in pairs], rpc_timeout=timeout)[node]
    if result.fail_msg:
        logger.info("Lease relay: %s (%s) did not confirm: %s", node, address, result.fail_msg)
        raise errors.OpExecError(f"ha_lease_relay: {node} did not confirm: {result.fail_msg}")
    if not isinstance(result.payload, dict):
        raise errors.OpExecError(f"ha_lease_relay: {node} answered {result.payload!r}")
    logger.info("Lease relay: %s's lease of %.1f s forwarded for %s (epoch %s)", node,
                max(0.0, lease), master, epoch)
    return dict(result.payload)


def _ssconf_master(ctx: NodeContext) -> str:
    """The master this node's ssconf names ("" when unreadable)."""
    try:
        return uio.read_file(ctx.paths.ssconf_file("master_node"), max_size=4096).decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def lease_file(paths: Paths) -> str:
    """Where the node records its self-fence lease."""
    return os.path.join(paths.data_dir, LEASE_FILE_NAME)


def read_lease(paths: Paths) -> dict[str, Any] | None:
    """The lease record ``{at, lease, instances, fenced}`` (None: none, released,
    or unreadable)."""
    try:
        raw = serializer.loads(uio.read_file(lease_file(paths), max_size=65536))
    except (OSError, errors.GanetiError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("at"), (int, float)) \
            or not isinstance(raw.get("lease"), (int, float)) or raw["lease"] <= 0:
        return None
    return raw


def lease_instances(raw: Any) -> list[tuple[str, str]]:
    """The ``(name, hypervisor)`` pairs of a lease's ``instances`` argument
    (``[{"name": ..., "hypervisor": ...}]``).

    Raises :class:`errors.HypervisorError` for an unknown hypervisor and
    :class:`errors.ProgrammerError` for an entry of another shape."""
    pairs: list[tuple[str, str]] = []
    for entry in raw or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
                or not isinstance(entry.get("hypervisor"), str):
            raise errors.ProgrammerError(f"ha_lease: bad instance entry {entry!r}")
        if entry["hypervisor"] not in constants.HYPER_TYPES:
            raise errors.HypervisorError(f"Unknown hypervisor {entry['hypervisor']!r}")
        pairs.append((entry["name"], entry["hypervisor"]))
    return pairs


@procedure(URGENT, fenced=True)
def ha_lease(ctx: NodeContext, lease: float, instances: list) -> dict[str, Any]:
    """The master's probe and this node's self-fence lease: from now, lease seconds (0: no
    lease, released) covering instances ([{name, hypervisor}]: the ones the master would
    recover); when it runs out unrenewed the node stops those still running. -> {lease, fenced}

    Renew (or with ``lease`` 0 release) this node's self-fence lease, from now.

    ``instances``: ``[{"name", "hypervisor"}]``, the instances the lease covers:
    the ones the master would start elsewhere, which :func:`self_fence` stops
    (those still running) when the lease runs out unrenewed; every other
    instance keeps running.  The answer says whether the node fenced itself
    since the lease before (``fenced``: when, on this machine's monotonic
    clock; None)."""
    pairs = lease_instances(instances)
    before = read_lease(ctx.paths)
    fenced = before.get("fenced") if before else None
    if lease <= 0:
        try:
            os.unlink(lease_file(ctx.paths))
        except FileNotFoundError:
            pass
        return {"lease": 0.0, "fenced": fenced}
    uio.write_file_atomic(lease_file(ctx.paths), serializer.dumps(
        {"at": time.monotonic(), "lease": float(lease),
         "instances": [{"name": n, "hypervisor": h} for n, h in pairs]}), mode=0o640)
    return {"lease": float(lease), "fenced": fenced}


def self_fence(paths: Paths, instances: list[tuple[str, str]]) -> list[str]:
    """Stop (hard) the ``(name, hypervisor)`` instances still running on this node;
    the names stopped.

    Only the instances the lease named are touched: the others were not to be
    started elsewhere, so stopping them would buy no safety.  Errors of one
    instance are logged and the others still stopped; the record gets
    ``fenced`` (the monotonic time), so the next renewal reports it."""
    stopped: list[str] = []
    by_hv: dict[str, list[str]] = {}
    for name, hv_name in instances:
        by_hv.setdefault(hv_name, []).append(name)
    for hv_name, names in by_hv.items():
        try:
            hv = hypervisor.get_hypervisor(hv_name, paths)
            running = set(hv.list_instances())
        except errors.GanetiError as exc:
            logger.error("Self-fence: hypervisor %s: %s", hv_name, exc)
            continue
        for inst in names:
            if inst not in running:
                continue
            try:
                hv.stop_instance(inst, force=True)
                stopped.append(inst)
            except errors.GanetiError as exc:
                logger.error("Self-fence: could not stop %s: %s", inst, exc)
    record = read_lease(paths)
    if record is not None:
        record["fenced"] = time.monotonic()
        uio.write_file_atomic(lease_file(paths), serializer.dumps(record), mode=0o640)
    return stopped
