"""ganeti.utils.net: name resolution and TCP ping (loopback only)."""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any

import pytest

from ganeti import constants, errors
from ganeti.utils import net


def test_hostname_prefers_the_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv(constants.ENV_HOSTNAME, "Node7.VCluster")
    assert net.hostname() == "node7.vcluster"


def test_hostname_resolves_forwards_not_by_address(monkeypatch: Any) -> None:
    """The canonical name of the system host name, even when another name (the
    cluster's) comes first for the same address in /etc/hosts."""
    monkeypatch.delenv(constants.ENV_HOSTNAME, raising=False)
    monkeypatch.setattr(socket, "gethostname", lambda: "node1")
    monkeypatch.setattr(socket, "gethostbyaddr", lambda addr: pytest.fail("reverse lookup"))
    monkeypatch.setattr(socket, "getfqdn", lambda *a: pytest.fail("reverse lookup"))

    def getaddrinfo(host: str, port: Any, family: int = 0, type_: int = 0, proto: int = 0,
                    flags: int = 0) -> list[tuple[Any, ...]]:
        assert host == "node1" and flags & socket.AI_CANONNAME
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "Node1.Example.COM",
                 ("192.0.2.1", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert net.hostname() == "node1.example.com"


def test_hostname_falls_back_to_the_system_name(monkeypatch: Any) -> None:
    monkeypatch.delenv(constants.ENV_HOSTNAME, raising=False)
    monkeypatch.setattr(socket, "gethostname", lambda: "Lonely")

    def getaddrinfo(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert net.hostname() == "lonely"


def test_resolve_localhost() -> None:
    fqdn, ip = net.resolve_hostname("localhost")
    assert fqdn == fqdn.lower() and fqdn.startswith("localhost")
    assert ipaddress.IPv4Address(ip).is_loopback


def test_resolve_unknown_name_raises_resolver_error() -> None:
    # the trailing dot keeps resolv.conf search domains out of it; ".invalid"
    # never resolves (RFC 2606)
    with pytest.raises(errors.ResolverError, match="nosuch.invalid"):
        net.resolve_hostname("nosuch.invalid.")


@pytest.mark.parametrize("exc", [
    socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
    socket.herror(1, "Unknown host"),
    UnicodeError("label too long"),
], ids=["gaierror", "herror", "unicode"])
def test_resolver_failures_are_translated(monkeypatch: Any, exc: Exception) -> None:
    def fail(name: str) -> Any:
        raise exc
    monkeypatch.setattr(socket, "gethostbyname_ex", fail)
    with pytest.raises(errors.ResolverError, match="^web1: ") as info:
        net.resolve_hostname("web1")
    assert info.value.__cause__ is exc


def test_resolve_lowercases_and_takes_the_first_address(monkeypatch: Any) -> None:
    monkeypatch.setattr(socket, "gethostbyname_ex",
                        lambda name: ("Web1.Example.COM", ["web1"], ["192.0.2.7", "192.0.2.8"]))
    assert net.resolve_hostname("web1") == ("web1.example.com", "192.0.2.7")
    monkeypatch.setattr(socket, "gethostbyname_ex", lambda name: ("web1", [], []))
    with pytest.raises(errors.ResolverError, match="no IPv4 address"):
        net.resolve_hostname("web1")


def test_tcp_ping_listening_port_is_alive() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        assert net.tcp_ping("127.0.0.1", srv.getsockname()[1], timeout=2.0) is True


def test_tcp_ping_refused_port_is_alive() -> None:
    # a bound socket that does not listen: the kernel refuses connections
    # to its port, and no other process can take the port meanwhile
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
        assert net.tcp_ping("127.0.0.1", port, timeout=2.0) is True


@pytest.mark.parametrize("exc", [
    socket.timeout("timed out"),
    OSError(errno.ENETUNREACH, "Network is unreachable"),
    OSError(errno.EHOSTUNREACH, "No route to host"),
], ids=["timeout", "net-unreachable", "host-unreachable"])
def test_tcp_ping_silence_means_free(monkeypatch: Any, exc: Exception) -> None:
    seen = []

    def connect(address: tuple[str, int], timeout: float) -> Any:
        seen.append((address, timeout))
        raise exc
    monkeypatch.setattr(socket, "create_connection", connect)
    assert net.tcp_ping("192.0.2.1", 1811, timeout=0.5) is False
    assert seen == [(("192.0.2.1", 1811), 0.5)]


def test_resolve_hostname_reads_the_hosts_file_first(tmp_path: Any, monkeypatch: Any) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("192.0.2.1 node1.vcluster\n# 192.0.2.9 web9.example.com\n"
                     "192.0.2.5 Web1.Example.com web1\n")
    env = {net.ENV_HOSTS_FILE: str(hosts)}
    # the line's first name is the canonical one, as the system resolver's
    assert net.resolve_hostname("web1", env=env) == ("web1.example.com", "192.0.2.5")
    assert net.resolve_hostname("WEB1.example.com", env=env) == ("web1.example.com",
                                                                 "192.0.2.5")

    def system(name: str) -> Any:
        return ("from-dns.example.com", [], ["198.51.100.1"])
    monkeypatch.setattr(socket, "gethostbyname_ex", system)
    # a commented line does not count; names it lacks go to the system resolver
    assert net.resolve_hostname("web9.example.com", env=env) == ("from-dns.example.com",
                                                                 "198.51.100.1")


def test_resolve_hostname_skips_an_ipv6_hosts_line(tmp_path: Any, monkeypatch: Any) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("2001:db8::5 web6.example.com\n")
    monkeypatch.setattr(socket, "gethostbyname_ex",
                        lambda name: ("web6.example.com", [], ["198.51.100.6"]))
    # instance names resolve to IPv4 addresses only
    assert net.resolve_hostname("web6.example.com", env={net.ENV_HOSTS_FILE: str(hosts)}) == (
        "web6.example.com", "198.51.100.6")
