"""The consoles of kvm instances: their descriptions, and VNC's port, address and password.

:func:`describe` is what ``gnt-instance console`` and RAPI's console
resource show: the serial console (when ``serial_console``), then VNC
(when ``vnc_bind_address``).

An instance with ``vnc_bind_address`` gets, when it starts, the first port
of :data:`ganeti.hypervisor.kvm.cmdline.VNC_PORTS` that no instance of the
node holds and that can be bound (:func:`pick_port`); it is kept in the
runtime record (``vnc_port``), from which :func:`address` tells where the
node itself connects to it (the web console's broker: doc/webui.md,
"Consoles").  With ``vnc_password_file``, qemu asks for a password
(``-vnc ...,password=on``) and the hypervisor sets it over QMP once qemu
runs: the file's first line (:func:`password`), read on the node.

With ``vnc_tls`` qemu's VNC server speaks VeNCrypt: x509 with the
certificates of ``vnc_x509_path`` (:data:`SERVER_FILES`; it checks clients'
certificates against ``ca-cert.pem`` when ``vnc_x509_verify``), else
anonymous TLS.  :func:`check_tls` refuses a start whose files are missing,
the node's client certificate (:data:`CLIENT_FILES`) too when qemu checks
clients; :func:`tls` tells the node's console end how to reach it.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Collection, Iterable
from typing import Any

from ganeti import errors
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import cmdline
from ganeti.utils import io as utils_io
from ganeti.utils import unixsock

__all__ = ["describe", "connect_address", "address", "start_port", "pick_port", "password",
           "set_password", "with_vnc_of", "CA_CERT", "SERVER_FILES", "CLIENT_FILES",
           "check_tls", "tls"]

#: the files of a ``vnc_x509_path`` directory (qemu's names; libvirt lays them out so)
CA_CERT = "ca-cert.pem"
SERVER_FILES = (CA_CERT, "server-cert.pem", "server-key.pem")
#: the certificate and key the node presents to a VNC server with ``vnc_x509_verify``
#: (signed by that CA), in the same directory
CLIENT_FILES = ("client-cert.pem", "client-key.pem")


def describe(spec: base.InstanceSpec, node_name: str, serial_socket: str,
             vnc_address: tuple[str, int] | None) -> list[dict[str, Any]]:
    """The consoles of ``spec`` on ``node_name``: the serial console (socat on its
    UNIX socket ``serial_socket``: :func:`serial_command`) when ``serial_console``,
    VNC (its port when it runs: ``vnc_address``) when ``vnc_bind_address``, in
    that order; a message when neither.  VNC's entry has Ganeti's ``display``
    too (port - 5900)."""
    hvp = spec.hvparams
    found: list[dict[str, Any]] = []
    if hvp.get("serial_console", True):
        found.append({"instance": spec.name, "kind": base.CONS_SSH, "host": node_name,
                      "user": "root", "port": None, "message": None,
                      "command": serial_command(serial_socket)})
    if hvp.get("vnc_bind_address"):
        port = vnc_address[1] if vnc_address else None
        found.append({"instance": spec.name, "kind": base.CONS_VNC, "host": node_name,
                      "port": port, "user": None, "command": None,
                      "display": port - cmdline.VNC_BASE_PORT if port else None,
                      "message": f"VNC of {spec.name} on {hvp['vnc_bind_address']}"})
    return found or [{"instance": spec.name, "kind": base.CONS_MESSAGE, "host": node_name,
                      "port": None, "user": None, "command": None,
                      "message": f"Instance {spec.name} has neither a serial console"
                                 " nor VNC"}]


def serial_command(serial_socket: str) -> list[str]:
    """The command attaching a terminal to the serial console at ``serial_socket``:
    ``socat STDIO,raw,echo=0,escape=0x1d UNIX-CONNECT:<path>``.  A path over the
    Unix socket limit (:data:`ganeti.utils.unixsock.MAX_PATH`: a long run
    directory or instance name), which socat refuses, is reached from its
    directory instead: ``env -C <dir> socat ... UNIX-CONNECT:<name>``."""
    socat = ["socat", "STDIO,raw,echo=0,escape=0x1d"]
    if not unixsock.too_long(serial_socket):
        return [*socat, f"UNIX-CONNECT:{serial_socket}"]
    directory, name = os.path.split(serial_socket)
    return ["env", "-C", directory, *socat, f"UNIX-CONNECT:{name}"]


def connect_address(bind: str) -> str:
    """The address the node itself reaches a VNC server bound to ``bind`` at: the
    loopback address for a wildcard bind, else ``bind``."""
    if bind in ("0.0.0.0", ""):
        return "127.0.0.1"
    if bind == "::":
        return "::1"
    return bind


def address(runtime: dict[str, Any] | None) -> tuple[str, int] | None:
    """``(host, port)`` of the VNC server of the instance with ``runtime`` (its
    runtime record), or None when it was started without VNC."""
    runtime = runtime or {}
    port = runtime.get("vnc_port")
    bind = ((runtime.get("spec") or {}).get("hvparams") or {}).get("vnc_bind_address")
    if not isinstance(port, int) or not bind:
        return None
    return connect_address(str(bind)), port


def start_port(hvp: dict[str, Any], runtimes: Iterable[dict[str, Any] | None]) -> int | None:
    """The VNC port for an instance with hvparams ``hvp`` starting on a node whose
    instances have ``runtimes`` (None: it has no VNC).  Raises
    :class:`errors.HypervisorError` for a ``vnc_bind_address`` that is not an
    IP address (an interface name) or when no port is free."""
    bind = str(hvp.get("vnc_bind_address") or "")
    if not bind:
        return None
    try:
        ipaddress.ip_address(bind)
    except ValueError:
        raise errors.HypervisorError(f"vnc_bind_address {bind!r}: an interface name is not"
                                     " supported yet, give an IP address") from None
    return pick_port(bind, {(r or {}).get("vnc_port") for r in runtimes})


def pick_port(bind: str, used: Collection[Any], ports: range = cmdline.VNC_PORTS) -> int:
    """The first of ``ports`` not in ``used`` that ``bind`` can be bound to now.
    Raises :class:`errors.HypervisorError` when there is none."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    for port in ports:
        if port in used:
            continue
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((bind, port))
            except OSError:
                continue
        return port
    raise errors.HypervisorError(f"No free VNC port on {bind} in {ports.start}-{ports.stop - 1}")


