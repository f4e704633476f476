"""One guest cluster per test session (tools/harness/guestcluster.py, doc/vcluster.md).

A 3-node guest cluster costs about a minute (more under load), so every
module that needs one shares the session's: request the ``guest_cluster``
fixture (test/integration/conftest.py).  It skips with the named reason
where guests cannot run (not root, no bridge or tap devices, no qemu or
virtiofsd), and is destroyed at the end of the session, or at interpreter
exit as a safety net.  A test that powers a node off must start it again
before it returns.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ganeti import constants, errors, luxi
from ganeti.pathutils import Paths
from ganeti.utils.process import RunResult
from tools.harness import guestcluster, guestvm
from tools.harness.luxirelay import LuxiRelay

__all__ = ["GuestClusterFixture", "support_problem", "VCLUSTER"]

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VCLUSTER = os.path.join(_REPO, "tools", "vcluster")


def support_problem() -> str | None:
    """Why no guest cluster can run here (None: it can)."""
    why = guestvm.network_support()
    if why:
        return why
    probe = "vcgprobe" + str(os.getpid() % 100000)
    res = subprocess.run(["ip", "link", "add", probe[:15], "type", "bridge"],
                         capture_output=True, text=True, timeout=30, check=False)
    if res.returncode != 0:
        return f"cannot make a bridge here: {res.stderr.strip()}"
    subprocess.run(["ip", "link", "del", probe[:15]], capture_output=True, timeout=30,
                   check=False)
    return None


#: a file to which every SSH, gnt and vcluster call of the tests appends its duration
#: (doc/vcluster.md, "Guest clusters": where a guest test spends its time)
TRACE_ENV = "GANETI_TEST_GUEST_TRACE"

#: the commands that need only the master's LUXI socket: :meth:`GuestClusterFixture.gnt`
#: runs them on the host through a :class:`LuxiRelay` (a ``gnt-*`` started inside an
#: emulated node costs seconds of Python start-up); a tool named alone: all its verbs
#: but those of :data:`ON_MASTER`
HOST_COMMANDS = {"gnt-instance", "gnt-job", "gnt-group", "gnt-backup", "gnt-os",
                 ("gnt-node", "list"), ("gnt-node", "info"), ("gnt-node", "volumes"),
                 ("gnt-node", "list-storage"), ("gnt-node", "modify"),
                 ("gnt-node", "evacuate"), ("gnt-node", "migrate"),
                 ("gnt-node", "failover"), ("gnt-node", "power"), ("gnt-node", "health"),
                 ("gnt-cluster", "verify-disks"),
                 ("gnt-cluster", "info"), ("gnt-cluster", "redist-conf"),
                 ("gnt-cluster", "modify"), ("gnt-cluster", "queue"),
                 ("gnt-cluster", "verify")}
#: verbs of the tools above that read the master's files or use SSH themselves
ON_MASTER = {("gnt-instance", "console")}


def _trace(start: float, kind: str, command: str | Sequence[str]) -> None:
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    text = command if isinstance(command, str) else " ".join(command)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{time.monotonic() - start:7.2f} {kind}: {text[:160]}\n")


def _on_host(argv: Sequence[str]) -> bool:
    """Whether ``gnt ARGV`` may run on the host (:data:`HOST_COMMANDS`)."""
    verb = (argv[0], argv[1]) if len(argv) > 1 else (argv[0], "")
    return verb not in ON_MASTER and (argv[0] in HOST_COMMANDS or verb in HOST_COMMANDS)


class GuestClusterFixture:
    """A running guest cluster and the ways tests drive it."""

    def __init__(self, directory: str, nodes: int = 3) -> None:
        self.directory = os.path.abspath(directory)
        self.num_nodes = nodes
        self.gc: guestcluster.GuestCluster | None = None
        self._relay: LuxiRelay | None = None

    def ensure_running(self, cpus: int = guestcluster.DEFAULT_CPUS) -> GuestClusterFixture:
        """Create the cluster unless it exists (after a destroy: again), its guests
        with ``cpus`` virtual CPUs each."""
        if self.gc is not None and guestcluster.is_guest_cluster(self.directory):
            return self
        atexit.register(self.close)
        try:
            self.gc = guestcluster.create(self.directory, self.num_nodes, cpus=cpus)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Destroy the cluster (idempotent)."""
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        if os.path.exists(self.directory):
            guestcluster.destroy(self.directory)

    @property
    def cluster(self) -> guestcluster.GuestCluster:
        assert self.gc is not None, "guest cluster not started"
        return self.gc

    def ssh(self, node: str, command: str | Sequence[str], *, timeout: float = 120.0
            ) -> RunResult:
        """Run a command inside ``node`` (as root, over SSH)."""
        start = time.monotonic()
        try:
            return guestcluster.run_on(self.cluster, node, command, timeout=timeout)
        finally:
            _trace(start, "ssh " + node, command)

    def gnt(self, *argv: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """Run ``gnt-*`` on the master, as the env wrappers do (:func:`guestcluster.run_gnt`),
        from this process: its SSH connection to the master is kept between calls."""
        start = time.monotonic()
        if _on_host(argv):
            try:
                return self._host_gnt(argv, timeout)
            finally:
                _trace(start, "gnt", argv)
        try:
            res = guestcluster.run_gnt(self.cluster, list(argv), timeout=timeout, check=False)
        finally:
            _trace(start, "gnt", argv)
        return subprocess.CompletedProcess(list(argv), 1 if res.exit_code is None else
                                           res.exit_code, res.stdout, res.stderr)

    def _host_gnt(self, argv: Sequence[str], timeout: float
                  ) -> subprocess.CompletedProcess[str]:
        """Run ``gnt-*`` on the host, its LUXI calls carried to the master by the relay."""
        gc = self.cluster
        env = dict(os.environ, PYTHONPATH=gc.repo)
        env[constants.ENV_ROOTDIR] = self._relay_root()
        return subprocess.run([gc.python, os.path.join(gc.repo, "scripts", argv[0]),
                               *argv[1:]], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def _relay_root(self) -> str:
        """The root directory whose master socket the host's LUXI relay serves."""
        gc = self.cluster
        if self._relay is None or self._relay.gc is not gc:
            if self._relay is not None:
                self._relay.close()
            self._relay = LuxiRelay(gc, os.path.join(gc.directory, "luxi"))
        return self._relay.root

    def luxi(self) -> luxi.Client:
        """A LUXI client of the master, from the host (through the relay)."""
        return luxi.Client(Paths(root=self._relay_root()).master_socket, connect_timeout=10.0,
                           rw_timeout=60.0)

    def wrapper(self, *argv: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """Run ``gnt-*`` on the host through the env wrappers (``tools/vcluster env``)."""
        env = dict(os.environ)
        env["PATH"] = os.path.join(self.directory, "bin") + os.pathsep + env.get("PATH", "")
        start = time.monotonic()
        try:
            return subprocess.run(list(argv), env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        finally:
            _trace(start, "wrapper", argv)

    def vcluster(self, *args: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        """Run ``tools/vcluster ARGS`` (the operator's command)."""
        start = time.monotonic()
        guestcluster.forget_connections(self.gc)     # nodes may stop or boot again
        try:
            return subprocess.run([self.cluster.python, VCLUSTER, *args], capture_output=True,
                                  text=True, timeout=timeout, check=False)
        finally:
            _trace(start, "vcluster", args)

    def python(self, node: str, code: str, *, timeout: float = 120.0) -> str:
        """Run Python ``code`` inside ``node`` with the repository importable (the
        host's root is the guest's); its standard output."""
        gc = self.cluster
        res = self.ssh(node, f"PYTHONPATH={shlex.quote(gc.repo)} {shlex.quote(gc.python)}"
                             f" -c {shlex.quote(code)}", timeout=timeout)
        if res.failed:
            raise errors.CommandError(f"python on {node}: {res.fail_reason} {res.stderr}")
        return res.stdout

    def _kvm(self, node: str, call: str) -> Any:
        """What ``KvmHypervisor(<node's paths>).<call>`` returns inside ``node`` (JSON)."""
        code = ("import json; from ganeti import pathutils;"
                " from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor;"
                f" print(json.dumps(KvmHypervisor(pathutils.Paths()).{call}))")
        return json.loads(self.python(node, code))

    def qmp(self, node: str, instance: str, command: str) -> Any:
        """The answer of the QMP ``command`` from the kvm instance's qemu on ``node``."""
        return self._kvm(node, f"qmp_command({instance!r}, {command!r})")

    def kvm_info(self, node: str, instance: str) -> dict[str, Any] | None:
        """The kvm hypervisor's view of ``instance`` on ``node`` (``pid``, ``state``,
        ...), None when no qemu of it runs there."""
        info = self._kvm(node, f"get_instance_info({instance!r})")
        return info if isinstance(info, dict) else None

    @contextlib.contextmanager
    def kvm_enabled(self) -> Iterator[None]:
        """kvm enabled beside the fake hypervisor for the block, fake alone after.

        qemu runs under TCG inside the emulated nodes, where a guest OS takes
        minutes to boot: tests use kvm instances for what the node does
        around qemu (taps, disks, QMP), not for their guests.
        """
        res = self.gnt("gnt-cluster", "modify", "--enabled-hypervisors",
                       f"{constants.HT_FAKE},{constants.HT_KVM}")
        if res.returncode != 0:
            raise errors.CommandError(f"enabling kvm: {res.stdout}{res.stderr}")
        try:
            yield
        finally:
            self.gnt("gnt-cluster", "modify", "--enabled-hypervisors", constants.HT_FAKE)

    def boot_id(self, node: str) -> str:
        res = self.ssh(node, "cat /proc/sys/kernel/random/boot_id")
        if res.failed:
            raise errors.CommandError(f"boot id of {node}: {res.fail_reason}")
        return res.stdout.strip()
