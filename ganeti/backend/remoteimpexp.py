"""Moves between clusters on a node: transfer keys and the remote import's listener
(doc/exports.md, "Moves between clusters").

A move between clusters authenticates its disk streams with a key and a
self-signed certificate made for it on each side's primary node
(:func:`x509_cert_create`): the source's by ``OP_BACKUP_PREPARE`` in
``remote`` mode, the destination's by the remote import.  The private key
never leaves its node; only the certificate travels, signed by the master
with the clusters' shared domain secret.  Each key lives in
``<crypto dir>/<name>/pem`` (key and certificate, mode 0600) until
:func:`x509_cert_remove`, or until it has expired and the next
:func:`x509_cert_create` sweeps it.

:func:`impexp_listen` binds a port on the given address and starts a
listener process (:mod:`ganeti.server.impexp_listener`) that waits for one
sender presenting the source's certificate and the disk's magic, and writes
what arrives into the instance's disk; its state is an ordinary transfer
directory, followed with ``impexp_status`` and ended with
``impexp_cleanup`` (:mod:`ganeti.backend.impexp`).
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import uuid as uuidlib
from typing import Any

from ganeti import crypto, errors
from ganeti.backend import impexp
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, procedure

__all__ = ["x509_cert_create", "x509_cert_remove", "x509_cert_check", "impexp_listen"]

#: the one file of a transfer key's directory: private key and certificate (PEM)
PEM_FILE = "pem"
#: longest validity a transfer key may be asked for (seconds: a week)
MAX_VALIDITY = 7 * 24 * 60 * 60
#: how a transfer key's name starts (the sweep touches nothing else)
KEY_PREFIX = "x509-"
#: seconds after which a key directory without a readable key counts as abandoned
UNFINISHED_AFTER = 3600


def key_path(ctx: NodeContext, name: str) -> str:
    """The key-and-certificate file of the transfer key ``name`` (checked as a plain name)."""
    return os.path.join(ctx.paths.crypto_dir, impexp.check_name(name, "X509 key"), PEM_FILE)


def _now(ctx: NodeContext) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ctx.clock(), datetime.timezone.utc)


def _expiry(path: str) -> datetime.datetime:
    """When the transfer key in directory ``path`` expires; CertificateError when it
    cannot be read."""
    _, cert = crypto.load_pem_pair(os.path.join(path, PEM_FILE))
    return crypto.cert_not_after(cert)


def _sweep_expired(ctx: NodeContext) -> None:
    """Remove the transfer keys whose certificate has expired, and the directories of
    keys never finished (no readable key an hour after they were made: a creation
    still in progress in another request is left alone)."""
    now = _now(ctx)
    try:
        names = os.listdir(ctx.paths.crypto_dir)
    except FileNotFoundError:
        return
    for name in names:
        if not name.startswith(KEY_PREFIX):
            continue
        path = os.path.join(ctx.paths.crypto_dir, name)
        try:
            expired = _expiry(path) < now
        except errors.GanetiError:
            try:
                expired = os.stat(path).st_mtime < ctx.clock() - UNFINISHED_AFTER
            except OSError:
                continue
        if expired:
            shutil.rmtree(path, ignore_errors=True)


@procedure(FAST)
def x509_cert_create(ctx: NodeContext, validity: int) -> list[str]:
    """Make a transfer key and self-signed certificate valid that many seconds. -> [key name,
    certificate PEM]

    Make a transfer key valid ``validity`` seconds; ``[name, certificate PEM]``.
    """
    if not 0 < validity <= MAX_VALIDITY:
        raise errors.OpExecError(f"Invalid certificate validity {validity} s (1 to"
                                 f" {MAX_VALIDITY})")
    _sweep_expired(ctx)
    name = f"{KEY_PREFIX}{int(ctx.clock())}-{uuidlib.uuid4().hex[:12]}"
    directory = os.path.join(ctx.paths.crypto_dir, name)
    os.makedirs(ctx.paths.crypto_dir, mode=0o700, exist_ok=True)
    os.mkdir(directory, 0o700)
    key_pem, cert_pem = crypto.generate_self_signed_cert(
        ctx.hostname, now=_now(ctx), valid_for=datetime.timedelta(seconds=validity))
    crypto.write_pem_pair(os.path.join(directory, PEM_FILE), key_pem, cert_pem)
    return [name, cert_pem.decode("ascii")]


@procedure(FAST)
def x509_cert_remove(ctx: NodeContext, name: str) -> None:
    """Remove a transfer key; refused when there is none. -> None

    Remove the transfer key ``name``; refused when there is none.
    """
    directory = os.path.dirname(key_path(ctx, name))
    if not os.path.isdir(directory):
        raise errors.OpExecError(f"No X509 key {name} on this node")
    shutil.rmtree(directory)


@procedure(FAST)
def x509_cert_check(ctx: NodeContext, name: str) -> None:
    """Refuse a transfer key that is not here or has expired. -> None

    Refuse (OpExecError) a transfer key that is not on this node or has expired.
    """
    directory = os.path.dirname(key_path(ctx, name))
    try:
        expires = _expiry(directory)
    except errors.GanetiError:
        raise errors.OpExecError(f"No X509 key {name} on this node") from None
    if expires < _now(ctx):
        raise errors.OpExecError(f"The X509 key {name} expired at {expires:%Y-%m-%d %H:%M}"
                                 " UTC")


def _bind(host: str) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise errors.OpExecError(f"Cannot open a listening socket: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        sock.listen(4)
    except OSError as exc:
        sock.close()
        raise errors.OpExecError(f"Cannot listen on {host}: {exc.strerror or exc}") from exc
    return sock


@procedure(FAST)
def impexp_listen(ctx: NodeContext, dest: dict, host: str, key_name: str, ca: str,
                  magic: str, timeout: float) -> dict[str, Any]:
    """Listen on host for the sender of a remote import (TLS with the key key_name, trusting
    only the certificate ca; it must name magic) writing into dest. -> {id (a transfer id),
    port}

    Listen on ``host`` for the sender of one disk; ``{"id", "port"}`` at once.

    ``dest`` is where the data goes (an ``import`` or ``firmware`` destination of
    :func:`ganeti.backend.impexp.open_sink`), ``key_name`` this node's
    transfer key, ``ca`` the sender's certificate (the only one trusted),
    ``magic`` what the sender must name, ``timeout`` how long to wait for it
    (seconds).
    """
    if not isinstance(dest, dict) or dest.get("kind") not in ("import", "firmware"):
        raise errors.OpExecError(f"A remote import writes an instance disk or its UEFI/TPM"
                                 f" state, not {dest!r}")
    if not os.path.isfile(key_path(ctx, key_name)):
        raise errors.OpExecError(f"No X509 key {key_name} on this node")
    if not magic or not 0 < timeout <= 86400:
        raise errors.OpExecError("A remote import needs a magic and a timeout (1 s to a day)")
    sock = _bind(host)
    try:
        port = sock.getsockname()[1]
        transfer_id = impexp.spawn_transfer(
            ctx, "ganeti.server.impexp_listener",
            {"dest": dest, "key_name": key_name, "ca": ca, "magic": magic, "timeout": timeout,
             "port": port}, pass_fd=sock.fileno())
    finally:
        sock.close()
    return {"id": transfer_id, "port": port}