def password(hvp: dict[str, Any], name: str) -> str | None:
    """The VNC password of instance ``name`` (None: it has none).  Raises
    :class:`errors.HypervisorError` when its ``vnc_password_file`` cannot be read."""
    path = str(hvp.get("vnc_password_file") or "")
    if not path or not hvp.get("vnc_bind_address"):
        return None
    try:
        return utils_io.read_password_file(path)
    except (OSError, errors.GanetiError) as exc:
        raise errors.HypervisorError(f"Cannot start instance {name}: cannot read its"
                                     f" vnc_password_file: {exc}") from exc


def set_password(session: Callable[[str], Any], name: str, secret: str | None) -> None:
    """Set the VNC password ``secret`` (when not None) of the running ``name`` over
    QMP (``session(name)``: a QMP client's context manager)."""
    if secret is not None:
        with session(name) as client:
            client.execute("set_password", protocol="vnc", password=secret)


def with_vnc_of(argv: list[str], built: list[str]) -> list[str]:
    """``argv`` (a migration source's command line) with the ``-vnc`` value of
    ``built`` (the one made for this node, with the port picked here)."""
    if "-vnc" not in built:
        return argv
    value = built[built.index("-vnc") + 1]
    return [value if i and argv[i - 1] == "-vnc" else word for i, word in enumerate(argv)]


def check_tls(hvp: dict[str, Any], name: str) -> None:
    """Refuse to start ``name`` when its VNC TLS cannot work: ``vnc_x509_verify``
    without ``vnc_x509_path``, or a ``vnc_x509_path`` that is not a directory
    holding :data:`SERVER_FILES` (and :data:`CLIENT_FILES` with
    ``vnc_x509_verify``).  Raises :class:`errors.HypervisorError`."""
    if not hvp.get("vnc_tls") or not hvp.get("vnc_bind_address"):
        return
    path = str(hvp.get("vnc_x509_path") or "")
    verify = bool(hvp.get("vnc_x509_verify"))
    if not path:
        if verify:
            raise errors.HypervisorError(f"Cannot start instance {name}: vnc_x509_verify"
                                         " needs vnc_x509_path (anonymous TLS has no"
                                         " certificates)")
        return
    if not os.path.isdir(path):
        raise errors.HypervisorError(f"Cannot start instance {name}: vnc_x509_path {path}"
                                     " is not a directory")
    wanted = SERVER_FILES + (CLIENT_FILES if verify else ())
    missing = [f for f in wanted if not os.path.isfile(os.path.join(path, f))]
    if missing:
        raise errors.HypervisorError(
            f"Cannot start instance {name}: vnc_x509_path {path} lacks {', '.join(missing)}"
            + (" (the client certificate and key are the node's, for vnc_x509_verify)"
               if set(missing) & set(CLIENT_FILES) else ""))


def tls(runtime: dict[str, Any] | None) -> base.VncTls | None:
    """How the node reaches the VNC server of the instance with ``runtime`` (its
    runtime record: the hvparams it was started with) over TLS, or None when
    that server runs no TLS."""
    hvp = ((runtime or {}).get("spec") or {}).get("hvparams") or {}
    if not hvp.get("vnc_tls") or not hvp.get("vnc_bind_address"):
        return None
    path = str(hvp.get("vnc_x509_path") or "")
    if not path:
        return base.VncTls()
    client = [os.path.join(path, f) for f in CLIENT_FILES] if hvp.get("vnc_x509_verify") \
        else ["", ""]
    return base.VncTls(ca_file=os.path.join(path, CA_CERT), client_cert=client[0],
                       client_key=client[1])
