"""Taking the master role: the steps of ``gnt-cluster master-failover`` and of a
master daemon's start-up vote.

doc/design/failover.md, "Takeover".  Every step is a function that does one
thing and reports what it did through ``out`` (one line per node);
:func:`take_over` runs them in order (the client then starts the daemons),
the master daemon calls :func:`startup_vote`.

A takeover is resumable: once its claim won, a marker file
(:func:`marker_file`) records the epoch, and once the configuration is
written also the numbers decided; a rerun of ``gnt-cluster
master-failover``, the watcher or a plain ``ganeti-masterd`` start on the
taker sees the marker and finishes the takeover (or rolls it back when
another master won meanwhile) through :func:`take_over`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ganeti import errors, serializer, ssconf
from ganeti.config import file as configfile
from ganeti.failover import catchup, faultpoints, quorum, vote
from ganeti.failover.catchup import raise_queue_serial
from ganeti.failover.lease import (LEASE_DURATION, RESERVE_BLOCK, next_epoch,
                                   taker_rank)
from ganeti.objects import ConfigData, Node
from ganeti.pathutils import Paths
from ganeti.replication import copy_queue
from ganeti.rpc.client import RpcRunner, StaticResolver, default_noded_port
from ganeti.rpc import defs
from ganeti.rpc.defs import to_canonical
from ganeti.utils import io as uio
from ganeti.utils import payload

__all__ = ["Out", "load_local_config", "node_rpc", "master_ip_params", "check_taker",
           "stop_old_master", "write_takeover_config", "raise_queue_serial", "fence_majority",
           "push_config", "push_queue", "startup_vote", "Marker", "marker_file", "read_marker",
           "write_marker", "clear_marker", "claim_majority", "drain_old_master", "Outcome",
           "take_over", "TakeoverRefused", "DRAIN_SECONDS", "split_claims", "float_option",
           "release_claims", "step_timeout", "STEP_TIMEOUT", "MIN_STEP_TIMEOUT"]

logger = logging.getLogger(__name__)

Out = Callable[[str], None]

#: seconds each takeover step may wait for a node (a dead node must not
#: stall the failover; the master daemon stop itself takes up to 15 s);
#: scaled by ``--rpc-timeout-scale``, never below :data:`MIN_STEP_TIMEOUT`
STEP_TIMEOUT = 20.0
#: the shortest step timeout ``--rpc-timeout-scale`` gives (a master daemon stops
#: within it on a loaded test machine)
MIN_STEP_TIMEOUT = 5.0
#: seconds a taker waits, after stopping the old master, for a rival taker it
#: pre-empted to put back the configuration it wrote (doc/design/failover.md,
#: "Concurrent takers")
RIVAL_ROLLBACK_WAIT = 15.0
#: seconds the old master refuses submissions during a planned failover
#: (it accepts again by itself if the takeover gives up without telling it)
DRAIN_SECONDS = 30.0
MARKER_NAME = "takeover_in_progress"
_BACKUP_SUFFIX = ".pre-takeover"


class TakeoverRefused(errors.NotMasterError):
    """A takeover was refused, or lost to another taker; the text says what
    was left as it was (nothing, or a configuration restored)."""


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
    ``epoch`` (default: the configuration's) as master ``me``; its timeouts,
    the transport's and the steps' (:func:`step_timeout`) scaled by
    ``timeout_scale``."""
    from ganeti.rpc.transport import HttpsTransport
    port = default_noded_port()
    table = {n.name: (n.primary_ip, port, bool(n.offline)) for n in data.nodes.values()}
    fence = _Fence(data.cluster.master_epoch if epoch is None else epoch, me)
    return RpcRunner(StaticResolver(table, default_port=port),
                     HttpsTransport(paths.server_pem, timeout_scale=timeout_scale),
                     timeout_scale=timeout_scale, fence=fence)


