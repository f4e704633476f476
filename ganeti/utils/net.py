"""Host names and addresses: this node's identity, name resolution, TCP ping.

:func:`resolve_hostname` and :func:`tcp_ping` are the I/O behind the
instance name and IP checks (``gnt-instance add``/``rename``); the logical
units call them through this module so that tests can replace them.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping

from ganeti import constants, errors

__all__ = ["hostname", "resolve_hostname", "resolve_host", "tcp_ping", "connect_error",
           "TCP_PING_TIMEOUT",
           "ENV_HOSTS_FILE"]

#: environment variable naming an ``/etc/hosts``-style file :func:`resolve_host`
#: consults first (a virtual cluster's names, doc/vcluster.md)
ENV_HOSTS_FILE = "GANETI_HOSTS_FILE"

#: seconds :func:`tcp_ping` waits for an answer by default
TCP_PING_TIMEOUT = 2.0


def hostname() -> str:
    """This node's name: ``$GANETI_HOSTNAME`` when set, else the FQDN.

    The FQDN is the system host name resolved *forwards* (the resolver's
    canonical name, as Ganeti does), never by a reverse lookup of its
    address: a cluster name that shares the master's address in
    ``/etc/hosts`` must not become the master node's name.  When the name
    does not resolve, the host name itself is the answer.
    """
    name = os.environ.get(constants.ENV_HOSTNAME)
    if name:
        return name.lower()
    system = socket.gethostname()
    try:
        infos = socket.getaddrinfo(system, None, 0, socket.SOCK_STREAM, 0,
                                   socket.AI_CANONNAME)
    except (OSError, UnicodeError):
        return system.lower()
    canonical = next((info[3] for info in infos if info[3]), "")
    return (canonical or system).lower()


def resolve_hostname(name: str, *, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Resolve ``name``: ``(fqdn, ipv4_address)``, from ``$GANETI_HOSTS_FILE`` first
    (the line's first name is the FQDN), then the system resolver.

    The FQDN is the canonical name, lower-cased; the address is the first
    IPv4 address the resolver gives.  Raises :class:`errors.ResolverError`
    (message ``"<name>: <reason>"``) when the name does not resolve.
    """
    env = os.environ if env is None else env
    hosts = env.get(ENV_HOSTS_FILE)
    if hosts:
        entry = _hosts_entry(hosts, name)
        if entry is not None and _is_ipv4(entry[0]):
            return entry[1], entry[0]
    try:
        fqdn, _aliases, addresses = socket.gethostbyname_ex(name)
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise errors.ResolverError(f"{name}: {reason}") from exc
    if not addresses:
        raise errors.ResolverError(f"{name}: no IPv4 address")
    return fqdn.lower(), addresses[0]


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _hosts_lookup(path: str, name: str) -> str | None:
    entry = _hosts_entry(path, name)
    return entry[0] if entry is not None else None


def _hosts_entry(path: str, name: str) -> tuple[str, str] | None:
    """``(address, canonical name)`` of ``name`` in the hosts file ``path``, or None."""
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except OSError as exc:
        raise errors.ResolverError(f"{name}: cannot read hosts file {path}: {exc}") from exc
    name = name.lower()
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and name in (f.lower() for f in fields[1:]):
            return fields[0], fields[1].lower()
    return None


def resolve_host(name: str, *, env: Mapping[str, str] | None = None) -> str:
    """The IPv4 address of ``name``: ``$GANETI_HOSTS_FILE`` first, then DNS.

    Raises :class:`errors.ResolverError` when neither knows the name.
    """
    env = os.environ if env is None else env
    hosts = env.get(ENV_HOSTS_FILE)
    if hosts:
        found = _hosts_lookup(hosts, name)
        if found:
            return found
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise errors.ResolverError(f"{name}: {exc}") from exc
    if not infos:
        raise errors.ResolverError(f"{name}: no IPv4 address")
    return str(infos[0][4][0])


def tcp_ping(ip: str, port: int, timeout: float = TCP_PING_TIMEOUT) -> bool:
    """Whether a host is alive at ``ip``: a TCP connect to ``port`` answers.

    As Ganeti's ``TcpPing``, both an accepted connection and an active
    refusal (the host sent a reset) count as alive; a timeout, an
    unreachable network or any other socket error counts as not alive.
    Never raises for network errors.
    """
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return True
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def connect_error(host: str, port: int, timeout: float) -> str | None:
    """Why a TCP connection to ``host:port`` cannot be made within ``timeout``
    seconds (a refusal included), or None when it can (it is closed again)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
