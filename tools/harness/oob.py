"""An out-of-band program for virtual clusters: "power" that stops and starts a node.

``tools/vcluster-oob COMMAND NODE`` speaks Ganeti's out-of-band protocol
(doc/oob.md) for the nodes of the virtual cluster it runs in:

* ``power-off``: the node's machine loses power: its daemons stop (SSH
  server, node daemon, and master daemon and RAPI if it runs them), its
  fake-hypervisor guests are gone and any other process of its root (a kvm
  instance's qemu) is killed;
* ``power-on``: the node "boots": its daemons start again with a new boot
  id (``vcluster.start``), and it answers before the program exits;
* ``power-cycle``: both; ``power-status``: ``{"powered": B}``, B being
  whether its node daemon runs; ``health``: ``[[item, status], ...]``
  (node daemon, SSH server, disk space, plus the items of an optional
  ``<node root>/oob-health.json`` that tests use to report a WARNING).

Exit status 0 with the command's JSON on standard output, 1 with the
reason on standard error, 2 for a command it does not know.  Each call is
appended to ``DIR/oob.log`` (``<time> <command> <node>``).  The cluster's
directory comes from ``$VCLUSTER_DIR``, else from the directory of
``$GANETI_HOSTS_FILE`` or the parent of ``$GANETI_ROOTDIR`` (the node
daemon that runs the program has both).

The program is reached through the ``oob_program`` node parameter, a
canonical path below each node's root: :func:`install` links
:data:`CANONICAL_PATH` to ``tools/vcluster-oob`` in every node's root
(``tools/vcluster-oob install DIR``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Sequence

from ganeti import constants, daemonctl, errors
from ganeti.hypervisor.fake import FakeHypervisor
from ganeti.pathutils import Paths
from tools.harness import procscan, vcluster

__all__ = ["CANONICAL_PATH", "SCRIPT", "HEALTH_FILE", "LOG_NAME", "install", "cluster_dir",
           "power_off", "power_on", "powered", "health", "main"]

#: where ``oob_program`` points on every node of a virtual cluster (below its root)
CANONICAL_PATH = "/usr/lib/ganeti/vcluster-oob"
#: the executable the canonical path links to
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "vcluster-oob")
#: extra health items of a node (a JSON list of [item, status]), below its root
HEALTH_FILE = "oob-health.json"
LOG_NAME = "oob.log"
#: free space of a node's file system below which disk space is a WARNING / CRITICAL
DISK_WARNING, DISK_CRITICAL = 0.05, 0.01


def install(vc: vcluster.VCluster) -> str:
    """Link :data:`CANONICAL_PATH` to :data:`SCRIPT` in every node's root; the path."""
    for node in vc.nodes:
        local = os.path.join(node.root, CANONICAL_PATH.lstrip("/"))
        os.makedirs(os.path.dirname(local), exist_ok=True)
        if os.path.lexists(local):
            os.unlink(local)
        os.symlink(SCRIPT, local)
    return CANONICAL_PATH


def cluster_dir(env: dict[str, str]) -> str:
    """The virtual cluster's directory for the program's environment ``env``."""
    candidates = [env.get("VCLUSTER_DIR", "")]
    if env.get("GANETI_HOSTS_FILE"):
        candidates.append(os.path.dirname(env["GANETI_HOSTS_FILE"]))
    if env.get(constants.ENV_ROOTDIR):
        candidates.append(os.path.dirname(env[constants.ENV_ROOTDIR].rstrip("/")))
    for candidate in candidates:
        if candidate and os.path.isfile(os.path.join(candidate, "vcluster.json")):
            return candidate
    raise errors.ConfigurationError("Not run inside a virtual cluster (no vcluster.json next"
                                    " to $GANETI_HOSTS_FILE or $GANETI_ROOTDIR; set"
                                    " $VCLUSTER_DIR)")


def _kill_leftovers(root: str) -> list[int]:
    """Kill the processes running for node root ``root`` (not this one); their pids."""
    item = f"{constants.ENV_ROOTDIR}={root}".encode()
    me = os.getpid()
    pids = [pid for pid in procscan.pids_whose("environ", lambda environ: item in
                                                environ.split(b"\0")) if pid != me]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def power_off(vc: vcluster.VCluster, name: str) -> None:
    """The node loses power: daemons stopped, guests gone, leftover processes killed."""
    node = vc.node(name)
    vcluster.stop(vc, node.name)
    hv = FakeHypervisor(Paths(root=node.root))
    for instance in hv.list_instances():
        hv.stop_instance(instance, force=True)
    _kill_leftovers(node.root)


def power_on(vc: vcluster.VCluster, name: str) -> None:
    """The node boots: its daemons start (new boot id) and answer."""
    vcluster.start(vc, vc.node(name).name)


def powered(vc: vcluster.VCluster, name: str) -> bool:
    """Whether the node is "on": its node daemon runs."""
    return daemonctl.daemon_pid(Paths(root=vc.node(name).root), constants.NODED) is not None


def health(vc: vcluster.VCluster, name: str) -> list[list[str]]:
    """The node's health items: ``[[item, status], ...]``."""
    node = vc.node(name)
    paths = Paths(root=node.root)
    ok, critical = constants.OOB_STATUS_OK, constants.OOB_STATUS_CRITICAL
    items = [["node daemon", ok if powered(vc, name) else critical]]
    if vc.ssh_port:
        up = daemonctl.daemon_pid(paths, vcluster.SSHD_NAME) is not None
        items.append(["SSH server", ok if up else critical])
    try:
        st = os.statvfs(node.root)
        free = st.f_bavail / st.f_blocks if st.f_blocks else 0.0
        disk = (critical if free < DISK_CRITICAL else
                constants.OOB_STATUS_WARNING if free < DISK_WARNING else ok)
    except OSError:
        disk = constants.OOB_STATUS_UNKNOWN
    items.append(["disk space", disk])
    try:
        with open(os.path.join(node.root, HEALTH_FILE), encoding="utf-8") as fh:
            items += [[str(item), str(status)] for item, status in json.load(fh)]
    except FileNotFoundError:
        pass
    return items


def _log(directory: str, command: str, node: str) -> None:
    with open(os.path.join(directory, LOG_NAME), "a", encoding="utf-8") as fh:
        fh.write(f"{time.time():.3f} {command} {node}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``vcluster-oob COMMAND NODE`` (the protocol) or ``vcluster-oob install DIR``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        sys.stderr.write("usage: vcluster-oob power-on|power-off|power-cycle|power-status|"
                         "health NODE | vcluster-oob install DIR\n")
        return 2
    command, target = args
    if command == "install":
        print(install(vcluster.load(target)))
        return 0
    if command not in constants.OOB_COMMANDS:
        sys.stderr.write(f"unsupported out-of-band command '{command}'\n")
        return 2
    try:
        directory = cluster_dir(dict(os.environ))
        _log(directory, command, target)
        vc = vcluster.load(directory)
        if command == constants.OOB_POWER_OFF:
            power_off(vc, target)
        elif command == constants.OOB_POWER_ON:
            power_on(vc, target)
        elif command == constants.OOB_POWER_CYCLE:
            power_off(vc, target)
            power_on(vc, target)
        elif command == constants.OOB_POWER_STATUS:
            print(json.dumps({constants.OOB_POWER_STATUS_POWERED: powered(vc, target)}))
        else:
            print(json.dumps(health(vc, target)))
    except (errors.GanetiError, OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"vcluster-oob {command} {target}: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
