"""``gnt-instance console``: run an instance's console command, here or on its primary.

A console of kind ``ssh`` (kvm's serial console: ``socat`` on the UNIX
socket of the instance, doc/kvm.md, "Lifecycle") is a command that must run on
the instance's primary node.  On the primary it runs here; on any other node
it runs on the primary over the cluster's SSH (:class:`ganeti.ssh.SshRunner`
with the cluster key, the node's address and SSH port from ssconf), on a
remote terminal wired to ours, like ``ssh -t``.  The primary's host key must
already be in the cluster's ``known_hosts``: a console never trusts a new
host.  ``--show-cmd`` prints the command instead: the local one on the
primary, elsewhere the OpenSSH command line doing the same as we would.

The plan (:func:`plan_console`) is pure; :func:`run_console` does the I/O.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ganeti import errors

__all__ = ["ConsolePlan", "plan_console", "run_console"]


@dataclass(frozen=True)
class ConsolePlan:
    """How to reach one instance's console command.

    ``remote`` is False when the command runs here (this node is the
    primary); else it runs over SSH on ``address``:``port`` as ``user``.
    """

    instance: str
    command: list[str]
    host: str
    remote: bool
    address: str = ""
    port: int = 22
    user: str = "root"

    @property
    def command_text(self) -> str:
        """The console command as one shell line."""
        return shlex.join(self.command)


def plan_console(instance: str, info: dict[str, Any], here: str,
                 targets: dict[str, tuple[str, int]]) -> ConsolePlan:
    """The plan for a console of kind ``ssh`` described by ``info`` (OpInstanceConsole).

    ``here`` is this node's name, ``targets`` maps node names to their
    ``(address, ssh_port)``.  Raises :class:`errors.OpPrereqError` when the
    primary is not a known node.
    """
    command = info.get("command")
    argv = [str(a) for a in command] if isinstance(command, list) else \
        ["sh", "-c", str(command)]
    host = str(info.get("host") or "")
    if not host or host.lower() == here.lower():
        return ConsolePlan(instance, argv, host or here, remote=False)
    if host not in targets:
        raise errors.OpPrereqError(f"The primary node {host} of {instance} is not in this"
                                   " node's ssconf; cannot reach it over SSH",
                                   errors.ECODE_NOENT)
    address, port = targets[host]
    return ConsolePlan(instance, argv, host, remote=True, address=address, port=port,
                       user=str(info.get("user") or "root"))


def _runner(paths: Any, plan: ConsolePlan) -> Any:
    from ganeti import ssh
    return ssh.SshRunner(paths.ssh_key_file, known_hosts_path=paths.known_hosts_file,
                         port=plan.port, user=plan.user, accept_new_hosts=False)


def run_console(instance: str, info: dict[str, Any], *, show_command: bool,
                out: Any, err: Any) -> int:
    """Run (or, with ``show_command``, print through ``out``) the console command.

    Returns the command's exit status; 1 with a message through ``err``
    when it cannot be started (the primary unreachable over SSH, its host
    key unknown or changed, the cluster key refused, no terminal).
    """
    import subprocess

    from ganeti import pathutils
    from ganeti.client import cluster_common
    from ganeti.utils import net
    paths = pathutils.get_paths()
    host = str(info.get("host") or "")
    targets: dict[str, tuple[str, int]] = {}
    if host and host.lower() != net.hostname().lower():
        try:
            targets = {n: (a, p) for n, a, p in cluster_common.node_ssh_targets(paths, [host])}
        except errors.GanetiError:
            targets = {}
    try:
        plan = plan_console(instance, info, net.hostname(), targets)
    except errors.OpPrereqError as exc:
        err(str(exc))
        return 1
    if not plan.remote:
        if show_command:
            out(plan.command_text)
            return 0
        try:
            return subprocess.call(plan.command)
        except OSError as exc:
            err(f"Cannot run the console command {plan.command_text}: {exc}")
            return 1
    runner = _runner(paths, plan)
    if show_command:
        out(shlex.join(runner.openssh_argv(plan.address, plan.command)))
        return 0
    try:
        return int(runner.interactive(plan.address, plan.command))
    except errors.CommandError as exc:
        hint = ""
        if "is unknown" in str(exc):
            hint = (f" (to trust {plan.host}'s current key, record it with"
                    f" 'gnt-cluster command -n {plan.host} true')")
        err(f"Cannot attach to the console of {instance} on its primary node {plan.host}"
            f" over SSH: {exc}{hint}")
        return 1
