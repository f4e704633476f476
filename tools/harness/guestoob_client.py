"""The guest side of a guest cluster's out-of-band power control (tools/harness/guestoob.py).

``tools/vcluster-guest-oob COMMAND NODE`` runs this on the master, inside
an emulated guest, where every imported module costs: so this module uses
the standard library only (no ``ganeti``), and the script starts Python
without ``site``.  It holds the protocol's pure parts the server shares
(:func:`auth_key`, :func:`sign`, :func:`request_line`, :func:`parse_answer`)
and the client (:func:`client_main`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import sys
from collections.abc import Sequence

__all__ = ["PORT", "COMMANDS", "GUEST_KEY_FILE", "MAX_LINE", "auth_key", "sign",
           "request_line", "parse_answer", "host_from_cmdline", "client_main"]

#: the power server's TCP port on the host's bridge address
PORT = 1815
#: the out-of-band commands (``constants.OOB_COMMANDS``, doc/oob.md)
COMMANDS = ("health", "power-cycle", "power-off", "power-on", "power-status")
#: the cluster key inside a guest (``Paths("/").ssh_key_file``)
GUEST_KEY_FILE = "/var/lib/ganeti/id_cluster"
MAX_LINE = 4096
_KEY_LABEL = b"vcluster-guest-oob\0"


def auth_key(key_file_text: str) -> bytes:
    """The HMAC key for the cluster key file's contents (never the key itself)."""
    return hashlib.sha256(_KEY_LABEL + key_file_text.strip().encode()).digest()


def sign(key: bytes, nonce: str, command: str, node: str) -> str:
    """The hex HMAC-SHA256 of ``nonce command node``."""
    return hmac.new(key, f"{nonce} {command} {node}".encode(), hashlib.sha256).hexdigest()


def request_line(key: bytes, nonce: str, command: str, node: str) -> bytes:
    """The client's request for the server's ``nonce``."""
    return (json.dumps({"command": command, "node": node,
                        "mac": sign(key, nonce, command, node)}) + "\n").encode()


def parse_answer(line: bytes) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of an answer line; a broken one is a failure."""
    try:
        data = json.loads(line.decode())
        return int(data["status"]), str(data["output"]), str(data["error"])
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        return 1, "", f"bad answer from the power server: {line[:200]!r}"


def host_from_cmdline(cmdline: str) -> str:
    """The host's bridge address for a guest's kernel command line (``vcg.ip``,
    ``vcg.prefix``: the host is at .254 of the node's network, doc/vcluster.md).

    Raises :class:`ValueError` when the words are missing or wrong.
    """
    words = dict(w.split("=", 1) for w in cmdline.split() if "=" in w)
    if "vcg.ip" not in words or "vcg.prefix" not in words:
        raise ValueError("not a guest-cluster node (no vcg.ip and vcg.prefix)")
    octets = [int(part) for part in words["vcg.ip"].split(".")]
    prefix = int(words["vcg.prefix"])
    if len(octets) != 4 or not all(0 <= o <= 255 for o in octets) or not 8 <= prefix <= 24:
        raise ValueError(f"bad address {words['vcg.ip']}/{prefix}")
    address = sum(o << (24 - 8 * i) for i, o in enumerate(octets))
    network = address & ~((1 << (32 - prefix)) - 1) & 0xFFFFFFFF
    host = network + 254
    return ".".join(str((host >> shift) & 255) for shift in (24, 16, 8, 0))


def _ask(host: str, key: bytes, command: str, node: str, timeout: float) -> tuple[int, str, str]:
    with socket.create_connection((host, PORT), timeout=10.0) as sock:
        sock.settimeout(timeout)
        reader = sock.makefile("rb")
        nonce = json.loads(reader.readline(MAX_LINE).decode())["nonce"]
        sock.sendall(request_line(key, str(nonce), command, node))
        return parse_answer(reader.readline(MAX_LINE))


def client_main(argv: Sequence[str] | None = None) -> int:
    """``vcluster-guest-oob COMMAND NODE`` inside a guest (the OOB protocol, doc/oob.md)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        sys.stderr.write("usage: vcluster-guest-oob power-on|power-off|power-cycle|"
                         "power-status|health NODE\n")
        return 2
    command, node = args
    if command not in COMMANDS:
        sys.stderr.write(f"unsupported out-of-band command '{command}'\n")
        return 2
    try:
        host = os.environ.get("VCLUSTER_OOB_HOST")
        if not host:
            with open("/proc/cmdline", encoding="utf-8") as fh:
                host = host_from_cmdline(fh.read())
        with open(os.environ.get("VCLUSTER_OOB_KEY", GUEST_KEY_FILE), encoding="utf-8") as fh:
            key = auth_key(fh.read())
        status, output, error = _ask(host, key, command, node, timeout=300.0)
    except (OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"vcluster-guest-oob {command} {node}: {exc}\n")
        return 1
    if output:
        sys.stdout.write(output + "\n")
    if error:
        sys.stderr.write(error + "\n")
    return status
