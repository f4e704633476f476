"""``gnt-cluster renew-crypto``: certificates, keys and secrets of the cluster.

A new cluster certificate restarts the node daemons (over SSH), the master
daemon and the RAPI daemon; a new RAPI certificate is only reloaded by the
running RAPI daemon (SIGHUP, doc/rapi.md), without a restart.  A new
cluster SSH key (``--new-ssh-keys``) is made and installed by the job
itself (doc/design/ssh.md, "Renewing the cluster key"); nothing restarts.
"""

from __future__ import annotations

import os

from ganeti import cli, constants, errors
from ganeti.client.cluster_common import masterd_args, node_ssh_targets
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["renew_crypto", "renew_crypto_opcode", "RENEW_OPTS"]

#: upstream's first and last lines (its QA and scripts may look for them)
_UPDATING = ('Updating certificates now. Running "gnt-cluster verify" '
             " is recommended after this operation.")
_REPLACED = ('All requested certificates and keys have been replaced.'
             ' Running "gnt-cluster verify" now is recommended.')


def _read_text(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.OpPrereqError(f"Cannot read the {what} from {path}: {exc}",
                                   errors.ECODE_NOENT) from exc


def renew_crypto_opcode(opts: Any) -> dict[str, Any]:
    """The OP_CLUSTER_RENEW_CRYPTO dict for the renew-crypto options.

    Raises :class:`errors.OpPrereqError` for conflicting options, an
    unreadable file, or no option at all.
    """
    if opts.new_rapi_cert and opts.rapi_cert_file:
        raise errors.OpPrereqError("Only one of --new-rapi-certificate and"
                                   " --rapi-certificate can be given", errors.ECODE_INVAL)
    if opts.new_cds and opts.cds_file:
        raise errors.OpPrereqError("Only one of --new-cluster-domain-secret and"
                                   " --cluster-domain-secret can be given", errors.ECODE_INVAL)
    unsupported = [flag for flag, given in (
        ("--new-spice-certificate", getattr(opts, "new_spice_cert", False)),
        ("--spice-certificate", getattr(opts, "spice_cert", None)),
        ("--spice-ca-certificate", getattr(opts, "spice_cacert", None))) if given]
    if unsupported:
        raise errors.OpPrereqError(f"Not supported here: {', '.join(unsupported)} (no SPICE"
                                   " console; doc/compat.md)", errors.ECODE_INVAL)
    new_ssh_keys = bool(getattr(opts, "new_ssh_keys", False))
    key_type = getattr(opts, "ssh_key_type", None)
    key_bits = getattr(opts, "ssh_key_bits", None)
    if (key_type is not None or key_bits is not None) and not new_ssh_keys:
        raise errors.OpPrereqError("--ssh-key-type and --ssh-key-bits need --new-ssh-keys",
                                   errors.ECODE_INVAL)
    if not (opts.new_cluster_cert or opts.new_rapi_cert or opts.rapi_cert_file
            or opts.new_cds or opts.cds_file or getattr(opts, "new_confd_hmac_key", False)
            or getattr(opts, "new_node_cert", False) or new_ssh_keys):
        raise errors.OpPrereqError("Nothing to do: give --new-cluster-certificate,"
                                   " --new-node-certificates, --new-rapi-certificate,"
                                   " --rapi-certificate, --new-confd-hmac-key, --new-ssh-keys,"
                                   " --new-cluster-domain-secret or --cluster-domain-secret",
                                   errors.ECODE_INVAL)
    op: dict[str, Any] = wire.cluster_renew_crypto(
        new_cluster_certificate=bool(opts.new_cluster_cert), new_rapi_cert=bool(opts.new_rapi_cert),
        new_cluster_domain_secret=bool(opts.new_cds),
        node_certificates=bool(getattr(opts, "new_node_cert", False)) or wire.NOT_SENT,
        new_confd_hmac_key=bool(getattr(opts, "new_confd_hmac_key", False)) or wire.NOT_SENT,
        renew_ssh_keys=new_ssh_keys or wire.NOT_SENT,
        ssh_key_type=key_type if key_type is not None else wire.NOT_SENT,
        ssh_key_bits=key_bits if key_bits is not None else wire.NOT_SENT,
        verbose=bool(getattr(opts, "verbose", 0)) or wire.NOT_SENT)
    if opts.rapi_cert_file:
        op["rapi_cert_pem"] = _read_text(opts.rapi_cert_file, "RAPI certificate")
    if opts.cds_file:
        op["cluster_domain_secret"] = _read_text(opts.cds_file, "cluster domain secret")
    return op


def _reload_rapi(paths: Any) -> bool:
    """Make this (master) node's RAPI daemon load the new ``rapi.pem``; False on failure.

    A running daemon gets SIGHUP (it reloads the certificate for new
    connections, doc/rapi.md); one not running is started.
    """
    import signal

    from ganeti import daemonctl
    pid = daemonctl.daemon_pid(paths, constants.RAPI)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGHUP)
            return True
        except OSError as exc:
            cli.to_stderr(f"Signalling the RAPI daemon (pid {pid}) failed: {exc}")
    try:
        daemonctl.start_rapi(paths)
    except errors.GanetiError as exc:
        cli.to_stderr(f"Starting the RAPI daemon failed: {exc}")
        return False
    return True


