"""A virtual cluster for pytest: create it in a temporary directory, destroy it after.

::

    @pytest.fixture(scope="module")
    def vc(tmp_path_factory):
        with VirtualCluster(tmp_path_factory.mktemp("vc"), nodes=3) as cluster:
            yield cluster

    def test_x(vc):
        res = vc.run("gnt-node", "list", "-o", "name,role")
        assert res.returncode == 0

Ports are picked free per cluster (by :func:`tools.harness.vcluster.create`),
so clusters of parallel tests never clash.  ``close()`` destroys the cluster
(stops daemons, kills stragglers, removes the directory); it also runs at
interpreter exit as a safety net.
"""

from __future__ import annotations

import atexit
import os
import subprocess
from collections.abc import Sequence
from typing import Any

from ganeti.pathutils import Paths
from tools.harness import vcluster

__all__ = ["VirtualCluster", "SHORT_RPC_TIMEOUTS"]

#: masterd arguments for tests that kill/stop node daemons (if masterd knows them)
SHORT_RPC_TIMEOUTS = ("--rpc-timeout-scale", "0.05")

_LIVE: set[VirtualCluster] = set()


class VirtualCluster:
    """An N-node virtual cluster with helpers to run ``gnt-*`` commands."""

    def __init__(self, directory: str | os.PathLike[str], nodes: int = 3, *,
                 use_ssh: bool = True, masterd_args: Sequence[str] = (),
                 hypervisor: str = "fake") -> None:
        self.directory = os.path.abspath(directory)
        self.hypervisor = hypervisor
        self.num_nodes = nodes
        self.use_ssh = use_ssh
        self.masterd_args = list(masterd_args)
        self.vc: vcluster.VCluster | None = None

    def start(self) -> VirtualCluster:
        """Create the cluster (daemons answer when this returns)."""
        _LIVE.add(self)
        try:
            self.vc = vcluster.create(self.directory, self.num_nodes, use_ssh=self.use_ssh,
                                      masterd_args=self.masterd_args,
                                      hypervisor=self.hypervisor)
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> VirtualCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Destroy the cluster and remove its directory."""
        _LIVE.discard(self)
        vcluster.destroy(self.directory)

    # helpers ------------------------------------------------------------------
    @property
    def cluster(self) -> vcluster.VCluster:
        assert self.vc is not None, "cluster not started"
        return self.vc

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.cluster.nodes]

    def paths(self, node: str) -> Paths:
        """The :class:`Paths` of ``node`` (name or short name)."""
        return self.cluster.paths(node)

    def env(self, node: str | None = None) -> dict[str, str]:
        """The full environment of ``node`` (default: the master)."""
        vnode = self.cluster.node(node) if node else self.cluster.master_node
        return {**os.environ, **vcluster.node_env(self.cluster, vnode)}

    def run(self, *argv: str, node: str | None = None, timeout: float = 120.0,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``gnt-<tool> args...`` as ``node`` (default master); returns the result."""
        return vcluster.run_gnt(self.cluster, argv, node=node, timeout=timeout, check=check)

    def ok(self, *argv: str, **kwargs: Any) -> str:
        """Run a command that must succeed; returns its stdout."""
        res = self.run(*argv, **kwargs)
        assert res.returncode == 0, f"{argv} failed ({res.returncode}):\n{res.stdout}{res.stderr}"
        return res.stdout

    def roles(self) -> dict[str, str]:
        """``{node name: role letter}`` from ``gnt-node list -o name,role``."""
        out = self.ok("gnt-node", "list", "--no-headers", "-o", "name,role")
        return dict(line.split() for line in out.splitlines() if line.strip())


@atexit.register
def _cleanup() -> None:  # pragma: no cover - safety net
    for cluster in list(_LIVE):
        try:
            cluster.close()
        except Exception:
            pass
