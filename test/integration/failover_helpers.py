"""Helpers of the failover tests: who runs what, job ids, config serials, partitions."""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable

import pytest

from ganeti import constants, daemonctl, serializer
from tools.harness import vcluster
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

__all__ = ["MASTERD_ARGS", "needs_partitions", "masterd_running", "rapi_running", "submit",
           "config_serial", "config_digest", "ssconf_master", "failover", "Ledger"]

#: short RPC timeouts and a two-second master lease, so that failovers are quick (one
#: second was shorter than a renewal round on a loaded CI machine)
MASTERD_ARGS = (*SHORT_RPC_TIMEOUTS, "--lease-duration", "2", "--vote-timeout", "5")

needs_partitions = pytest.mark.skipif(vcluster.partition_support() is not None,
                                      reason=str(vcluster.partition_support()))

_JOB_ID = re.compile(r"JobID: (\d+)")


def masterd_running(vc: VirtualCluster, node: str) -> bool:
    return daemonctl.daemon_pid(vc.paths(node), constants.MASTERD) is not None


def rapi_running(vc: VirtualCluster, node: str) -> bool:
    return daemonctl.daemon_pid(vc.paths(node), constants.RAPI) is not None


def submit(vc: VirtualCluster, node: str, *argv: str,
           wait: bool = False) -> tuple[int | None, str]:
    """Submit ``gnt-... --submit`` as ``node``: ``(job id or None, output)``.

    With ``wait``, then wait for the job (``gnt-job wait``).
    """
    res = vc.run(*argv, "--submit", node=node, timeout=60)
    text = res.stdout + res.stderr
    found = _JOB_ID.findall(text)
    if res.returncode != 0 or not found:
        return None, text
    job_id = int(found[-1])
    if wait:
        vc.run("gnt-job", "wait", str(job_id), node=node, timeout=60)
    return job_id, text


def config_serial(vc: VirtualCluster, node: str) -> int:
    with open(vc.paths(node).config_file, "rb") as fh:
        return int(serializer.loads(fh.read())["serial_no"])


def config_digest(vc: VirtualCluster, node: str) -> tuple[int, str] | None:
    """``(serial, sha1 of the bytes)`` of the node's config.data, or None."""
    try:
        with open(vc.paths(node).config_file, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return int(serializer.loads(raw)["serial_no"]), hashlib.sha1(raw).hexdigest()


def ssconf_master(vc: VirtualCluster, node: str) -> str:
    with open(vc.paths(node).ssconf_file("master_node")) as fh:
        return fh.read().strip()


def failover(vc: VirtualCluster, node: str, *extra: str) -> tuple[int, str]:
    """``gnt-cluster master-failover`` on ``node``: ``(exit code, output)``."""
    res = vc.run("gnt-cluster", "master-failover", *extra, node=node, timeout=180)
    return res.returncode, res.stdout + res.stderr


class Ledger:
    """What the tests saw: job ids acknowledged (by which master), config contents per serial.

    :meth:`check` asserts the invariant of doc/design/failover.md: no job
    id acknowledged by two masters, no config serial with two contents.
    """

    def __init__(self) -> None:
        self.jobs: dict[int, str] = {}
        self.configs: dict[int, tuple[str, str]] = {}

    def acked(self, job_id: int, master: str) -> None:
        other = self.jobs.get(job_id)
        assert other is None or other == master, \
            f"job id {job_id} acknowledged by {other} and by {master}"
        self.jobs[job_id] = master

    def observe(self, vc: VirtualCluster) -> None:
        for name in vc.names:
            seen = config_digest(vc, name)
            if seen is None:
                continue
            serial, digest = seen
            old = self.configs.get(serial)
            assert old is None or old[0] == digest, \
                (f"config serial {serial} written twice with different content"
                 f" ({old[1]} and {name})")
            self.configs.setdefault(serial, (digest, name))

    def check(self, vc: VirtualCluster) -> None:
        self.observe(vc)


def queue_files(vc: VirtualCluster, node: str) -> list[str]:
    return sorted(os.listdir(vc.paths(node).queue_dir))


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0,
               step: float = 0.2) -> bool:
    """Poll ``predicate`` every ``step`` seconds until it holds (True) or ``timeout``
    seconds passed (its last answer)."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / step) + 1):
        if predicate():
            return True
        if time.monotonic() > deadline:
            break
        time.sleep(step)
    return predicate()