def _restart_rapi(paths: Any) -> bool:
    """Stop this (master) node's RAPI daemon and start it again (it starts whenever
    the master daemon does); False on failure."""
    from ganeti import daemonctl
    daemonctl.stop_daemon(paths, constants.RAPI)
    try:
        daemonctl.start_rapi(paths)
    except errors.GanetiError as exc:
        cli.to_stderr(f"Restarting the RAPI daemon failed: {exc}")
        return False
    return True


def renew_crypto(opts: Any, args: list[str]) -> int:
    """Renew the cluster certificate, RAPI certificate, SSH key and/or other secrets.

    A new cluster certificate restarts the node daemons, the master daemon
    and the RAPI daemon; a new RAPI certificate is reloaded by the running
    RAPI daemon (SIGHUP), without a restart.  Prints upstream's first and
    last lines (``Updating certificates now...``, ``All requested
    certificates and keys have been replaced...``).
    """
    try:
        op = renew_crypto_opcode(opts)
    except errors.OpPrereqError as exc:
        cli.to_stderr(str(exc.args[0]))
        return cli.EXIT_FAILURE
    new_rapi = bool(opts.new_rapi_cert or opts.rapi_cert_file)
    new_cert = bool(opts.new_cluster_cert or getattr(opts, "new_node_cert", False))
    what = [name for flag, name in ((new_cert, "the cluster certificate"),
                                    (getattr(opts, "new_confd_hmac_key", False),
                                     "the confd HMAC key"),
                                    (new_rapi, "the RAPI certificate"),
                                    (getattr(opts, "new_ssh_keys", False),
                                     "the cluster SSH key"),
                                    (opts.new_cds or opts.cds_file,
                                     "the cluster domain secret")) if flag]
    cli.to_stdout(_UPDATING)
    text = f"This replaces {', '.join(what)} on all nodes."
    if new_cert:
        text += " All node daemons, the master daemon and the RAPI daemon will be restarted."
    elif new_rapi:
        text += " The RAPI daemon will reload it."
    if not cli.confirm(text, forced=getattr(opts, "force", False)):
        return cli.EXIT_FAILURE
    from ganeti import bootstrap, daemonctl, pathutils
    from ganeti.utils import net
    paths = pathutils.get_paths()
    cl = cli.get_client(opts)
    cli.submit_opcode_and_wait(op, opts, cl)
    if not new_cert:
        if new_rapi and not _reload_rapi(paths):
            return cli.EXIT_FAILURE
        cli.to_stdout(f"Renewed {', '.join(what)}"
                      f"{'; the RAPI daemon reloads it' if new_rapi else ''}.")
        cli.to_stdout(_REPLACED)
        return cli.EXIT_SUCCESS
    port = int(os.environ.get(constants.ENV_NODED_PORT) or constants.DEFAULT_NODED_PORT)
    me = net.hostname()
    failed = False
    for name, addr, ssh_port in node_ssh_targets(paths):
        try:
            if name == me:
                daemonctl.stop_daemon(paths, constants.NODED)
                daemonctl.start_noded(paths, addr, port)
            else:
                bootstrap.restart_noded_ssh(paths, addr, ssh_port=ssh_port, noded_port=port)
        except errors.GanetiError as exc:
            cli.to_stderr(f"Restarting the node daemon on {name} failed: {exc}")
            failed = True
    daemonctl.stop_daemon(paths, constants.MASTERD)
    daemonctl.start_masterd(paths, extra_args=masterd_args())
    if not _restart_rapi(paths):    # it starts whenever the master daemon does
        failed = True
    cli.to_stdout("The cluster certificate was renewed and the daemons restarted.")
    if not failed:
        cli.to_stdout(_REPLACED)
    return cli.EXIT_FAILURE if failed else cli.EXIT_SUCCESS


