"""The node daemon's entry point: its options, start-up checks and serve loop.

The server itself is :mod:`ganeti.server.noded`; ``daemons/ganeti-noded``
calls :func:`main` here (doc/protocols/rpc.md).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ganeti import backend, constants, errors
from ganeti.pathutils import Paths
from ganeti.http import handshake
from ganeti.server import daemon, noded_keepalive
from ganeti.server.noded import (DEFAULT_BIND_ADDRESS, DEFAULT_MAX_CHILDREN,
                                 DEFAULT_REQUEST_TIMEOUT, DEFAULT_SPARE_CHILDREN, NodedServer,
                                 make_server_context)
from ganeti.utils import net

__all__ = ["main"]


def _add_options(parser: argparse.ArgumentParser) -> None:
    from ganeti.rpc.client import default_noded_port
    parser.add_argument("-b", "--bind", default=DEFAULT_BIND_ADDRESS,
                        help=f"address to listen on (default {DEFAULT_BIND_ADDRESS})")
    parser.add_argument("-p", "--port", type=int, default=default_noded_port(),
                        help=f"TCP port (default ${constants.ENV_NODED_PORT} or"
                             f" {constants.DEFAULT_NODED_PORT})")
    parser.add_argument("--max-children", type=int, default=DEFAULT_MAX_CHILDREN,
                        help="maximum number of requests handled at once")
    parser.add_argument("--spare-children", type=int, default=DEFAULT_SPARE_CHILDREN,
                        help="number of idle pre-forked children kept ready to serve one"
                             f" request each (default {DEFAULT_SPARE_CHILDREN}; 0 forks on"
                             " demand only)")
    parser.add_argument("--handshake-timeout", type=float,
                        default=handshake.HANDSHAKE_TIMEOUT, metavar="SECONDS",
                        help="seconds a client has to complete its TLS handshake"
                             " (default %(default)s)")
    parser.add_argument("--max-handshakes", type=int,
                        default=handshake.DEFAULT_MAX_PENDING,
                        help="TLS handshakes pending at once; beyond that the oldest is closed"
                             " (default %(default)s)")
    parser.add_argument("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT,
                        metavar="SECONDS",
                        help="seconds each read of a request may wait for the client"
                             " (default %(default)s)")
    parser.add_argument("--keepalive-timeout", type=float,
                        default=noded_keepalive.DEFAULT_KEEPALIVE_TIMEOUT, metavar="SECONDS",
                        help="seconds a kept connection (read-only procedures asked with"
                             " Connection: keep-alive) may stay idle; 0 answers one request"
                             " per connection (default %(default)s)")


def _check(options: argparse.Namespace, paths: Paths) -> None:
    if not os.path.exists(paths.server_pem):
        raise errors.CertificateError(
            f"Cluster certificate {paths.server_pem} is missing; is this node part of a cluster?")
    make_server_context(paths.server_pem)
    if not 1 <= options.port <= 65535:
        raise errors.ParameterError(f"Invalid port {options.port}")
    if options.spare_children < 0:
        raise errors.ParameterError(f"Invalid number of spare children {options.spare_children}")
    for name in ("handshake_timeout", "max_handshakes", "request_timeout", "max_children"):
        if getattr(options, name) <= 0:
            raise errors.ParameterError(f"Invalid --{name.replace('_', '-')}"
                                        f" {getattr(options, name)}")
    if options.keepalive_timeout < 0:
        raise errors.ParameterError(f"Invalid --keepalive-timeout {options.keepalive_timeout}")


def _prepare(runtime: Any) -> NodedServer:
    options = runtime.options
    backend.all_functions()   # import the backend once, before forking
    daemon.raise_fd_limit()
    server = NodedServer(options.bind, options.port, make_server_context(runtime.paths.server_pem),
                         runtime.paths, net.hostname(), max_children=options.max_children,
                         request_timeout=options.request_timeout,
                         handshake_timeout=options.handshake_timeout,
                         max_handshakes=options.max_handshakes,
                         spare_children=options.spare_children,
                         keepalive_timeout=options.keepalive_timeout,
                         redactor=runtime.redactor)
    server.warm_up()
    server.watch_master()
    return server


def _serve(runtime: Any, server: NodedServer) -> None:
    try:
        server.serve(runtime.stop_event)
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``daemons/ganeti-noded``."""
    return daemon.run_daemon(constants.NODED, add_options=_add_options, check_fn=_check,
                             prepare_fn=_prepare, exec_fn=_serve, argv=argv,
                             description="Ganeti node daemon (node RPC over HTTPS)")
