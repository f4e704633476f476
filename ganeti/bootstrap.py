"""Cluster bootstrap: ``gnt-cluster init``, node setup for ``gnt-node add``, destroy.

Master side (run by ``gnt-cluster init`` on the future master node):

* :func:`init_cluster` validates the names, creates the node's directories,
  the cluster certificate (``server.pem``, also used as ``client.pem``), the
  RAPI certificate, the HMAC key and cluster domain secret, the cluster SSH
  key (kept when one already exists, so that a pre-seeded key works), the
  initial :class:`~ganeti.objects.ConfigData` and the ssconf files;
* :mod:`ganeti.daemonctl` starts the daemons and waits until they answer.
  With a master network device, the master IP comes up when the master
  daemon starts (best effort) and ``gnt-cluster init`` also activates it
  with ``OP_CLUSTER_ACTIVATE_MASTER_IP``, so that an error is reported.

Node side (``gnt-node add``): :func:`setup_node_ssh` connects to the new
node with the cluster SSH key and runs ``python3 -m ganeti.bootstrap join``
there, feeding a JSON payload (certificate, SSH key, noded address and
port) on stdin.  The remote side (:func:`prepare_node_join`) writes the
files below *its own* ``$GANETI_ROOTDIR`` and (re)starts its node daemon,
so the same command works on a real node and on a virtual node whose SSH
server runs commands with that node's environment.

Name resolution: :func:`resolve_host` first consults the hosts file named
by ``$GANETI_HOSTS_FILE`` (``/etc/hosts`` format: ``IP NAME [ALIAS...]``),
then the system resolver.  Virtual clusters use that file instead of
``/etc/hosts``.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import time
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ganeti import config as gconfig
from ganeti import ipolicy as gipolicy
from ganeti import constants, crypto, daemonctl, errors, objects, parameters, serializer, ssconf, ssh
from ganeti.pathutils import Paths, get_paths
from ganeti.storage import lvm
from ganeti.storage.runner import CommandRunner, system_runner
from ganeti.utils import io as uio
from ganeti.utils import net as netutils
from ganeti.utils import validation

__all__ = [
    "ENV_HOSTS_FILE", "DEFAULT_DISK_TEMPLATES", "resolve_host", "authorized_keys_file",
    "add_authorized_key", "make_node_dirs", "init_cluster", "check_master_vg", "primary_ip_family",
    "join_payload", "prepare_node_join", "setup_node_ssh", "record_own_host_key",
    "restart_noded_ssh", "remove_cluster_files", "node_tool_main",
]

logger = logging.getLogger(__name__)

#: environment variable naming an ``/etc/hosts``-style file consulted first
ENV_HOSTS_FILE = netutils.ENV_HOSTS_FILE
#: the IPv4 address of a name: ``$GANETI_HOSTS_FILE`` first, then DNS
resolve_host = netutils.resolve_host
DEFAULT_DISK_TEMPLATES = (constants.DT_DISKLESS, constants.DT_FILE, constants.DT_SHARED_FILE)
_REMOTE_PYTHON = "python3"


# --- local files ----------------------------------------------------------------

def authorized_keys_file(paths: Paths) -> str:
    """The SSH ``authorized_keys`` file of the node (``.ssh/authorized_keys`` of the node root's ``root`` home)."""
    return paths.authorized_keys_file


def make_node_dirs(paths: Paths) -> None:
    """Create the directories a node needs below its root."""
    for directory in (paths.data_dir, paths.run_dir, paths.socket_dir, paths.log_dir,
                      paths.conf_dir, paths.queue_dir, paths.queue_archive_dir,
                      paths.hooks_base_dir, paths.file_storage_dir,
                      paths.shared_file_storage_dir, paths.os_search_path[0],
                      os.path.dirname(authorized_keys_file(paths))):
        os.makedirs(directory, exist_ok=True)


def add_authorized_key(paths: Paths, line: str) -> None:
    """Add the SSH public key ``line`` to the node's ``authorized_keys`` (once).

    Raises :class:`errors.CommandError` for a line that is not a public key.
    """
    path = authorized_keys_file(paths)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    parsed = ssh.parse_public_key_line(line)
    if parsed is None:
        raise errors.CommandError(f"Invalid SSH public key line: {line!r}")
    if parsed[1] in ssh.read_authorized_keys(path):
        return
    try:
        old = uio.read_file(path).decode("utf-8", "replace")
    except FileNotFoundError:
        old = ""
    if old and not old.endswith("\n"):
        old += "\n"
    uio.write_file_atomic(path, old + line.strip() + "\n", mode=0o600)


def _ensure_ssh_key(paths: Paths, cluster_name: str) -> str:
    """Keep an existing cluster key (pre-seeded) or make one; returns the pub line."""
    key = paths.ssh_key_file
    if os.path.exists(key) and os.path.exists(key + ".pub"):
        return uio.read_file(key + ".pub").decode("ascii").strip()
    return ssh.generate_cluster_key(key, comment=f"ganeti@{cluster_name}")


def _default_params(hypervisors: Sequence[str], templates: Sequence[str],
                    hvparams: Mapping[str, Mapping[str, Any]] | None,
                    beparams: Mapping[str, Any] | None, nicparams: Mapping[str, Any] | None,
                    ndparams: Mapping[str, Any] | None) -> dict[str, Any]:
    hv_all: dict[str, dict[str, Any]] = {}
    for hv in hypervisors:
        hv_all[hv] = {**parameters.defaults("hv", hv),
                      **parameters.check_params("hv", (hvparams or {}).get(hv), hv)}
    for hv in hvparams or {}:
        if hv not in hypervisors:
            raise errors.OpPrereqError(f"Hypervisor parameters given for '{hv}', which is"
                                       " not enabled", errors.ECODE_INVAL)
    disk = {t: parameters.defaults("disk", t) for t in constants.DISK_TEMPLATES
            if parameters.param_table("disk", t) is not None}
    return {
        "hvparams": hv_all,
        "beparams": {objects.PP_DEFAULT: {**parameters.defaults("be"),
                                          **parameters.check_params("be", beparams)}},
        "nicparams": {objects.PP_DEFAULT: {**parameters.defaults("nic"),
                                           **parameters.check_params("nic", nicparams)}},
        "ndparams": {**parameters.defaults("nd"), **parameters.check_params("nd", ndparams)},
        "diskparams": disk,
    }


def primary_ip_family(version: int, master_ip: str) -> int:
    """The address family (``AF_INET`` 2, ``AF_INET6`` 10, as Ganeti stores it) of
    ``--primary-ip-version``; OpPrereqError when it is not 4 or 6 or the master's
    primary IP is not of that version."""
    import ipaddress
    if version not in (4, 6):
        raise errors.OpPrereqError(f"Invalid primary IP version {version!r} (4 or 6)",
                                   errors.ECODE_INVAL)
    try:
        actual = ipaddress.ip_address(master_ip).version
    except ValueError:
        raise errors.OpPrereqError(f"Invalid primary IP {master_ip!r}",
                                   errors.ECODE_INVAL) from None
    if actual != version:
        raise errors.OpPrereqError(f"The master's primary IP {master_ip} is not an IPv{version}"
                                   " address (give --primary-ip)", errors.ECODE_INVAL)
    return 2 if version == 4 else 10


def check_master_vg(vg_name: str, runner: CommandRunner) -> None:
    """Refuse a volume group that does not exist on this node (:class:`errors.OpPrereqError`)."""
    try:
        found = [vg.name for vg in lvm.list_vgs(runner, [vg_name])]
    except errors.StorageError as exc:
        raise errors.OpPrereqError(f"Volume group '{vg_name}' does not exist on the master"
                                   f" node (or LVM fails there): {exc}",
                                   errors.ECODE_ENVIRON) from exc
    if vg_name not in found:
        raise errors.OpPrereqError(f"Volume group '{vg_name}' does not exist on the master"
                                   " node", errors.ECODE_ENVIRON)


def init_cluster(paths: Paths, cluster_name: str, *, master_name: str, master_ip: str,
                 secondary_ip: str | None = None, cluster_ip: str | None = None,
                 enabled_hypervisors: Sequence[str] = (constants.HT_FAKE,),
                 enabled_disk_templates: Sequence[str] = DEFAULT_DISK_TEMPLATES,
                 master_netdev: str = "", master_netmask: int | None = None,
                 use_external_mip_script: bool = False,
                 file_storage_dir: str | None = None,
                 shared_file_storage_dir: str | None = None,
                 vg_name: str | None = None,
                 drbd_helper: str | None = None,
                 candidate_pool_size: int = constants.DEFAULT_CANDIDATE_POOL_SIZE,
                 hvparams: Mapping[str, Mapping[str, Any]] | None = None,
                 beparams: Mapping[str, Any] | None = None,
                 nicparams: Mapping[str, Any] | None = None,
                 ndparams: Mapping[str, Any] | None = None,
                 ipolicy: Mapping[str, Any] | None = None,
                 primary_ip_version: int = 4,
                 clock: Callable[[], float] = time.time,
                 storage_runner: CommandRunner = system_runner) -> objects.ConfigData:
    """Create the master node's files and the initial configuration.

    The instance policy is Ganeti's default with the enabled disk
    templates, changed by ``ipolicy`` (a change set, doc/ipolicy.md).
    ``primary_ip_version`` (4 or 6) is the family of every node's primary
    IP; the master's primary IP must be of it.  ``vg_name`` is the LVM
    volume group of ``plain`` disks, needed when an LVM template is enabled;
    it must exist on this (the master) node (``vgs`` through
    ``storage_runner``), as in Ganeti.  ``drbd_helper`` is the usermode
    helper DRBD must use on the nodes (default with ``drbd`` enabled:
    ``/bin/true``, as Ganeti's).

    Does not start daemons.  Raises :class:`errors.OpPrereqError` for bad
    arguments and :class:`errors.ConfigurationError` when a cluster
    configuration already exists.
    """
    cluster_name = validation.check_hostname(cluster_name, "cluster name")
    master_name = validation.check_hostname(master_name, "master node name")
    if os.path.exists(paths.config_file):
        raise errors.ConfigurationError(
            f"Cluster is already initialised ({paths.config_file} exists)")
    hvs = list(dict.fromkeys(enabled_hypervisors))
    templates = list(dict.fromkeys(enabled_disk_templates))
    if not hvs:
        raise errors.OpPrereqError("At least one hypervisor must be enabled", errors.ECODE_INVAL)
    bad = [h for h in hvs if h not in constants.HYPER_TYPES]
    if bad:
        raise errors.OpPrereqError(f"Unknown hypervisor(s): {', '.join(bad)}",
                                   errors.ECODE_INVAL)
    if not templates:
        raise errors.OpPrereqError("At least one disk template must be enabled",
                                   errors.ECODE_INVAL)
    bad = [t for t in templates if t not in constants.DISK_TEMPLATES]
    if bad:
        raise errors.OpPrereqError(f"Unknown disk template(s): {', '.join(bad)}",
                                   errors.ECODE_INVAL)
    if vg_name is not None:
        validation.check_vg_name(vg_name)
    if drbd_helper is not None and not os.path.isabs(drbd_helper):
        raise errors.OpPrereqError(f"Invalid DRBD usermode helper {drbd_helper!r}: an"
                                   " absolute path is needed", errors.ECODE_INVAL)
    validation.check_lvm_templates(templates, vg_name)
    if candidate_pool_size < 1:
        raise errors.OpPrereqError("The candidate pool size must be at least 1",
                                   errors.ECODE_INVAL)
    if vg_name is not None:
        check_master_vg(vg_name, storage_runner)
    params = _default_params(hvs, templates, hvparams, beparams, nicparams, ndparams)
    params["ipolicy"] = gipolicy.check_ipolicy(gipolicy.update_ipolicy(
        gipolicy.default_ipolicy(templates), ipolicy))
    extra = sorted(set(params["ipolicy"][gipolicy.IPOLICY_DTS]) - set(templates))
    if extra:
        raise errors.OpPrereqError("The following disk templates are allowed by the ipolicy,"
                                   f" but not enabled on the cluster: {', '.join(extra)}",
                                   errors.ECODE_INVAL)
    ip_family = primary_ip_family(primary_ip_version, master_ip)
    mip_ip = cluster_ip or master_ip
    ip_limit = 128 if ":" in mip_ip else 32
    if master_netmask is None:
        master_netmask = ip_limit
    if not 0 <= master_netmask <= ip_limit:
        raise errors.OpPrereqError(f"Invalid master netmask {master_netmask} (0..{ip_limit})",
                                   errors.ECODE_INVAL)

    make_node_dirs(paths)
    key_pem, cert_pem = crypto.generate_self_signed_cert(cluster_name)
    crypto.write_pem_pair(paths.server_pem, key_pem, cert_pem)
    crypto.write_pem_pair(paths.client_pem, key_pem, cert_pem)
    rkey, rcert = crypto.generate_self_signed_cert(cluster_name)
    crypto.write_pem_pair(paths.rapi_pem, rkey, rcert)
    uio.write_file_atomic(paths.confd_hmac_key, secrets.token_hex(32) + "\n", mode=0o400)
    uio.write_file_atomic(paths.cluster_domain_secret, secrets.token_hex(32) + "\n",
                          mode=0o400)
    ssh_pub = _ensure_ssh_key(paths, cluster_name)
    add_authorized_key(paths, ssh_pub)
    ssh_key_type, ssh_key_bits = ssh.public_key_size(ssh_pub)   # a pre-seeded key may be any

    now = clock()
    node_uuid, group_uuid = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    node = objects.Node(name=master_name, uuid=node_uuid, primary_ip=master_ip,
                        secondary_ip=secondary_ip or master_ip, group=group_uuid,
                        master_candidate=True, ctime=now, mtime=now)
    group = objects.NodeGroup(name="default", uuid=group_uuid, members=[node_uuid],
                              ctime=now, mtime=now)
    cluster = objects.Cluster(
        cluster_name=cluster_name, uuid=str(uuidlib.uuid4()), master_node=node_uuid,
        master_ip=mip_ip, master_netdev=master_netdev, master_netmask=master_netmask,
        primary_ip_family=ip_family,
        use_external_mip_script=use_external_mip_script,
        # node-local: stored as seen from a root of "/" so that every node
        # (each with its own root in a virtual cluster) maps it below its root
        file_storage_dir=file_storage_dir or Paths("/").file_storage_dir,
        shared_file_storage_dir=shared_file_storage_dir or paths.shared_file_storage_dir,
        volume_group_name=vg_name,
        drbd_usermode_helper=drbd_helper or (constants.DEFAULT_DRBD_HELPER
                                             if constants.DT_DRBD8 in templates else None),
        enabled_hypervisors=hvs, enabled_disk_templates=templates,
        candidate_pool_size=candidate_pool_size, ssh_key_type=ssh_key_type,
        ssh_key_bits=ssh_key_bits, ctime=now, mtime=now, **params)
    data = objects.ConfigData(cluster=cluster, nodes={node_uuid: node},
                              nodegroups={group_uuid: group}, ctime=now, mtime=now)
    gconfig.ConfigWriter.initialize(paths.config_file, data, clock=clock)
    ssconf.write_ssconf_files(paths, ssconf.compute_ssconf_values(data))
    logger.info("Initialised cluster %s with master %s (%s)", cluster_name, master_name,
                master_ip)
    return data


def remove_cluster_files(paths: Paths) -> None:
    """Remove the cluster files of a node (config, ssconf, keys, queue)."""
    import glob
    import shutil
    files = [paths.config_file, paths.server_pem, paths.client_pem, paths.rapi_pem,
             paths.confd_hmac_key, paths.cluster_domain_secret, paths.known_hosts_file,
             paths.watcher_pause_file, paths.ssh_key_file, paths.ssh_key_file + ".pub",
             os.path.join(paths.data_dir, "master_epoch")]   # the fencing state
    files.extend(glob.glob(paths.ssconf_file("*")))
    for path in files:
        uio.remove_file(path)
    shutil.rmtree(paths.queue_dir, ignore_errors=True)


# --- node join -------------------------------------------------------------------

def join_payload(paths: Paths, *, bind: str, port: int) -> dict[str, Any]:
    """The data a new node needs, read from the master's files."""
    def text(path: str) -> str:
        try:
            return uio.read_file(path).decode("utf-8")
        except OSError as exc:
            raise errors.OpExecError(f"Cannot read {path}: {exc}") from exc
    return {
        "server_pem": text(paths.server_pem),
        "ssh_key": text(paths.ssh_key_file),
        "ssh_pub": text(paths.ssh_key_file + ".pub"),
        "bind": bind,
        "port": port,
    }


def prepare_node_join(paths: Paths, payload: Mapping[str, Any], *,
                      env: Mapping[str, str] | None = None) -> None:
    """Node side of a join: write the cluster files and (re)start the node daemon."""
    for key in ("server_pem", "bind", "port"):
        if key not in payload:
            raise errors.ParameterError(f"Join data lacks '{key}'", errors.ECODE_INVAL)
    make_node_dirs(paths)
    pem = str(payload["server_pem"]).encode("utf-8")
    uio.write_file_atomic(paths.server_pem, pem, mode=0o600)
    uio.write_file_atomic(paths.client_pem, pem, mode=0o600)
    if payload.get("ssh_key") and payload.get("ssh_pub"):
        uio.write_file_atomic(paths.ssh_key_file, str(payload["ssh_key"]), mode=0o600)
        uio.write_file_atomic(paths.ssh_key_file + ".pub", str(payload["ssh_pub"]), mode=0o644)
        add_authorized_key(paths, str(payload["ssh_pub"]).strip())
    daemonctl.stop_daemon(paths, constants.NODED)
    daemonctl.start_noded(paths, str(payload["bind"]), int(payload["port"]), env=env)


def _ssh_runner(paths: Paths, port: int) -> ssh.SshRunner:
    return ssh.SshRunner(paths.ssh_key_file, known_hosts_path=paths.known_hosts_file,
                         port=port)


def record_own_host_key(paths: Paths, address: str, port: int, *,
                        timeout: float = 10.0) -> str | None:
    """Record this node's own SSH host key in the cluster's ``known_hosts``.

    Every other node's key is recorded when the master first reaches it
    (``gnt-node add``); the first master's never is, and a new master
    after a failover then refuses it where only known keys are trusted
    (``gnt-instance console``).  Connects to its own SSH server once (the
    key is recorded during the handshake); returns why that failed, or
    None.
    """
    runner = _ssh_runner(paths, port)
    try:
        res = runner.run(address, "true", port=port, timeout=timeout)
    except errors.GanetiError as exc:
        return str(exc)
    return res.fail_reason or None


def setup_node_ssh(paths: Paths, node_ip: str, *, ssh_port: int, noded_port: int,
                   timeout: float = 60.0, runner: ssh.SshRunner | None = None) -> None:
    """Prepare a new node over SSH and wait until its node daemon answers us.

    ``paths`` are the master's.  Raises :class:`errors.OpExecError` when
    SSH or the remote setup fails.
    """
    runner = runner or _ssh_runner(paths, ssh_port)
    payload = serializer.dumps(join_payload(paths, bind=node_ip, port=noded_port))
    try:
        res = runner.run(node_ip, f"{_REMOTE_PYTHON} -m ganeti.bootstrap join",
                         port=ssh_port, timeout=timeout, input_data=payload)
    except errors.CommandError as exc:
        raise errors.OpExecError(f"Node setup over SSH failed: {exc}") from exc
    if res.failed:
        raise errors.OpExecError(
            f"Node setup on {node_ip} failed (exit {res.exit_code}): "
            f"{(res.stderr or res.stdout).strip()}")
    daemonctl.wait_for_noded(node_ip, noded_port, paths.server_pem, timeout=timeout)


def restart_noded_ssh(paths: Paths, node_ip: str, *, ssh_port: int, noded_port: int,
                      timeout: float = 60.0) -> None:
    """Restart the node daemon of a node over SSH (e.g. after a new certificate)."""
    setup = {"bind": node_ip, "port": noded_port}
    res = _ssh_runner(paths, ssh_port).run(
        node_ip, f"{_REMOTE_PYTHON} -m ganeti.bootstrap restart-noded", port=ssh_port,
        timeout=timeout, input_data=serializer.dumps(setup))
    if res.failed:
        raise errors.OpExecError(f"Restarting the node daemon on {node_ip} failed:"
                                 f" {(res.stderr or res.stdout).strip()}")


def node_tool_main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m ganeti.bootstrap join|restart-noded|stop-noded`` (JSON on stdin)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1 or argv[0] not in ("join", "restart-noded", "stop-noded"):
        sys.stderr.write("usage: python3 -m ganeti.bootstrap join|restart-noded|stop-noded\n")
        return 2
    paths = get_paths()
    try:
        if argv[0] == "stop-noded":
            daemonctl.stop_daemon(paths, constants.NODED)
            return 0
        try:
            payload = serializer.loads(sys.stdin.read() or "{}")
        except errors.SerializationError as exc:
            raise errors.ParameterError(f"Invalid JSON on stdin: {exc}") from exc
        if argv[0] == "join":
            prepare_node_join(paths, payload)
        else:
            daemonctl.stop_daemon(paths, constants.NODED)
            daemonctl.start_noded(paths, str(payload["bind"]), int(payload["port"]))
    except (errors.GanetiError, OSError, KeyError) as exc:
        sys.stderr.write(f"{argv[0]} failed: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(node_tool_main())
