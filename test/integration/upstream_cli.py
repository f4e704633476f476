"""Run Ganeti 3.0's own command-line tools against a virtual cluster of ours.

The tools are Debian's ``ganeti-3.0`` (``gnt-*`` scripts and their Python
library under :data:`UPSTREAM_DIR`) and ``ganeti-htools-3.0`` (``hbal``,
``hspace``, ``hinfo`` under :data:`HTOOLS_DIR`); ``make compat`` installs
them (doc/compat.md).  None of their daemons is ever started: the tools
only talk to our master over LUXI.

Upstream's paths are fixed at build time (``/var/lib/ganeti``,
``/var/run/ganeti/socket/ganeti-query``, ``/var/log/ganeti``), so every
command runs in a private mount namespace (``unshare -m``) in which

- the master node's data directory (config, ssconf files) is bound over
  ``/var/lib/ganeti``,
- a scratch directory is bound over ``/var/run/ganeti``, and our master's
  LUXI socket over ``socket/ganeti-query`` inside it (3.0's clients use
  that one path for queries and job submission),
- a scratch directory is bound over ``/var/log/ganeti`` (``commands.log``).

The Python tools run in Debian's ``/usr/bin/python3`` with ``-E -s`` (no
PYTHONPATH, no user site) and a clean environment; the script's own
directory comes first on ``sys.path``, so upstream's ``ganeti`` package
is the one imported, never ours.  (``-I`` would also drop that directory,
which is how the Debian package finds its library.)
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

#: where ganeti-3.0 puts its gnt-* scripts and its ``ganeti`` package
UPSTREAM_DIR = "/usr/share/ganeti/3.0"
#: where ganeti-htools-3.0 puts hbal, hspace, hinfo, hcheck
HTOOLS_DIR = "/usr/lib/ganeti/3.0/usr/bin"
SYSTEM_PYTHON = "/usr/bin/python3"
PACKAGES = ("ganeti-3.0", "ganeti-htools-3.0")
#: the mount points upstream's tools read (created empty on the host when missing)
MOUNT_POINTS = ("/var/lib/ganeti", "/var/run/ganeti", "/var/log/ganeti")
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
#: set to 1 (``make compat``, ``make test``) to fail instead of skipping when unusable
REQUIRE_ENV = "GANETI_TEST_REQUIRE_UPSTREAM"

# $1 node root, $2 scratch directory, $3 our LUXI socket, then the command
_NS_SCRIPT = r"""
set -e
root=$1; scratch=$2; sock=$3; shift 3
mount --make-rprivate /
mkdir -p "$scratch/run/socket" "$scratch/log"
touch "$scratch/run/socket/ganeti-query"
mount --bind "$root/var/lib/ganeti" /var/lib/ganeti
mount --bind "$scratch/run" /var/run/ganeti
mount --bind "$sock" /var/run/ganeti/socket/ganeti-query
mount --bind "$scratch/log" /var/log/ganeti
exec "$@"
"""


def unusable() -> str | None:
    """Why upstream's tools cannot be run here, or None."""
    if os.geteuid() != 0:
        return "upstream's CLI needs a private mount namespace (run as root)"
    for path in (os.path.join(UPSTREAM_DIR, "gnt-cluster"), os.path.join(HTOOLS_DIR, "hbal"),
                 SYSTEM_PYTHON, "/usr/bin/unshare"):
        if not os.path.exists(path):
            return f"{path} is missing (make compat installs {' and '.join(PACKAGES)})"
    return None


def prepare_host() -> None:
    """Create the empty mount points upstream's paths need (nothing is written into them)."""
    for path in MOUNT_POINTS:
        os.makedirs(path, exist_ok=True)


def command(tool: str, *args: str) -> list[str]:
    """argv of an upstream tool: ``gnt-*``, burnin and a script path (``*.py``) under
    Debian's python3, the htools (``h*``) directly."""
    if tool.endswith(".py"):
        return [SYSTEM_PYTHON, "-E", "-s", tool, *args]
    if tool.startswith("h"):
        return [os.path.join(HTOOLS_DIR, tool), *args]
    return [SYSTEM_PYTHON, "-E", "-s", os.path.join(UPSTREAM_DIR, tool), *args]


def run(vc: Any, scratch: str, tool: str, *args: str, timeout: float = 300.0
        ) -> subprocess.CompletedProcess[str]:
    """Run upstream's ``tool args...`` as the master of ``vc`` (see the module docstring)."""
    paths = vc.paths(vc.cluster.master_node.name)
    node_root = paths.root
    os.makedirs(scratch, exist_ok=True)
    argv = ["unshare", "-m", "sh", "-c", _NS_SCRIPT, "sh", node_root, scratch,
            paths.master_socket, *command(tool, *args)]
    return subprocess.run(argv, env=CLEAN_ENV, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def move_instance(vc: Any, tmp_path: Any, user: tuple[str, str], src: str, dest: str,
                  *nodes: str) -> subprocess.CompletedProcess[str]:
    """Upstream's ``move-instance`` of ``src`` to ``dest`` within ``vc`` (source and
    destination cluster alike, RAPI as ``user``: ``(name, password)``), onto
    ``nodes``: the primary, then the secondary if any."""
    password = tmp_path / "rapi-password"
    password.write_text(user[1])
    master = vc.cluster.master_node.ip
    port = str(vc.cluster.rapi_port)
    placement = [f"--dest-primary-node={nodes[0]}"]
    if len(nodes) > 1:
        placement.append(f"--dest-secondary-node={nodes[1]}")
    return run(
        vc, str(tmp_path / "scratch"), "move-instance", "--verbose",
        f"--src-ca-file={vc.paths(vc.cluster.master_node.name).rapi_pem}",
        f"--src-username={user[0]}", f"--src-password-file={password}",
        f"--src-rapi-port={port}", f"--dest-rapi-port={port}",
        f"--dest-instance-name={dest}", *placement,
        # --opportunistic-tries=0: without it, Ganeti 3.0's tool compares None > 0 and
        # fails under Python 3 before it starts (its QA passes --iallocator instead)
        "--opportunistic-tries=0", "--net=0:mac=generate", master, master, src,
        timeout=600)
