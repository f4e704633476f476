"""Master role on a node: bring the cluster's master IP address up or down.

Both procedures run a *master IP setup script* with the argument ``start``
or ``stop`` and a clean environment (``PATH`` plus):

* ``MASTER_NETDEV``, ``MASTER_IP``, ``MASTER_NETMASK``;
* ``CLUSTER_IP_VERSION``: ``4`` or ``6`` (from the cluster's IP family).

The script is the one shipped with the package
(``ganeti/tools/master_ip_setup.py``, run with the node daemon's own
Python) or, when the cluster sets ``use_external_mip_script``, the node's
``etc/ganeti/scripts/master-ip-setup``
(:func:`ganeti.pathutils.external_master_setup_script`).  A failing script
raises :class:`errors.OpExecError` carrying its output.  An empty
``netdev`` means "no master IP": the call is a logged no-op.

``master_params`` (built by ``cmdlib.roles.master_ip_params``) is
``{"uuid", "name", "ip", "netmask", "netdev", "ip_family"}`` with
``ip_family`` 2 (AF_INET) or 10 (AF_INET6).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import sys
from typing import Any

from ganeti import errors, pathutils
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, procedure
from ganeti.utils import process

__all__ = ["node_activate_master_ip", "node_deactivate_master_ip"]

logger = logging.getLogger(__name__)

#: the default script, shipped inside the package (only the standard library)
DEFAULT_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "tools", "master_ip_setup.py")
MIP_SCRIPT_TIMEOUT = 60.0
_SCRIPT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_NETDEV_RE = re.compile(r"^[A-Za-z0-9_.:@][A-Za-z0-9_.:@-]{0,63}$")
_MAX_OUTPUT = 16 * 1024
_AF_INET6 = 10


def master_ip_env(master_params: dict[str, Any]) -> dict[str, str]:
    """The script environment for ``master_params`` (validated).

    Raises :class:`errors.OpExecError` naming the bad parameter.
    """
    netdev = str(master_params.get("netdev") or "")
    if not _NETDEV_RE.match(netdev):
        raise errors.OpExecError(f"Invalid master network device {netdev!r}")
    try:
        address = ipaddress.ip_address(str(master_params.get("ip") or ""))
    except ValueError:
        raise errors.OpExecError(
            f"Invalid master IP address {master_params.get('ip')!r}") from None
    version = 6 if master_params.get("ip_family") == _AF_INET6 else 4
    if address.version != version:
        raise errors.OpExecError(f"Master IP {address} does not match the cluster's IP"
                                 f" version {version}")
    netmask = master_params.get("netmask")
    limit = 32 if version == 4 else 128
    if (not isinstance(netmask, int) or isinstance(netmask, bool)
            or not 0 <= netmask <= limit):
        raise errors.OpExecError(f"Invalid master netmask {netmask!r} (0..{limit})")
    return {"MASTER_NETDEV": netdev, "MASTER_IP": str(address),
            "MASTER_NETMASK": str(netmask), "CLUSTER_IP_VERSION": str(version)}


def setup_script_argv(ctx: NodeContext, action: str, use_external: bool) -> list[str]:
    """The command line of the setup script for ``action`` (start/stop)."""
    if use_external:
        script = pathutils.external_master_setup_script(ctx.paths)
        if not os.path.isfile(script) or not os.access(script, os.X_OK):
            raise errors.OpExecError(f"The external master IP setup script {script} does"
                                     " not exist or is not executable")
        return [script, action]
    return [sys.executable, DEFAULT_SCRIPT, action]


def _run_setup(ctx: NodeContext, action: str, master_params: dict,
               use_external_mip_script: bool) -> None:
    if not master_params.get("netdev"):
        logger.info("Master IP %s: no master network device configured, nothing to do",
                    action)
        return
    env = {"PATH": _SCRIPT_PATH, **master_ip_env(master_params)}
    argv = setup_script_argv(ctx, action, use_external_mip_script)
    try:
        res = process.run_command(argv, env=env, reset_env=True, cwd=ctx.paths.root,
                                  timeout=MIP_SCRIPT_TIMEOUT)
    except errors.CommandError as exc:
        raise errors.OpExecError(f"Cannot run the master IP setup script: {exc}") from exc
    what = "external" if use_external_mip_script else "default"
    if res.failed:
        output = res.output.strip()
        if len(output) > _MAX_OUTPUT:
            output = output[:_MAX_OUTPUT] + "\n[output truncated]"
        raise errors.OpExecError(
            f"Master IP setup script ({what}) '{action}' for {env['MASTER_IP']} on"
            f" {env['MASTER_NETDEV']} failed: {res.fail_reason}; output: {output or '(none)'}")
    logger.info("Master IP %s/%s on %s: %s done (%s script)", env["MASTER_IP"],
                env["MASTER_NETMASK"], env["MASTER_NETDEV"], action, what)


@procedure(FAST, fenced=True)
def node_activate_master_ip(ctx: NodeContext, master_params: dict,
                            use_external_mip_script: bool) -> None:
    """Run the master IP setup script 'start' ({uuid, name, ip, netmask, netdev, ip_family});
    empty netdev: no-op. -> None

    Bring the master IP up on this node (setup script ``start``).
    """
    _run_setup(ctx, "start", master_params, use_external_mip_script)


@procedure(FAST, fenced=True)
def node_deactivate_master_ip(ctx: NodeContext, master_params: dict,
                              use_external_mip_script: bool) -> None:
    """Run the master IP setup script 'stop' (same arguments). -> None

    Take the master IP down on this node (setup script ``stop``).
    """
    _run_setup(ctx, "stop", master_params, use_external_mip_script)
