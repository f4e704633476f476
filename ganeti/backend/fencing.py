"""Node side of the master role: vote answers, fencing epochs, the lease, stopping a master.

Design: doc/design/failover.md.  A node keeps the newest master epoch it
has accepted, the master that sent it and the highest job id a master
reserved on it in ``var/lib/ganeti/master_epoch`` (JSON).  Every request
runs in its own forked child, so reads and updates of that file happen
under an exclusive ``flock`` of ``master_epoch.lock``.

* :func:`check_epoch` is called by the node daemon before every fenced
  procedure (``rpc.defs.FENCED_CALLS``): an epoch older than the stored
  one is refused (:data:`rpc.defs.FENCED_PREFIX` message, logged as a
  warning), a newer one is stored;
* ``master_vote_info`` answers the master vote;
* ``master_lease`` confirms a master's lease and stores its job id
  reservation (fenced);
* ``node_stop_master`` stops the master daemon and ``ganeti-rapi`` here and
  takes the master IP down (fenced);
* ``master_claim`` promises this node to one taker of a failover
  (doc/design/failover.md, "Concurrent takers"): a promise does not fence
  the running master, it only makes the node refuse a *new* epoch from
  another taker (``master_lease``) and other claims, until it expires;
* ``master_drain`` asks the master daemon here to stop accepting jobs for a
  while (a planned failover) and to flush its replication.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

from ganeti import constants, errors, serializer
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, URGENT, procedure
from ganeti.backend.masterip import node_deactivate_master_ip
from ganeti.rpc import defs
from ganeti.utils import io as uio

__all__ = ["master_vote_info", "master_lease", "node_stop_master", "master_claim",
           "master_drain"]

logger = logging.getLogger(__name__)

EPOCH_FILE_NAME = "master_epoch"
#: when this node last confirmed its master's lease (doc/ha.md, "Master autopromotion")
CONTACT_FILE_NAME = "master_contact"
_JOB_RE = re.compile(r"job-([0-9]+)")
_STOP_TIMEOUT = 15.0
#: seconds a takeover's claim holds a node (a taker that died frees it then)
CLAIM_TTL = 60.0


def epoch_file(ctx: NodeContext) -> str:
    """This node's fencing state file."""
    return os.path.join(ctx.paths.data_dir, EPOCH_FILE_NAME)