# --- the options of renew-crypto ------------------------------------------------------------------

_O = cli.Option
NEWCERT_OPT = _O("--new-cluster-certificate", dest="new_cluster_cert", action="store_true",
                 default=False, help="Generate a new cluster (node daemon) certificate")
NEWRAPI_OPT = _O("--new-rapi-certificate", dest="new_rapi_cert", action="store_true",
                 default=False, help="Generate a new self-signed RAPI certificate")
RAPIFILE_OPT = _O("--rapi-certificate", dest="rapi_cert_file", default=None, metavar="FILE",
                  help="Install this RAPI certificate (private key and certificate, PEM)")
NEWCDS_OPT = _O("--new-cluster-domain-secret", dest="new_cds", action="store_true",
                default=False, help="Generate a new cluster domain secret")
CDSFILE_OPT = _O("--cluster-domain-secret", dest="cds_file", default=None, metavar="FILE",
                 help="Install the cluster domain secret read from FILE")
NEWHMAC_OPT = _O("--new-confd-hmac-key", dest="new_confd_hmac_key", action="store_true",
                 default=False, help="Generate a new confd HMAC key")
NEWNODECERT_OPT = _O("--new-node-certificates", dest="new_node_cert", action="store_true",
                     default=False, help="Generate new node certificates (here: the one"
                     " cluster certificate all node daemons use)")
_UNSUPPORTED = " (not supported here: refused, doc/compat.md)"
RENEW_COMPAT_OPTS = [
    _O("--new-ssh-keys", dest="new_ssh_keys", action="store_true", default=False,
       help="Generate a new cluster SSH key pair and replace the old one on every node"),
    _O("--no-ssh-key-check", dest="ssh_key_check", action="store_false", default=True,
       help="Disable SSH key fingerprint checking (accepted; no effect: host keys are"
       " trusted on first use)"),
    _O("--ssh-key-type", dest="ssh_key_type", default=None,
       choices=["ed25519", "rsa", "ecdsa", "dsa"],
       help="Type of the new SSH key (with --new-ssh-keys; default: the cluster's; dsa is"
       " refused)"),
    _O("--ssh-key-bits", dest="ssh_key_bits", type=int, default=None, metavar="BITS",
       help="Length of the new SSH key (with --new-ssh-keys; rsa 1024-16384, ecdsa"
       " 256/384/521, ed25519 256)"),
    _O("--new-spice-certificate", dest="new_spice_cert", action="store_true", default=False,
       help="Generate a new SPICE certificate" + _UNSUPPORTED),
    _O("--spice-certificate", dest="spice_cert", default=None, metavar="FILE",
       help="Install this SPICE certificate" + _UNSUPPORTED),
    _O("--spice-ca-certificate", dest="spice_cacert", default=None, metavar="FILE",
       help="The CA certificate of the SPICE certificate" + _UNSUPPORTED),
    cli.VERBOSE_OPT,
]
#: every option of ``gnt-cluster renew-crypto`` but ``--force``
RENEW_OPTS = [NEWCERT_OPT, NEWNODECERT_OPT, NEWRAPI_OPT, RAPIFILE_OPT, NEWHMAC_OPT, NEWCDS_OPT,
              CDSFILE_OPT, *RENEW_COMPAT_OPTS]
