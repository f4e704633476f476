"""Asking the nodes: the master vote and the master lease over node RPC.

doc/design/failover.md.  :func:`collect_answers` asks every node of a
configuration ``master_vote_info``; :func:`run_vote` turns that into a
:class:`~ganeti.failover.vote.Decision` (retrying for a bounded time while
too few nodes answer); :func:`renew_lease` asks for ``master_lease``
confirmations and returns as soon as a strict majority confirmed.
:class:`MasterGuard` is what the master daemon keeps: the lease state,
its renewals (in the background, or before a submission when due) and the
fenced flag set by the RPC runner.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from ganeti import errors
from ganeti.failover import vote
from ganeti.failover.lease import ASYNC, LEASE_DURATION, SYNC, MasterLease, Renewal
from ganeti.objects import ConfigData
from ganeti.rpc import defs
from ganeti.rpc.client import RpcRunner

__all__ = ["collect_answers", "run_vote", "renew_lease", "MasterGuard", "config_node_names",
           "lease_voters", "voter_change", "new_master_from"]

logger = logging.getLogger(__name__)

#: seconds one vote question may take per node
VOTE_RPC_TIMEOUT = 5.0


_ACCEPTED_FROM = re.compile(r"epoch (\d+) accepted from (\S+?);")


def new_master_from(refusals: Iterable[str]) -> str | None:
    """The master of the newest epoch named in ``Fenced:`` refusals, or None."""
    best: tuple[int, str] | None = None
    for text in refusals:
        match = _ACCEPTED_FROM.search(text)
        if match and match.group(2) != "unknown":
            seen = (int(match.group(1)), match.group(2))
            best = seen if best is None or seen > best else best
    return best[1] if best else None


def config_node_names(data: ConfigData) -> list[str]:
    """Every node of the configuration, by name (sorted)."""
    return sorted(n.name for n in data.nodes.values())


def lease_voters(data: ConfigData) -> list[str]:
    """The nodes whose confirmations the master lease counts (sorted): every
    node but those both marked offline and recorded powered off
    (doc/design/failover.md, "Lease voters")."""
    return sorted(n.name for n in list(data.nodes.values()) if n.powered or not n.offline)


def voter_change(saved: ConfigData, live: ConfigData) -> tuple[list[str], list[str]]:
    """``(voters, leaving)`` while ``live`` is being written over ``saved``.

    The voters are those of the configuration on disk that ``live`` still
    has (a removed node stops counting at once, as it is told to leave the
    cluster); ``leaving`` the ones of them that ``live`` no longer counts,
    whose write needs a fresh majority (doc/design/failover.md, "Lease voters").
    """
    names = {n.name for n in list(live.nodes.values())}
    voters = [n for n in lease_voters(saved) if n in names]
    still = set(lease_voters(live))
    return voters, [n for n in voters if n not in still]


def collect_answers(rpc: RpcRunner, names: Sequence[str], *,
                    timeout: float | None = None) -> dict[str, vote.NodeAnswer | str]:
    """``master_vote_info`` of every node: its answer, or why there is none.

    ``timeout`` defaults to the runner's urgent timeout, at most
    :data:`VOTE_RPC_TIMEOUT`.
    """
    if timeout is None:
        timeout = min(VOTE_RPC_TIMEOUT,
                      rpc.timeouts[defs.CALLS["master_vote_info"].timeout])
    out: dict[str, vote.NodeAnswer | str] = {}
    for name, res in rpc.call_master_vote_info(list(names), rpc_timeout=timeout).items():
        out[name] = res.fail_msg if res.fail_msg else vote.answer_from_data(name, res.payload)
    return out


def run_vote(rpc: RpcRunner, data: ConfigData, me: str, *, mode: str,
             no_voting: bool = False, retry_for: float = 0.0,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep,
             log: Callable[[str], None] | None = None, claimed: int = 0) -> vote.Decision:
    """Vote on ``me`` taking the master role with configuration ``data``.

    The taker's own answer comes from its own node daemon, with the
    configuration's master epoch.  While the only problem is that too few
    nodes answered (or, with ``claimed``, the epoch this node holds a
    majority's claim of, that newer data is a pre-empted rival taker's),
    asks again every second for up to ``retry_for`` seconds.  Never raises
    for a refusal: see ``Decision.ok``.
    """
    names = config_node_names(data)
    deadline = clock() + retry_for
    while True:
        answers = collect_answers(rpc, names)
        own = answers.pop(me, "no answer")
        local_epoch = 0
        if isinstance(own, str):
            taker = vote.NodeAnswer(me, None, False, epoch=data.cluster.master_epoch)
            if not no_voting:
                return vote.Decision(False, f"This node's own node daemon does not answer ({own})",
                                     f"This node's own node daemon does not answer ({own})",
                                     retry=False)
        else:
            taker = replace(own, epoch=data.cluster.master_epoch)
            local_epoch = own.epoch
        decision = vote.decide(taker, names, answers, mode=mode, no_voting=no_voting,
                               local_epoch=local_epoch, claimed=claimed)
        if decision.ok or not decision.retry or clock() >= deadline:
            return decision
        if log is not None:
            log(f"{decision.reason}; asking again")
        sleep(min(1.0, max(0.0, deadline - clock())))


def renew_lease(rpc: RpcRunner, names: Sequence[str], master: str, epoch: int, reserve: int,
                reserve_serial: int, *, timeout: float) -> tuple[int, dict[str, str]]:
    """Ask every node to confirm; ``(confirmations, {node: failure})``.

    Returns as soon as a strict majority of ``names`` confirmed, or all
    answered, or ``timeout`` passed (nodes still silent count as failed).
    """
    names = list(dict.fromkeys(names))
    need = len(names) // 2 + 1
    cond = threading.Condition()
    confirmed: list[str] = []
    failed: dict[str, str] = {}

    def ask(name: str) -> None:
        res = rpc.call_master_lease(
            [name], master=master, epoch=epoch, reserve_job_id=reserve, reserve_serial=reserve_serial,
            rpc_timeout=timeout)[name]
        with cond:
            if res.fail_msg:
                failed[name] = res.fail_msg
            else:
                confirmed.append(name)
            cond.notify_all()

    for name in names:
        threading.Thread(target=ask, args=(name,), daemon=True,
                         name=f"lease-{name}").start()
    with cond:
        cond.wait_for(lambda: len(confirmed) >= need or len(confirmed) + len(failed) == len(names),
                      timeout + 1.0)
        for name in names:
            if name not in confirmed and name not in failed:
                failed[name] = "no answer yet"
        return len(confirmed), dict(failed)


#: synchronous renewal rounds tried when each is confirmed only after the
#: lease it grants has run out
_LATE_ROUNDS = 3


class MasterGuard:
    """The master daemon's right to accept jobs: lease, reservation, fencing.

    ``nodes()`` returns ``(node names, master name, epoch)`` from the
    current configuration; ``last_id()`` the queue's last job id;
    ``serial()`` the configuration's serial.  Every submission runs in
    :meth:`submitting` (which calls :meth:`check_submit`),
    :meth:`check_config_write` is called before every configuration write;
    the RPC runner calls :meth:`on_fenced` when a node refuses our epoch.
    With ``enforce=False`` (``--no-voting``) the lease's expiry is not
    enforced, but its reservations are: a renewal counts when confirmed by
    a majority or by at least as many nodes (its own included) as the
    first renewal reached, and jobs and serials beyond what was so
    recorded are refused (doc/design/failover.md, "--no-voting").
    """

    def __init__(self, rpc: RpcRunner, nodes: Callable[[], tuple[list[str], str, int]],
                 last_id: Callable[[], int], serial: Callable[[], int] = lambda: 0, *,
                 clock: Callable[[], float] = time.monotonic,
                 duration: float = LEASE_DURATION, timeout: float = 3.0,
                 enforce: bool = True) -> None:
        self.rpc = rpc
        self._nodes = nodes
        self._last_id = last_id
        self._serial = serial
        self.timeout = timeout
        self.enforce = enforce
        self._lock = threading.Lock()
        self._renew_lock = threading.Lock()
        self.lease = MasterLease(clock, duration=duration)
        self._async: threading.Thread | None = None
        self._suspect: str | None = None
        self._draining_until = float("-inf")
        #: submissions past their check and not yet answered (:meth:`submitting`)
        self._submitting = 0
        self._none_submitting = threading.Condition(self._lock)
        self._first_reach: int | None = None
        #: called once, with the reason, when a majority fenced this master
        self.on_step_down: Callable[[str], None] | None = None

    def on_fenced(self, node: str, message: str) -> None:
        """A node refused our epoch: ask every node (a renewal round) for the verdict.

        One refusal alone never fences (a node may be confused, or hold the
        epoch of a takeover that lost); the master steps down only when a
        strict majority refuses its epoch in that round (:meth:`renew`).
        """
        with self._lock:
            if self.lease.fenced is not None or self._renew_lock.locked():
                return   # a round under way gives the verdict
            self._suspect = f"node {node} refused this master's changes ({message})"
        logger.warning("Node %s refused our epoch (%s): asking every node", node, message)
        self._renew_async()

    def _verdict(self, names: Sequence[str], failed: dict[str, str]) -> str | None:
        """Why a strict majority of ``names`` fenced us (None: it did not)."""
        refusals = {n: m for n, m in failed.items() if m.startswith(defs.FENCED_PREFIX)}
        if len(refusals) * 2 <= len(names):
            return None
        newest = new_master_from(refusals.values())
        where = f"; the master is {newest}" if newest else ""
        return (f"This node is no longer the master{where}: {len(refusals)} of {len(names)}"
                f" nodes refused this master's epoch ({'; '.join(sorted(refusals.values()))})."
                " Use the master named by gnt-cluster getmaster")

    def _fence(self, why: str) -> None:
        with self._lock:
            first = self.lease.fenced is None
            self.lease.fence(why)
        if first:
            logger.error("Fenced by a majority: %s; refusing every request from now on", why)
            if self.on_step_down is not None:
                try:
                    self.on_step_down(why)
                except Exception:  # stepping down must not break the renewal thread
                    logger.exception("Stepping down failed")

    def drain(self, seconds: float) -> None:
        """Refuse submissions (retryably) for ``seconds`` from now; 0 ends a drain.

        A planned failover drains the old master before its final vote
        (doc/design/failover.md, "Planned failover under load"); the drain
        ends by itself so that a failover that gave up leaves a working master.
        """
        with self._lock:
            self._draining_until = self.lease.now() + seconds if seconds > 0 else float("-inf")

    @property
    def draining(self) -> bool:
        """Whether submissions are refused because a failover is under way."""
        with self._lock:
            return self.lease.now() < self._draining_until

    @property
    def fenced(self) -> str | None:
        """Why this daemon was fenced, or None."""
        with self._lock:
            return self.lease.fenced

    def renew(self, count: int = 0, *, only_if_due: bool = False, serial: int = 0) -> bool:
        """One renewal round (one at a time); whether a majority confirmed.

        ``only_if_due``: skip it (True) when another thread's renewal,
        finished meanwhile, already made it unnecessary.
        """
        with self._renew_lock:
            serial = max(serial, self._serial())
            with self._lock:
                if only_if_due and self.lease.need(self._last_id(), count, serial,
                                                   timed=self.enforce) != SYNC:
                    return True
            names, master, epoch = self._nodes()
            with self._lock:
                renewal: Renewal = self.lease.start_renewal(self._last_id(), count, serial)
            count, failed = renew_lease(self.rpc, names, master, epoch, renewal.reserve,
                                        renewal.reserve_serial, timeout=self.timeout)
            # a --no-voting master records its reservation on whatever nodes it
            # reaches, but never on fewer than its first renewal reached: cut
            # off from those, it uses up what it reserved and stops
            ok = count * 2 > len(names) or (
                not self.enforce and count > 0 and count >= (self._first_reach or 0))
            if ok and not self.enforce and self._first_reach is None:
                self._first_reach = min(count, len(names) // 2 + 1)
            verdict = None if ok else self._verdict(names, failed)
            if verdict is not None:
                self._fence(verdict)
                return False
            with self._lock:
                if ok:
                    self.lease.confirmed(renewal)
                    self._suspect = None
                else:
                    why = ", ".join(f"{n}: {m}" for n, m in sorted(failed.items()))
                    self.lease.failed(f"{count} of {len(names)} confirmed; {why}")
            if not ok:
                logger.warning("Master lease renewal: only %d of %d nodes confirmed (%s)",
                               count, len(names), failed)
            return ok

    def _renew_async(self) -> None:
        with self._lock:
            if self._async is not None and self._async.is_alive():
                return
            self._async = threading.Thread(target=self.renew, name="master-lease", daemon=True)
            self._async.start()

    def check_submit(self, count: int = 1) -> None:
        """Raise :class:`errors.NotMasterError` unless ``count`` jobs may be accepted now."""
        self._check(count, 0)

    @contextlib.contextmanager
    def submitting(self, count: int = 1) -> Iterator[None]:
        """:meth:`check_submit`, then the submission runs in the ``with`` block,
        counted until it ends, so that :meth:`wait_submissions` after a
        :meth:`drain` waits for the submissions that passed the check before
        the drain began (their job ids are handed out after it)."""
        with self._lock:
            self._submitting += 1      # before the check: a drain from now on waits for it
        try:
            self.check_submit(count)
            yield
        finally:
            with self._lock:
                self._submitting -= 1
                if not self._submitting:
                    self._none_submitting.notify_all()

    def wait_submissions(self, timeout: float) -> bool:
        """Wait until no submission is under way (at most ``timeout`` seconds);
        whether none is.  After :meth:`drain`, no new one starts."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._submitting:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._none_submitting.wait(left)
        return True

    def check_config_write(self, serial: int, *, fresh: bool = False) -> None:
        """Raise :class:`errors.NotMasterError` unless config ``serial`` may be written now.

        Called by the configuration writer's ``write_fn``: a refusal undoes
        the change (the job that made it fails).  ``fresh``: the write takes
        nodes out of the lease's voters, so a majority of the voters as they
        are now must confirm this master in a round of its own, whatever the
        lease's age (doc/design/failover.md, "Lease voters").
        """
        if fresh and self.enforce and self.fenced is None and not self.renew(serial=serial):
            with self._lock:
                why = self.lease.fenced or self.lease.last_failure or "no majority"
            raise errors.NotMasterError(
                "Taking nodes out of the master lease's voters needs a majority of the"
                f" voters now, and it did not confirm ({why}); the change is refused")
        self._check(0, serial)

    def check_request(self) -> None:
        """Raise :class:`errors.NotMasterError` once a majority fenced this master
        (every LUXI request is refused then, with the new master's name)."""
        with self._lock:
            if self.lease.fenced is not None:
                raise errors.NotMasterError(self.lease.fenced)

    def _check(self, count: int, serial: int) -> None:
        with self._lock:
            if self.lease.fenced is not None:
                raise errors.NotMasterError(self.lease.fenced)
            if count and self.lease.now() < self._draining_until:
                raise errors.MasterFailingOverError(
                    "The master is failing over: it accepts no new jobs now; submit again"
                    " in a few seconds (to the new master, named by gnt-cluster getmaster)")
            need = self.lease.need(self._last_id(), count, serial, timed=self.enforce)
        if need == SYNC:
            # a round that a majority confirmed but that took longer than the
            # lease itself (a loaded or stalled master) leaves the lease
            # expired: ask again, a few times, before refusing
            for _ in range(_LATE_ROUNDS):
                if not self.renew(count, only_if_due=True, serial=serial):
                    break
                with self._lock:
                    if not self.enforce or self.lease.now() < self.lease.valid_until:
                        break
                logger.warning("Master lease renewal confirmed too late (after more than"
                               " %.1f s); renewing again", self.lease.duration)
        elif need == ASYNC:
            self._renew_async()
        with self._lock:
            why = self.lease.refusal(self._last_id(), count, serial, timed=self.enforce)
        if why is not None:
            raise errors.NotMasterError(why)
