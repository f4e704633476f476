"""Taking the master role: the steps of ``gnt-cluster master-failover`` and of a
master daemon's start-up vote.

doc/design/failover.md, "Takeover".  Every step is a function that does one
thing and reports what it did through ``out`` (one line per node); the
client (``ganeti.client.gnt_cluster_master``) runs them in order and starts
the daemons, the master daemon calls :func:`startup_vote`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ganeti import configfile, errors, serializer, ssconf
from ganeti.failover import catchup, quorum, vote
from ganeti.objects import ConfigData, Node
from ganeti.pathutils import Paths
from ganeti.replication import copy_queue
from ganeti.rpc.client import RpcRunner, StaticResolver, default_noded_port
from ganeti.rpc.defs import to_canonical
from ganeti.utils import io as uio
from ganeti.utils import payload

__all__ = ["Out", "load_local_config", "node_rpc", "master_ip_params", "check_taker",
           "stop_old_master", "write_takeover_config", "raise_queue_serial", "fence_majority",
           "push_config", "push_queue", "startup_vote"]

logger = logging.getLogger(__name__)

Out = Callable[[str], None]

#: seconds each takeover step may wait for a node (a dead node must not
#: stall the failover; the master daemon stop itself takes up to 15 s)
STEP_TIMEOUT = 20.0


class _Fence:
    """The epoch and master name a takeover's runner sends (set after the vote)."""

    def __init__(self, epoch: int, master: str) -> None:
        self.epoch = epoch
        self.master = master

    def __call__(self) -> tuple[int, str]:
        return self.epoch, self.master


def load_local_config(paths: Paths) -> ConfigData:
    """This node's copy of the configuration (:class:`errors.ConfigurationError`)."""
    return configfile.load_config_data(paths.config_file)


def _node_by_name(data: ConfigData, name: str) -> Node | None:
    return next((n for n in data.nodes.values() if n.name == name), None)


def node_rpc(paths: Paths, data: ConfigData, me: str, *, epoch: int | None = None,
             timeout_scale: float = 1.0) -> RpcRunner:
    """A runner reaching every node of ``data`` by its primary IP, sending
    ``epoch`` (default: the configuration's) as master ``me``."""
    from ganeti.rpc import defs
    from ganeti.rpc.transport import HttpsTransport
    port = default_noded_port()
    table = {n.name: (n.primary_ip, port, bool(n.offline)) for n in data.nodes.values()}
    timeouts = ({k: v * timeout_scale for k, v in defs.TIMEOUTS.items()}
                if timeout_scale != 1.0 else None)
    fence = _Fence(data.cluster.master_epoch if epoch is None else epoch, me)
    return RpcRunner(StaticResolver(table, default_port=port), HttpsTransport(paths.server_pem),
                     timeouts=timeouts, fence=fence)


def set_epoch(rpc: RpcRunner, epoch: int) -> None:
    """Make ``rpc`` (from :func:`node_rpc`) send ``epoch`` from now on."""
    fence = rpc.fence
    if not isinstance(fence, _Fence):
        raise errors.ProgrammerError("Not a takeover RPC runner")
    fence.epoch = epoch


def master_ip_params(data: ConfigData) -> dict[str, Any]:
    """``{uuid, name, ip, netmask, netdev, ip_family}`` of the master IP in ``data``."""
    cluster = data.cluster
    master = data.nodes.get(cluster.master_node)
    return {"uuid": cluster.master_node, "name": master.name if master else "",
            "ip": cluster.master_ip, "netmask": cluster.master_netmask,
            "netdev": cluster.master_netdev, "ip_family": cluster.primary_ip_family}


def check_taker(data: ConfigData, me: str) -> Node:
    """This node's entry; refuses a non-candidate or the current master."""
    node = _node_by_name(data, me)
    if node is None:
        raise errors.OpPrereqError(f"This node ({me}) is not in the cluster configuration",
                                   errors.ECODE_STATE)
    if data.cluster.master_node == node.uuid:
        raise errors.OpPrereqError(f"This node ({me}) is already the master",
                                   errors.ECODE_STATE)
    if not node.master_candidate or node.offline:
        raise errors.OpPrereqError(f"This node ({me}) is not an online master candidate; fail"
                                   " over to one of the candidates instead",
                                   errors.ECODE_STATE)
    return node


def stop_old_master(rpc: RpcRunner, data: ConfigData, out: Out) -> bool:
    """Stop the old master's daemons (``node_stop_master``); whether it confirmed."""
    params = master_ip_params(data)
    old = params["name"]
    if not old:
        out("old master: not in the configuration, nothing to stop")
        return False
    res = rpc.call("node_stop_master", [old],
                   [params, data.cluster.use_external_mip_script], timeout=STEP_TIMEOUT)[old]
    if res.fail_msg:
        out(f"{old}: could not stop the master daemons: {res.fail_msg}")
        return False
    payload = res.payload if isinstance(res.payload, dict) else {}
    what = [f"{d} {'stopped' if payload.get(k) else 'was not running'}"
            for d, k in (("ganeti-masterd", "masterd"), ("ganeti-rapi", "rapi"))]
    ip = payload.get("ip")
    what.append(f"master IP down failed: {ip}" if ip else "master IP down")
    out(f"{old}: {', '.join(what)}")
    return True


