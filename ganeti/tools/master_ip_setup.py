#!/usr/bin/env python3
"""The default master IP setup script: ``master_ip_setup.py start|stop``.

The node daemon runs this file (with its own Python interpreter) to add or
remove the cluster's master IP address when the cluster does not use an
external script (``use_external_mip_script``).  It reads the same
environment as Ganeti's script:

* ``MASTER_NETDEV``: the network device (e.g. ``eth0``);
* ``MASTER_IP``: the master IP address;
* ``MASTER_NETMASK``: the prefix length (e.g. ``32``);
* ``CLUSTER_IP_VERSION``: ``4`` or ``6``.

``start`` runs ``ip address add IP/NETMASK dev NETDEV`` and then, for IPv4
and only when ``arping`` is installed, ``arping -U -c 3 -I NETDEV IP`` to
update the neighbours' ARP caches (a missing or failing ``arping`` is only
a warning).  ``stop`` runs ``ip address del IP/NETMASK dev NETDEV``.  Both
are idempotent: an address that is already present (start) or already gone
(stop) counts as success.

The file uses only the standard library: it runs as a plain script, not as
part of the ``ganeti`` package.  :func:`build_commands` is the pure part
(what would run); :func:`main` runs it.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["ACTIONS", "build_commands", "read_environment", "main"]

ACTIONS = ("start", "stop")
_NETDEV_RE = re.compile(r"^[A-Za-z0-9_.:@][A-Za-z0-9_.:@-]{0,63}$")
# "ip" messages meaning there is nothing to do: older kernels answer with the
# errno text (RTNETLINK answers: ...), newer ones with an extended ack message
_ALREADY_PRESENT = ("File exists", "address already assigned")
_ALREADY_ABSENT = ("Cannot assign requested address", "address not found")


def read_environment(env: Mapping[str, str]) -> tuple[str, str, int, int]:
    """``(netdev, ip, netmask, ip_version)`` from ``env``; ValueError if invalid."""
    netdev = env.get("MASTER_NETDEV", "")
    if not _NETDEV_RE.match(netdev):
        raise ValueError(f"invalid or missing MASTER_NETDEV {netdev!r}")
    version = env.get("CLUSTER_IP_VERSION", "4")
    if version not in ("4", "6"):
        raise ValueError(f"invalid CLUSTER_IP_VERSION {version!r} (4 or 6)")
    try:
        address = ipaddress.ip_address(env.get("MASTER_IP", ""))
    except ValueError:
        raise ValueError(f"invalid or missing MASTER_IP {env.get('MASTER_IP', '')!r}") from None
    if address.version != int(version):
        raise ValueError(f"MASTER_IP {address} is not an IPv{version} address")
    text = env.get("MASTER_NETMASK", "")
    limit = 32 if address.version == 4 else 128
    if not text.isdigit() or not 0 <= int(text) <= limit:
        raise ValueError(f"invalid MASTER_NETMASK {text!r} (0..{limit})")
    return netdev, str(address), int(text), address.version


def build_commands(action: str, netdev: str, ip: str, netmask: int, ip_version: int,
                   have_arping: bool) -> list[list[str]]:
    """The commands ``action`` runs, in order (pure: nothing is executed).

    >>> build_commands("stop", "eth0", "192.0.2.1", 32, 4, True)
    [['ip', 'address', 'del', '192.0.2.1/32', 'dev', 'eth0']]
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r} (start or stop)")
    verb = "add" if action == "start" else "del"
    commands = [["ip", "address", verb, f"{ip}/{netmask}", "dev", netdev]]
    if action == "start" and ip_version == 4 and have_arping:
        commands.append(["arping", "-U", "-c", "3", "-I", netdev, ip])
    return commands


Runner = Callable[[Sequence[str]], tuple[int, str]]


def _run(argv: Sequence[str]) -> tuple[int, str]:
    try:
        res = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, f"{argv[0]}: {exc}"
    return res.returncode, (res.stdout + res.stderr).decode("utf-8", "replace")


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None, *,
         run: Runner = _run, which: Callable[[str], str | None] = shutil.which) -> int:
    """Run the script; returns the exit status (0 success, 1 failure, 2 usage)."""
    import os
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if len(args) != 1 or args[0] not in ACTIONS:
        sys.stderr.write("usage: master-ip-setup start|stop\n")
        return 2
    action = args[0]
    try:
        netdev, ip, netmask, version = read_environment(env)
    except ValueError as exc:
        sys.stderr.write(f"master-ip-setup: {exc}\n")
        return 1
    commands = build_commands(action, netdev, ip, netmask, version,
                              have_arping=which("arping") is not None)
    for command in commands:
        code, output = run(command)
        if code == 0:
            continue
        if command[0] == "arping":
            sys.stderr.write(f"master-ip-setup: warning: {' '.join(command)} failed"
                             f" ({code}): {output.strip()}\n")
            continue
        benign = _ALREADY_PRESENT if action == "start" else _ALREADY_ABSENT
        if any(text.lower() in output.lower() for text in benign):
            continue
        sys.stderr.write(f"master-ip-setup: {' '.join(command)} failed ({code}):"
                         f" {output.strip()}\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
