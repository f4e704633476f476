"""The node daemon's part of the master autopromotion (doc/ha.md, "Master autopromotion").

Every node daemon's accepting parent holds a :class:`PromotionMonitor`:
once a second (:meth:`PromotionMonitor.tick`, from the parent's loop, no
thread) it looks at this node's copy of the configuration (is
``auto_promote`` on, is this node an online master candidate and not the
master) and at when it last confirmed the master's lease
(``master_contact``, :mod:`ganeti.backend.fencing`), and feeds the pure
:class:`ganeti.failover.autopromote.Watch`.  When that says
:data:`~ganeti.failover.autopromote.CHECK`, the parent forks one worker
child, which runs :func:`check_and_take_over`: it asks every master
candidate (``master_vote_info``), lets
:func:`ganeti.failover.autopromote.elect` decide, and only on the winner
runs the takeover of ``gnt-cluster master-failover``
(:func:`ganeti.failover.takeover.take_over`) and starts the master daemon
and ``ganeti-rapi`` here.  The parent never blocks: the worker does every
RPC.

Timings follow the master daemon's ``--lease-duration`` in
``$GANETI_MASTERD_ARGS`` (the same reading as ``gnt-cluster
master-failover`` and the watcher): the master is declared gone after
:func:`~ganeti.failover.autopromote.master_timeout` of it.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from typing import Any

from ganeti import errors, serializer
from ganeti.backend.fencing import CONTACT_FILE_NAME, contact_age
from ganeti.failover import autopromote
from ganeti.failover.lease import LEASE_DURATION
from ganeti.pathutils import Paths
from ganeti.server.parenttimer import ParentTimer
from ganeti.utils import io as uio

__all__ = ["PromotionMonitor", "check_and_take_over", "run_worker"]

logger = logging.getLogger(__name__)

#: ``auto_promote`` on, as the configuration's JSON writes it (a quote inside a
#: JSON string is escaped, so only a key matches): a cluster with it off
#: never pays for a parse of a large configuration
_ENABLED_RE = re.compile(rb'"auto_promote"\s*:\s*true')


def _option(args: Sequence[str], name: str, default: float) -> float:
    from ganeti.failover.takeover import float_option
    return float_option(args, name, default)


class PromotionMonitor(ParentTimer):
    """The parent's timer; forks :func:`check_and_take_over` when it is due (a look
    is cheap: a stat, and a parse of the configuration only when it changed and has
    ``auto_promote`` on)."""

    def __init__(self, paths: Paths, hostname: str, *, masterd_args: Sequence[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.paths = paths
        self.hostname = hostname
        self.masterd_args = list(masterd_args if masterd_args is not None else shlex.split(
            os.environ.get("GANETI_MASTERD_ARGS", "")))
        self.lease = _option(self.masterd_args, "--lease-duration", LEASE_DURATION)
        super().__init__(clock)
        self.watch = autopromote.Watch(autopromote.master_timeout(self.lease))
        self._config_key: tuple[int, int, int] | None = None
        self._config: tuple[bool, bool, bool, int] = (False, False, False, 0)

    def _config_view(self) -> tuple[bool, bool, bool, int]:
        """``(auto_promote, online candidate, master, master epoch)`` from this node's
        configuration."""
        try:
            st = os.stat(self.paths.config_file)
        except OSError:
            self._config_key, self._config = None, (False, False, False, 0)
            return self._config
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key != self._config_key:
            self._config_key = key
            try:
                text = uio.read_file(self.paths.config_file, max_size=256 << 20)
                if not _ENABLED_RE.search(text):
                    self._config = (False, False, False, 0)
                    return self._config
                raw = serializer.loads(text)
                cluster = raw["cluster"]
                me = next((uuid, n) for uuid, n in raw["nodes"].items()
                          if n.get("name") == self.hostname)
                self._config = (cluster.get("auto_promote") is True,
                                bool(me[1].get("master_candidate")) and not me[1].get("offline"),
                                cluster.get("master_node") == me[0],
                                int(cluster.get("master_epoch") or 0))
            except (OSError, errors.GanetiError, KeyError, TypeError, ValueError,
                    AttributeError, StopIteration):
                self._config = (False, False, False, 0)
        return self._config

    def local_view(self, now: float) -> autopromote.LocalView:
        """What this node sees now, without asking anybody."""
        enabled, candidate, master, epoch = self._config_view()
        age = None
        if enabled and candidate and not master:
            age = contact_age(os.path.join(self.paths.data_dir, CONTACT_FILE_NAME), now)
        return autopromote.LocalView(enabled=enabled, candidate=candidate, master=master,
                                     contact=None if age is None else now - age, epoch=epoch)

    def tick(self, fork: Callable[[Callable[[], int]], int]) -> None:
        """Look (at most once a second, :class:`ParentTimer`); ``fork(fn)`` runs ``fn``
        in a child process and returns its pid."""
        now = self.look()
        if now is None:
            return
        view = self.local_view(now)
        if self.watch.tick(now, view, busy=self.worker is not None) != autopromote.CHECK:
            return
        logger.warning("No lease renewal from the master for %.1f s: asking the master"
                       " candidates", self.watch.silence(now, view))
        self.worker = fork(lambda: check_and_take_over(
            self.paths, self.hostname, self.masterd_args, self.lease))


def check_and_take_over(paths: Paths, me: str, masterd_args: Sequence[str],
                        lease: float) -> int:
    """Ask the candidates; on the winner, take over and start the master daemons.

    Returns an exit status (0: nothing to do, or done).
    """
    from ganeti import daemonctl
    from ganeti.failover import quorum, takeover
    data = takeover.load_local_config(paths)
    if not data.cluster.auto_promote:
        return 0
    master_node = data.nodes.get(data.cluster.master_node)
    master = master_node.name if master_node is not None else ""
    if master == me:
        return 0
    candidates = sorted(n.name for n in data.nodes.values()
                        if n.master_candidate and not n.offline)
    scale = _option(masterd_args, "--rpc-timeout-scale", 1.0)
    rpc = takeover.node_rpc(paths, data, me, timeout_scale=scale)
    answers = quorum.collect_answers(rpc, candidates)
    election = autopromote.elect(master, candidates, answers,
                                 autopromote.master_timeout(lease))
    if not election.gone or election.winner != me:
        logger.warning("Master autopromotion: %s%s", election.reason,
                       "" if election.gone else "; nothing to do")
        return 0
    logger.warning("Master autopromotion: %s", election.reason)

    def out(line: str) -> None:
        logger.warning("Autopromotion takeover: %s", line)

    try:
        # no drain: a majority of the candidates found the master silent
        done = takeover.take_over(paths, me, out=out, timeout_scale=scale, lease=lease,
                                  drain=False)
        daemonctl.start_master_daemons(paths, extra_args=masterd_args)
    except errors.GanetiError as exc:
        logger.error("Master autopromotion: this node did not take over: %s", exc)
        return 1
    logger.warning("Master autopromotion: %s is the master now (master epoch %s); %s stays"
                   " a master candidate", me, done.epoch, done.old)
    return 0


def run_worker(setup: Callable[[], Any], fn: Callable[[], int], what: str) -> int:
    """Fork; in the child run ``setup()`` then ``fn()`` and exit with its status.
    Returns the child's pid (in the parent).  ``what`` names the worker in the
    log when it fails (``"master autopromotion"``, ``"self-fence"``)."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        setup()
        code = fn()
    except BaseException:  # a worker child never returns into the server loop
        logger.exception("The %s worker failed", what)
    finally:
        os._exit(code)