def write_takeover_config(paths: Paths, data: ConfigData, me: str, decision: vote.Decision,
                          clock: Callable[[], float] = time.time) -> ConfigData:
    """Write this node's configuration with itself as the master; the new data.

    ``master_node`` becomes this node, ``master_epoch`` and ``serial_no``
    the decision's (higher than any seen).
    """
    node = _node_by_name(data, me)
    if node is None:
        raise errors.OpPrereqError(f"This node ({me}) is not in the cluster configuration",
                                   errors.ECODE_STATE)
    now = clock()
    cluster = dataclasses.replace(data.cluster, master_node=node.uuid,
                                  master_epoch=decision.epoch, mtime=now,
                                  serial_no=data.cluster.serial_no + 1)
    new = dataclasses.replace(data, cluster=cluster, serial_no=decision.config_serial,
                              mtime=now)
    configfile.write_config_file(paths.config_file, serializer.dumps_bytes(new))
    ssconf.write_ssconf_files(paths, ssconf.compute_ssconf_values(new))
    return new


def raise_queue_serial(paths: Paths, serial: int) -> int:
    """Raise this node's queue serial to at least ``serial``; the serial now."""
    try:
        current = int(uio.read_file(paths.queue_serial_file).strip() or b"0")
    except (OSError, ValueError):
        current = 0
    if serial > current:
        os.makedirs(paths.queue_dir, exist_ok=True)
        uio.write_file_atomic(paths.queue_serial_file, f"{serial}\n", mode=0o640)
        return serial
    return current


def fence_majority(rpc: RpcRunner, data: ConfigData, me: str, epoch: int, reserve: int,
                   reserve_serial: int, out: Out) -> None:
    """Record the new epoch (and reservations) on a strict majority, or raise."""
    names = quorum.config_node_names(data)
    count, failed = quorum.renew_lease(rpc, names, me, epoch, reserve, reserve_serial,
                                       timeout=5.0)
    if count * 2 <= len(names):
        raise errors.NotMasterError(
            f"Only {count} of {len(names)} nodes accepted master epoch {epoch}: "
            + "; ".join(f"{n}: {m}" for n, m in sorted(failed.items())))
    out(f"master epoch {epoch} accepted by {count} of {len(names)} nodes")


def push_config(rpc: RpcRunner, paths: Paths, data: ConfigData, me: str,
                out: Out, skip: Mapping[str, str] | None = None) -> list[str]:
    """The new configuration to the candidates, ssconf to every other node; failures.

    Nodes in ``skip`` (those that did not answer the vote, with the reason)
    are not tried: they count as failed.
    """
    values = ssconf.compute_ssconf_values(data)
    raw = payload.encode_payload(serializer.dumps_bytes(data))
    skip = skip or {}
    for name in sorted(skip):
        out(f"{name}: not updated (no answer to the vote: {skip[name]})")
    online = [n for n in data.nodes.values()
              if n.name != me and not n.offline and n.name not in skip]
    candidates = sorted(n.name for n in online if n.master_candidate)
    others = sorted(n.name for n in online if not n.master_candidate)
    failed: list[str] = []
    if candidates:
        res = rpc.call("replicate_state", candidates,
                       [[to_canonical(paths.root, paths.config_file), raw], values, []],
                       timeout=STEP_TIMEOUT)
        bad = [name for name in candidates if res[name].fail_msg]
        failed += bad
        for name in candidates:
            out(f"{name}: " + (f"configuration and ssconf NOT updated: {res[name].fail_msg}"
                               if name in bad else
                               f"configuration (serial {data.serial_no}) and ssconf updated"))
    if others:
        res = rpc.call("write_ssconf_files", others, [values], timeout=STEP_TIMEOUT)
        bad = [name for name in others if res[name].fail_msg]
        failed += bad
        for name in others:
            out(f"{name}: " + (f"ssconf NOT updated: {res[name].fail_msg}" if name in bad
                               else "ssconf updated"))
    return failed + sorted(skip)


def push_queue(rpc: RpcRunner, paths: Paths, data: ConfigData, me: str, out: Out) -> list[str]:
    """This node's whole queue to every other online candidate; the nodes that failed."""
    names = sorted(n.name for n in data.nodes.values()
                   if n.name != me and n.master_candidate and not n.offline)
    failed = copy_queue(rpc, paths, names) if names else []
    for name in names:
        out(f"{name}: job queue {'NOT copied' if name in failed else 'copied'}")
    return failed


def startup_vote(paths: Paths, me: str, *, no_voting: bool, retry_for: float,
                 timeout_scale: float = 1.0, log: Out | None = None) -> vote.Decision:
    """The master daemon's vote before it starts (see doc/design/failover.md).

    Refuses (:class:`errors.NotMasterError` with the answers) when the
    configuration names another master or the vote does not confirm this
    node.  With ``no_voting`` the configuration is rewritten with a new
    epoch and a serial above any seen, and the queue serial raised, so
    that this node's pushes win everywhere.
    """
    data = load_local_config(paths)
    master = data.nodes.get(data.cluster.master_node)
    if master is None or master.name != me:
        if not no_voting:
            raise errors.NotMasterError(
                f"This node ({me}) is not the master in its configuration (the master is"
                f" {master.name if master else 'unknown'}); refusing to start")
    rpc = node_rpc(paths, data, me, timeout_scale=timeout_scale)
    if not no_voting:
        catchup.catch_up_before_startup(rpc, paths, data, me, log)
    decision = quorum.run_vote(rpc, data, me, mode=vote.MODE_STARTUP, no_voting=no_voting,
                               retry_for=retry_for, log=log)
    if not decision.ok:
        raise errors.NotMasterError(f"Master vote refused: {decision.message}")
    if no_voting:
        write_takeover_config(paths, data, me, decision)
        raise_queue_serial(paths, decision.queue_serial)
    return decision