@contextlib.contextmanager
def _locked(ctx: NodeContext) -> Iterator[None]:
    os.makedirs(ctx.paths.data_dir, exist_ok=True)
    fd = os.open(epoch_file(ctx) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_state(ctx: NodeContext) -> dict[str, Any]:
    """``{"epoch", "master", "reserved_job_id"}`` (zeros when never set)."""
    try:
        data = serializer.loads(uio.read_file(epoch_file(ctx)))
    except FileNotFoundError:
        data = {}
    except (OSError, errors.GanetiError) as exc:
        # never fall back to 0 silently: that would let any old master in
        raise errors.OpExecError(f"Cannot read the master epoch file: {exc}") from exc
    if not isinstance(data, dict):
        raise errors.OpExecError("The master epoch file is not a JSON object")
    return {"epoch": int(data.get("epoch") or 0), "master": str(data.get("master") or ""),
            "reserved_job_id": int(data.get("reserved_job_id") or 0),
            "reserved_serial": int(data.get("reserved_serial") or 0),
            "claim_epoch": int(data.get("claim_epoch") or 0),
            "claim_master": str(data.get("claim_master") or ""),
            "claim_until": float(data.get("claim_until") or 0.0)}


def _live_claim(state: dict[str, Any], now: float) -> tuple[int, str] | None:
    """The claim ``(epoch, taker)`` in ``state`` that still holds, or None.

    A claim ends when it expires, when its taker releases it, or once a
    newer epoch was accepted.  Its own epoch accepted does not end it: the
    taker sends that epoch from its first step on (stopping the old
    master), and is still taking over until it releases its claims.
    """
    if now >= state["claim_until"]:
        return None
    if state["claim_epoch"] > state["epoch"] or (
            state["claim_epoch"] == state["epoch"] and state["claim_master"] == state["master"]):
        return state["claim_epoch"], state["claim_master"]
    return None


def _write_state(ctx: NodeContext, state: dict[str, Any]) -> None:
    uio.write_file_atomic(epoch_file(ctx), serializer.dumps(state), mode=0o640)


def check_epoch(ctx: NodeContext, procedure: str, epoch: int, master: str,
                reserve_job_id: int = 0, reserve_serial: int = 0) -> dict[str, Any]:
    """Accept or refuse a fenced request carrying ``epoch`` from ``master``.

    Refuses (:class:`errors.NotMasterError` with the
    :data:`~ganeti.rpc.defs.FENCED_PREFIX` text) an epoch older than the
    newest accepted; stores a newer one, and raises the stored reservations
    to ``reserve_job_id`` and ``reserve_serial``.  Returns the state after the check.
    """
    with _locked(ctx):
        state = read_state(ctx)
        if epoch < state["epoch"]:
            msg = (f"{defs.FENCED_PREFIX} master epoch {epoch} (from {master or 'unknown'}) is"
                   f" older than epoch {state['epoch']} accepted from"
                   f" {state['master'] or 'unknown'}; {procedure} refused")
            logger.warning("%s", msg)
            raise errors.NotMasterError(msg)
        if epoch == state["epoch"] and master and state["master"] \
                and master != state["master"]:
            # one epoch, one master: two takeovers that picked the same epoch
            msg = (f"{defs.FENCED_PREFIX} master epoch {epoch} (from {master}) was accepted"
                   f" from {state['master']} already; {procedure} refused")
            logger.warning("%s", msg)
            raise errors.NotMasterError(msg)
        claim = _live_claim(state, time.time())
        if procedure == "master_lease" and epoch > state["epoch"] and claim is not None \
                and claim[0] > epoch and claim[1] != master:
            # a new epoch, but another taker claimed this node for a newer one
            msg = (f"{defs.FENCED_PREFIX} master epoch {epoch} (from {master or 'unknown'}) is"
                   f" older than epoch {claim[0]} claimed by {claim[1]}; {procedure} refused")
            logger.warning("%s", msg)
            raise errors.NotMasterError(msg)
        changed = False
        if epoch > state["epoch"] or (master and not state["master"]):
            if epoch > state["epoch"]:
                logger.info("Accepting master epoch %s from %s (was %s from %s)", epoch,
                            master, state["epoch"], state["master"] or "nobody")
            state.update(epoch=epoch, master=master or state["master"])
            changed = True
        for key, value in (("reserved_job_id", reserve_job_id),
                           ("reserved_serial", reserve_serial)):
            if value > state[key]:
                state[key] = value
                changed = True
        if changed:
            try:
                _write_state(ctx, state)
            except OSError as exc:
                raise errors.OpExecError(f"Cannot store the master epoch: {exc}") from exc
        return state


def contact_file(ctx: NodeContext) -> str:
    """Where this node records its last confirmation of a master's lease."""
    return os.path.join(ctx.paths.data_dir, CONTACT_FILE_NAME)


def record_contact(ctx: NodeContext, master: str, epoch: int) -> None:
    """Record that ``master`` renewed its lease here now (the monotonic clock,
    shared by every process of this machine; a reboot makes the record old)."""
    uio.write_file_atomic(contact_file(ctx), serializer.dumps(
        {"master": master, "epoch": epoch, "at": time.monotonic()}), mode=0o640)


def contact_age(path: str, now: float) -> float | None:
    """Seconds since the last lease confirmation recorded in ``path`` (None: never;
    a record from before this machine's boot counts as made at boot)."""
    try:
        raw = serializer.loads(uio.read_file(path, max_size=4096))
        at = float(raw["at"])
    except (OSError, errors.GanetiError, KeyError, TypeError, ValueError):
        return None
    return now if at > now else now - at


def _ssconf(ctx: NodeContext, key: str) -> str | None:
    try:
        return uio.read_file(ctx.paths.ssconf_file(key), max_size=1 << 20).decode().strip()
    except OSError:
        return None


def highest_job_id(queue_dir: str, archive_dir: str) -> int:
    """The highest ``job-<id>`` in the queue and its archive (0: none)."""
    best = 0
    try:
        names = os.listdir(queue_dir)
    except OSError:
        names = []
    for name in names:
        match = _JOB_RE.fullmatch(name)
        if match:
            best = max(best, int(match.group(1)))
    try:
        subdirs = sorted((int(d) for d in os.listdir(archive_dir) if d.isdigit()), reverse=True)
    except OSError:
        subdirs = []
    for sub in subdirs:   # archive/<id // 10000>: the highest non-empty one is enough
        found = 0
        try:
            for name in os.listdir(os.path.join(archive_dir, str(sub))):
                match = _JOB_RE.fullmatch(name)
                if match:
                    found = max(found, int(match.group(1)))
        except OSError:
            continue
        if found:
            best = max(best, found)
            break
    return best


@procedure(URGENT)
def master_vote_info(ctx: NodeContext) -> dict[str, Any]:
    """What the node believes: {master, candidate, epoch, reserved_job_id, reserved_serial} and,
    on a master candidate, config_serial, job_id (highest, archive included), queue_serial.

    What this node believes: master name, and for candidates their serials.

    ``{"master", "candidate", "epoch", "reserved_job_id", "reserved_serial",
    "contact_age"}`` on every node (``contact_age``: seconds since a master's
    lease renewal was last confirmed here, None: never);
    a master candidate (it holds ``config.data`` and is marked a candidate
    in it) adds ``config_serial``, ``job_id`` (highest, archive included)
    and ``queue_serial``.
    """
    with _locked(ctx):
        state = read_state(ctx)
    out: dict[str, Any] = {"master": _ssconf(ctx, "master_node"), "candidate": False,
                           "epoch": state["epoch"],
                           "contact_age": contact_age(contact_file(ctx), time.monotonic()),
                           "reserved_job_id": state["reserved_job_id"],
                           "reserved_serial": state["reserved_serial"]}
    try:
        config = serializer.loads(uio.read_file(ctx.paths.config_file, max_size=256 << 20))
    except (OSError, errors.GanetiError):
        return out
    nodes = config.get("nodes") if isinstance(config, dict) else None
    me = [n for n in (nodes or {}).values()
          if isinstance(n, dict) and n.get("name") == ctx.hostname]
    if not me or not me[0].get("master_candidate"):
        return out
    try:
        raw = uio.read_file(ctx.paths.queue_serial_file).strip()
        queue_serial = int(raw or b"0")
    except (OSError, ValueError):
        queue_serial = 0
    out.update(candidate=True, config_serial=int(config.get("serial_no") or 0),
               job_id=highest_job_id(ctx.paths.queue_dir, ctx.paths.queue_archive_dir),
               queue_serial=queue_serial)
    return out


@procedure(URGENT, fenced=True, offline=True)
def master_lease(ctx: NodeContext, master: str, epoch: int, reserve_job_id: int,
                 reserve_serial: int) -> dict[str, Any]:
    """Confirm the master's lease: accept its epoch (refused if older than one accepted) and
    store its job id and config serial reservations. -> {master (ssconf), epoch}

    Confirm ``master``'s lease: accept ``epoch`` and store the reservations.

    Refused like any fenced call when ``epoch`` is older than the one
    accepted.  Returns ``{"master": ssconf master name, "epoch": accepted}``.
    """
    state = check_epoch(ctx, "master_lease", epoch, master, reserve_job_id, reserve_serial)
    try:
        record_contact(ctx, master, epoch)
    except OSError as exc:
        logger.warning("Cannot record the master's lease renewal: %s", exc)
    return {"master": _ssconf(ctx, "master_node"), "epoch": state["epoch"]}


@procedure(URGENT)
def master_claim(ctx: NodeContext, master: str, epoch: int, seen: int) -> dict[str, Any]:
    """Promise the node to a taker of epoch (refused when the node accepted an epoch newer than
    seen, or another taker's claim holds); epoch 0 releases the taker's claim; a claim ends
    after 60 s or once its epoch is accepted. -> {epoch, claim_epoch, claim_master}

    Promise this node to ``master`` taking over with ``epoch`` (0: release its claim).

    ``seen`` is the newest epoch the taker saw in its vote.  Refused (the
    :data:`~ganeti.rpc.defs.FENCED_PREFIX` text) when the node accepted an
    epoch newer than ``seen`` (a takeover finished meanwhile), or another
    taker's claim still holds (naming it).  A claim does not change which
    master the node obeys; it ends after :data:`CLAIM_TTL` seconds, when a
    newer epoch than its own is accepted, or when its taker releases it
    (at the end of its takeover).  Idempotent for
    the same taker.  Returns ``{"epoch", "claim_epoch", "claim_master"}``.
    """
    now = time.time()
    with _locked(ctx):
        state = read_state(ctx)
        claim = _live_claim(state, now)
        if epoch == 0:
            if claim is not None and claim[1] == master:
                state.update(claim_epoch=0, claim_master="", claim_until=0.0)
                _store(ctx, state, "claim release")
            return {"epoch": state["epoch"], "claim_epoch": state["claim_epoch"],
                    "claim_master": state["claim_master"]}
        if state["epoch"] > seen and state["epoch"] != epoch:
            msg = (f"{defs.FENCED_PREFIX} claim of master epoch {epoch} by {master} refused:"
                   f" epoch {state['epoch']} accepted from {state['master'] or 'unknown'};"
                   f" newer than {seen} the taker saw")
            logger.warning("%s", msg)
            raise errors.NotMasterError(msg)
        if claim is not None and claim[1] != master:
            msg = (f"{defs.FENCED_PREFIX} claim of master epoch {epoch} by {master} refused:"
                   f" epoch {claim[0]} accepted from {claim[1]}; claimed by another taker")
            logger.warning("%s", msg)
            raise errors.NotMasterError(msg)
        state.update(claim_epoch=max(epoch, claim[0] if claim else 0),
                     claim_master=master, claim_until=now + CLAIM_TTL)
        _store(ctx, state, "claim")
        logger.info("Claimed by %s for master epoch %s", master, epoch)
        return {"epoch": state["epoch"], "claim_epoch": state["claim_epoch"],
                "claim_master": master}


def _store(ctx: NodeContext, state: dict[str, Any], what: str) -> None:
    try:
        _write_state(ctx, state)
    except OSError as exc:
        raise errors.OpExecError(f"Cannot store the master {what}: {exc}") from exc


@procedure(URGENT)
def master_drain(ctx: NodeContext, seconds: float) -> dict[str, Any]:
    """The master daemon on the node refuses submissions for seconds (0: accepts again) and
    flushes its replication. -> {last_job_id, flushed}

    Make the master daemon here refuse submissions for ``seconds`` (0: accept
    again) and flush its replication (LUXI ``DrainMaster``).

    Returns the master daemon's answer ``{"last_job_id", "flushed"}``;
    fails when no master daemon runs here.
    """
    from ganeti import luxi
    client = luxi.Client(ctx.paths.master_socket, connect_timeout=5.0, rw_timeout=30.0)
    try:
        result = client.DrainMaster(float(seconds))
    finally:
        client.close()
    if not isinstance(result, dict):
        raise errors.OpExecError(f"Unexpected DrainMaster answer {result!r}")
    return result


def _pid(ctx: NodeContext, daemon: str) -> int | None:
    try:
        pid = int(uio.read_file(ctx.paths.pid_file(daemon)).decode().strip() or "0")
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid if pid > 0 else None


def _stop(ctx: NodeContext, daemon: str, timeout: float) -> bool:
    pid = _pid(ctx, daemon)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid(ctx, daemon) == pid:
        time.sleep(0.05)
    if _pid(ctx, daemon) == pid:
        logger.warning("%s (pid %s) did not stop in %.0fs: killing it", daemon, pid, timeout)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return True


@procedure(FAST, fenced=True)
def node_stop_master(ctx: NodeContext, master_params: dict,
                     use_external_mip_script: bool) -> dict[str, Any]:
    """Stop ganeti-rapi and the master daemon on the node, then take the master IP down. ->
    {masterd: stopped?, rapi: stopped?, ip: error or null}

    Stop ``ganeti-rapi`` and the master daemon here, then take the master IP down.

    The master daemon gets SIGTERM (it finishes running opcodes and
    flushes its replication), SIGKILL after 15 s.  Returns
    ``{"masterd": stopped?, "rapi": stopped?, "ip": error text or None}``.
    """
    out: dict[str, Any] = {"rapi": _stop(ctx, constants.RAPI, 5.0),
                           "masterd": _stop(ctx, constants.MASTERD, _STOP_TIMEOUT), "ip": None}
    try:
        node_deactivate_master_ip(ctx, master_params, use_external_mip_script)
    except errors.GanetiError as exc:
        out["ip"] = str(exc)
    return out