def step_timeout(rpc: RpcRunner) -> float:
    """Seconds a takeover step may wait for a node: :data:`STEP_TIMEOUT` scaled
    by the runner's ``--rpc-timeout-scale``, at least :data:`MIN_STEP_TIMEOUT`."""
    return defs.scaled_timeout(STEP_TIMEOUT, rpc.timeout_scale, MIN_STEP_TIMEOUT)


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


def check_taker(data: ConfigData, me: str, *, allow_master: bool = False) -> Node:
    """This node's entry; refuses a non-candidate or (unless ``allow_master``,
    for ``--no-voting``) the master named by ``data``."""
    node = _node_by_name(data, me)
    if node is None:
        raise errors.OpPrereqError(f"This node ({me}) is not in the cluster configuration",
                                   errors.ECODE_STATE)
    if data.cluster.master_node == node.uuid and not allow_master:
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
    res = rpc.call_node_stop_master(
        [old], master_params=params, use_external_mip_script=data.cluster.use_external_mip_script,
        rpc_timeout=step_timeout(rpc))[old]
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
        res = rpc.call_replicate_state(
            candidates, config=[to_canonical(paths.root, paths.config_file), raw], ssconf_values=values,
            queue_files=[], rpc_timeout=step_timeout(rpc))
        bad = [name for name in candidates if res[name].fail_msg]
        failed += bad
        for name in candidates:
            out(f"{name}: " + (f"configuration and ssconf NOT updated: {res[name].fail_msg}"
                               if name in bad else
                               f"configuration (serial {data.serial_no}) and ssconf updated"))
    if others:
        res = rpc.call_write_ssconf_files(others, values=values, rpc_timeout=step_timeout(rpc))
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
        # a new epoch of its own (distinct from any taker's), recorded on every
        # node that answers by the daemon's first lease renewal
        epoch = next_epoch(decision.epoch - 1, taker_rank(quorum.config_node_names(data), me))
        decision = dataclasses.replace(decision, epoch=epoch)
        write_takeover_config(paths, data, me, decision)
        raise_queue_serial(paths, decision.queue_serial)
    return decision


# --- the resumable takeover (doc/design/failover.md, "Takeover") --------------

@dataclasses.dataclass(frozen=True)
class Marker:
    """A takeover in progress on this node: its claimed epoch and the old master;
    ``queue_serial``/``config_serial`` once the configuration is being written;
    ``stopped``: the old master confirmed that it stopped."""

    taker: str
    epoch: int
    old_master: str
    queue_serial: int | None = None
    config_serial: int | None = None
    stopped: bool = False


def marker_file(paths: Paths) -> str:
    """Where a takeover in progress on this node is recorded."""
    return os.path.join(paths.data_dir, MARKER_NAME)


def read_marker(paths: Paths) -> Marker | None:
    """The takeover in progress here, or None (:class:`errors.ConfigurationError`
    for a marker that cannot be read)."""
    try:
        raw = serializer.loads(uio.read_file(marker_file(paths)))
    except FileNotFoundError:
        return None
    except (OSError, errors.GanetiError) as exc:
        raise errors.ConfigurationError(f"Cannot read the takeover marker: {exc}") from exc
    try:
        return Marker(taker=str(raw["taker"]), epoch=int(raw["epoch"]),
                      old_master=str(raw.get("old_master") or ""),
                      queue_serial=raw.get("queue_serial"),
                      config_serial=raw.get("config_serial"),
                      stopped=bool(raw.get("stopped")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise errors.ConfigurationError(f"Invalid takeover marker {raw!r}") from exc


def write_marker(paths: Paths, marker: Marker) -> None:
    """Record ``marker`` (atomically, synced)."""
    os.makedirs(paths.data_dir, exist_ok=True)
    uio.write_file_atomic(marker_file(paths), serializer.dumps(dataclasses.asdict(marker)),
                          mode=0o600)


def clear_marker(paths: Paths) -> None:
    """The takeover is over: forget the marker and the configuration and queue serial
    backups."""
    for path in (marker_file(paths), paths.config_file + _BACKUP_SUFFIX,
                 paths.queue_serial_file + _BACKUP_SUFFIX):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def drain_old_master(rpc: RpcRunner, old: str, seconds: float, out: Out) -> bool:
    """Ask the old master to refuse submissions for ``seconds`` and flush its
    replication; whether it did (a dead or old master simply does not)."""
    res = rpc.call_master_drain([old], seconds=float(seconds), rpc_timeout=step_timeout(rpc))[old]
    if res.fail_msg:
        out(f"{old}: not drained ({res.fail_msg})")
        return False
    got = res.payload if isinstance(res.payload, dict) else {}
    if seconds > 0:
        out(f"{old}: accepts no new jobs now (last job id {got.get('last_job_id')}),"
            f" replication {'flushed' if got.get('flushed') else 'NOT flushed'}")
    return True


def _claim_round(rpc: RpcRunner, names: Sequence[str], me: str, epoch: int,
                 seen: int) -> tuple[int, dict[str, str]]:
    res = rpc.call_master_claim(
        list(names), master=me, epoch=epoch, seen=seen,
        rpc_timeout=min(5.0, rpc.timeouts[defs.CALLS["master_claim"].timeout]))
    ok = sum(1 for r in res.values() if not r.fail_msg)
    return ok, {n: r.fail_msg for n, r in res.items() if r.fail_msg}


#: claim rounds a taker tries before it gives up
CLAIM_ROUNDS = 3


def claim_majority(rpc: RpcRunner, names: Sequence[str], me: str, epoch: int, seen: int,
                   out: Out, *, sleep: Callable[[float], None] = time.sleep) -> int:
    """Claim a strict majority of ``names`` for ``epoch``; the epoch claimed.

    A node promises itself to one taker at a time, so at most one holds a
    majority.  A taker gives up (and releases the nodes it got) when a
    takeover finished meanwhile, another taker holds a majority, or
    another taker claims a newer epoch; otherwise (the nodes split between
    takers of lower epochs, who give up, or nodes did not answer) it asks
    again, at most :data:`CLAIM_ROUNDS` rounds.  Raises
    :class:`TakeoverRefused` (nothing stopped, nothing written) when this
    node does not win.
    """
    need = len(names) // 2 + 1
    for attempt in range(1, CLAIM_ROUNDS + 1):
        ok, failed = _claim_round(rpc, names, me, epoch, seen)
        if ok >= need:
            out(f"master epoch {epoch} claimed by {ok} of {len(names)} nodes")
            return epoch
        rivals = split_claims(failed)
        ahead = any("the taker saw" in m for m in failed.values())
        others = "; ".join(f"{n}: {m}" for n, m in sorted(failed.items()))
        hopeless = ahead or any(count >= need for count in rivals.values()) \
            or (bool(rivals) and max(rivals) > epoch)
        if attempt < CLAIM_ROUNDS and not hopeless:
            out(f"only {ok} of {len(names)} nodes accepted the claim ({others}); asking again")
            sleep(0.5 * attempt)
            continue
        release_claims(rpc, names, me)
        why = "another takeover got ahead" if hopeless else "too few nodes accepted it"
        raise TakeoverRefused(
            f"Failover given up: only {ok} of {len(names)} nodes accepted this node's claim"
            f" of master epoch {epoch}; {why} ({others}). Nothing was"
            " stopped or written here; gnt-cluster getmaster names the master once it is done")
    raise errors.ProgrammerError("unreachable")


def release_claims(rpc: RpcRunner, names: Sequence[str], me: str) -> None:
    """Release this taker's claims (best effort: an unreleased one expires)."""
    rpc.call_master_claim(list(names), master=me, epoch=0, seen=0, rpc_timeout=5.0)


_RIVAL_CLAIM = re.compile(r"epoch (\d+) accepted from \S+; claimed by another taker")


def split_claims(failed: Mapping[str, str]) -> dict[int, int]:
    """``{rival epoch: nodes it holds}`` from claim refusals by other takers'
    claims (refusals for an epoch already accepted, and failures, are not counted)."""
    out: dict[int, int] = {}
    for message in failed.values():
        match = _RIVAL_CLAIM.search(message)
        if match:
            out[int(match.group(1))] = out.get(int(match.group(1)), 0) + 1
    return out


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What :func:`take_over` did: the old master, whether it confirmed its stop,
    the epoch taken, the nodes not updated, and whether it resumed a takeover."""

    old: str
    stopped: bool
    epoch: int
    failed: list[str]
    resumed: bool = False


def float_option(args: Sequence[str], name: str, default: float) -> float:
    """The value of ``name VALUE`` among master daemon arguments, else ``default``."""
    for idx, arg in enumerate(args[:-1]):
        if arg == name:
            try:
                return float(args[idx + 1])
            except ValueError:
                return default
    return default


def _restore(paths: Paths, marker: Marker, out: Out) -> None:
    """Lost to another master after writing our configuration: put the old one back."""
    backup = paths.config_file + _BACKUP_SUFFIX
    try:
        current = load_local_config(paths)
    except errors.GanetiError:
        current = None
    if current is not None and current.cluster.master_epoch != marker.epoch:
        out("this node's configuration was replaced by the new master's already")
    elif os.path.exists(backup):
        raw = uio.read_file(backup)
        configfile.write_config_file(paths.config_file, raw)
        old = configfile.load_config_data(paths.config_file)
        ssconf.write_ssconf_files(paths, ssconf.compute_ssconf_values(old))
        out("this node's previous configuration and ssconf restored")
        _restore_queue_serial(paths, marker)
    clear_marker(paths)


def _restore_queue_serial(paths: Paths, marker: Marker) -> None:
    """Put back the queue serial this takeover raised (no master daemon ran with it),
    unless it changed since: otherwise this node looks newer to the next vote."""
    backup = paths.queue_serial_file + _BACKUP_SUFFIX
    try:
        previous = uio.read_file(backup)
        current = int((uio.read_regular_file(paths.queue_serial_file) or b"0").strip() or b"0")
    except (OSError, ValueError, errors.GanetiError):
        return
    if marker.queue_serial is not None and current == marker.queue_serial:
        uio.write_file_atomic(paths.queue_serial_file, previous, mode=0o640)


def _finish(paths: Paths, me: str, marker: Marker, out: Out, *, no_voting: bool,
            timeout_scale: float, lease: float, sleep: Callable[[float], None],
            skip: Mapping[str, str] | None = None, resumed: bool = False) -> Outcome:
    """The steps after the numbers were decided: config (again if needed),
    epoch on a majority, the push; then the marker goes."""
    data = load_local_config(paths)
    taker = _node_by_name(data, me)
    if taker is None or data.cluster.master_node != taker.uuid \
            or data.cluster.master_epoch != marker.epoch:
        data = write_takeover_config(paths, data, me, vote.Decision(
            True, "resumed", "resumed", config_serial=marker.config_serial or 0,
            epoch=marker.epoch))
    catchup.clear_drain_flag(paths, out)
    serial = raise_queue_serial(paths, marker.queue_serial or 0)
    out(f"{me}: configuration serial {data.serial_no}, master epoch {marker.epoch},"
        f" next job id {serial + 1}")
    rpc = node_rpc(paths, data, me, epoch=marker.epoch, timeout_scale=timeout_scale)
    try:
        fence_majority(rpc, data, me, marker.epoch, serial + RESERVE_BLOCK,
                       data.serial_no + RESERVE_BLOCK, out)
    except errors.NotMasterError as exc:
        if not no_voting:
            _restore(paths, marker, out)
            release_claims(rpc, quorum.config_node_names(data), me)
            raise TakeoverRefused(f"Failover given up: {exc}. Another master took over"
                                  " meanwhile (gnt-cluster getmaster names it)") from exc
        out(f"Warning: --no-voting: {exc}")
    faultpoints.reached("after_epoch_record")
    if not marker.stopped:
        out(f"waiting {lease:g}s for the master lease of {marker.old_master} to run out")
        sleep(lease + 0.5)
    failed = push_config(rpc, paths, data, me, out, skip=skip)
    faultpoints.reached("after_config_push")
    if no_voting:
        failed += push_queue(rpc, paths, data, me, out)
    # the claims held other takers off while this one took over
    # (doc/design/failover.md, "Concurrent takers")
    release_claims(rpc, quorum.config_node_names(data), me)
    clear_marker(paths)
    return Outcome(marker.old_master, marker.stopped, marker.epoch, failed, resumed)


def _configured_master(paths: Paths) -> str:
    """The master named by this node's configuration now ("" when none)."""
    data = load_local_config(paths)
    master = data.nodes.get(data.cluster.master_node)
    return master.name if master is not None else ""


def _check_not_taken(rpc: RpcRunner, paths: Paths, names: Sequence[str], me: str,
                     old: str) -> None:
    """After the claim won, before anything is stopped: the configuration still
    names ``old``.

    Another taker that finished (pushed its configuration, here too, then
    released its claims) before this one's claim reached its nodes leaves
    them free to promise themselves again; stopping ``old`` then would hand
    its node daemon this taker's newer epoch, and the winner's master daemon
    would refuse to start at that sight (doc/design/failover.md, "Concurrent
    takers").  Gives up (claims released), having stopped and written nothing.
    """
    now = _configured_master(paths)
    if now != old:
        release_claims(rpc, names, me)
        raise TakeoverRefused(
            f"Failover given up: {now or 'another node'} took over meanwhile (this node's"
            f" configuration names {now or 'no master'} now, not {old}). Nothing was stopped"
            " or written here; gnt-cluster getmaster names the master")


def _check_still_ours(rpc: RpcRunner, paths: Paths, names: Sequence[str], me: str,
                      epoch: int, seen: int, old: str) -> None:
    """Before writing: the configuration still names ``old`` (no other taker won and
    pushed meanwhile) and a majority still holds this taker's claim (renewed: the
    steps since it was made may have taken a good part of its lifetime)."""
    now = _configured_master(paths)
    why = ""
    if now != old:
        why = f"the configuration names {now or 'no master'} now, not {old}"
    else:
        ok, failed = _claim_round(rpc, names, me, epoch, seen)
        if ok < len(names) // 2 + 1:
            why = (f"only {ok} of {len(names)} nodes still hold this node's claim ("
                   + "; ".join(f"{n}: {m}" for n, m in sorted(failed.items())) + ")")
    if why:
        release_claims(rpc, names, me)
        clear_marker(paths)
        raise TakeoverRefused(f"Failover given up after stopping {old}: {why}. Nothing was"
                              " written here; gnt-cluster getmaster names the master")


def take_over(paths: Paths, me: str, *, no_voting: bool = False, out: Out,
              timeout_scale: float = 1.0, lease: float = LEASE_DURATION,
              sleep: Callable[[float], None] = time.sleep, drain: bool = True) -> Outcome:
    """Make this node the master, up to (not including) starting its daemons.

    ``drain=False`` skips draining the old master (the autopromotion, whose
    candidates found it silent: doc/ha.md, "Master autopromotion").

    Resumes a takeover recorded by :func:`read_marker`.  Raises
    :class:`TakeoverRefused` when the vote refuses or another taker wins
    (with what was left as it was), :class:`errors.OpPrereqError` when this
    node cannot take over at all.
    """
    marker = read_marker(paths)
    if marker is not None and marker.taker != me:
        clear_marker(paths)   # a copied data directory: not ours
        marker = None
    if marker is not None and marker.queue_serial is not None:
        out(f"Resuming the takeover of master epoch {marker.epoch} (interrupted after the"
            " configuration write)")
        return _finish(paths, me, marker, out, no_voting=no_voting,
                       timeout_scale=timeout_scale, lease=lease, sleep=sleep, resumed=True)
    if marker is not None:
        out(f"Resuming the takeover of master epoch {marker.epoch} (interrupted before the"
            " configuration write): starting it again")
    data = load_local_config(paths)
    check_taker(data, me, allow_master=no_voting)
    old = master_ip_params(data)["name"]
    rpc = node_rpc(paths, data, me, timeout_scale=timeout_scale)
    names = quorum.config_node_names(data)
    faultpoints.reached("before_vote")
    out(f"Master vote on {me} (the master is {old}):")
    drained = (drain and not no_voting and bool(old) and old != me
               and drain_old_master(rpc, old, DRAIN_SECONDS, out))
    try:
        if not no_voting:
            catchup.catch_up_jobs(rpc, paths, data, me, out)
        decision = quorum.run_vote(rpc, data, me, mode=vote.MODE_FAILOVER, no_voting=no_voting)
        out(decision.message)
        if not decision.ok:
            raise TakeoverRefused(f"Failover refused: {decision.reason}")
        seen = decision.epoch - 1
        epoch = next_epoch(seen, taker_rank(names, me))
        if no_voting:
            try:
                epoch = claim_majority(rpc, names, me, epoch, seen, out)
            except TakeoverRefused as exc:
                out(f"Warning: --no-voting: {exc}")
        else:
            epoch = claim_majority(rpc, names, me, epoch, seen, out)
            _check_not_taken(rpc, paths, names, me, old)
    except errors.GanetiError:
        if drained:
            drain_old_master(rpc, old, 0, out)
        raise
    set_epoch(rpc, epoch)
    marker = Marker(me, epoch, old, stopped=False)
    write_marker(paths, marker)
    if old in decision.missing or not old or old == me:
        out(f"{old}: not stopped (no answer to the vote:"
            f" {decision.missing.get(old, 'not reachable')})")
        stopped = False
    else:
        stopped = stop_old_master(rpc, data, out)
    faultpoints.reached("after_stop_old_master")
    if stopped and not no_voting:
        # the old master flushed its last job updates: vote again for the final numbers
        data = load_local_config(paths)
        catchup.catch_up_jobs(rpc, paths, data, me, out)
        final = quorum.run_vote(rpc, data, me, mode=vote.MODE_FAILOVER, claimed=epoch,
                                retry_for=RIVAL_ROLLBACK_WAIT, sleep=sleep, log=out)
        if not final.ok:
            out(final.message)
            release_claims(rpc, names, me)
            clear_marker(paths)
            raise TakeoverRefused(
                f"Failover refused after stopping {old}: {final.reason}. Start the master"
                f" daemon on {old} again (ganeti-masterd there, or its watcher), or fail over"
                " to the node with the newer data")
        decision = final
    if not no_voting:
        _check_still_ours(rpc, paths, names, me, epoch, seen, old)
    backup = paths.config_file + _BACKUP_SUFFIX
    uio.write_file_atomic(backup, uio.read_file(paths.config_file), mode=0o600)
    try:
        serial = uio.read_file(paths.queue_serial_file)
    except FileNotFoundError:
        serial = b"0\n"
    uio.write_file_atomic(paths.queue_serial_file + _BACKUP_SUFFIX, serial, mode=0o600)
    marker = dataclasses.replace(marker, queue_serial=decision.queue_serial,
                                 config_serial=decision.config_serial, stopped=stopped)
    write_marker(paths, marker)
    write_takeover_config(paths, data, me, dataclasses.replace(decision, epoch=epoch))
    faultpoints.reached("after_config_write")
    return _finish(paths, me, marker, out, no_voting=no_voting, timeout_scale=timeout_scale,
                   lease=lease, sleep=sleep, skip=decision.missing)
