"""Node-wide procedures: version, node_info, node_verify, master name, demotion, leaving."""

from __future__ import annotations

import concurrent.futures
import glob
import logging
import os
import signal
import socket
import time
from typing import Any

from ganeti import constants, errors, serializer
from ganeti.watcher import pause as watcherpause
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, URGENT, procedure
from ganeti.utils import io as uio
from ganeti.utils import process
from ganeti.storage import lvm
from ganeti.hypervisor.kvm import firmware as kvm_firmware

__all__ = [
    "version", "node_info", "node_verify", "master_node_name", "node_leave_cluster",
    "node_demote_from_mc", "set_watcher_pause", "node_powercycle", "run_oob",
]

logger = logging.getLogger(__name__)

# Optional JSON dict below the node's conf dir overriding the host figures of
# node_info (virtual clusters give each node its own memory/cpu/disk sizes).
FAKE_NODE_INFO_FILE = "fake-node-info.json"
VERIFY_CHECKS = ("version", "filelist", "nodelist", "hooks", "time", "hostname",
                 "cluster_name")
_NODELIST_CONNECT_TIMEOUT = 2.0


@procedure(URGENT, keepalive=True)
def version(ctx: NodeContext) -> int:
    """Protocol version of the node (constants.PROTOCOL_VERSION)."""
    return constants.PROTOCOL_VERSION


def _meminfo() -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    values[key] = int(parts[0]) // 1024  # kB -> MiB
    except OSError:
        pass
    return values


def _boot_id(ctx: NodeContext) -> str:
    """The kernel's boot id; a virtual node (root other than ``/``) has its own
    in ``<root>/boot_id`` (renewed by ``tools/vcluster start``), if there is one."""
    sources = ["/proc/sys/kernel/random/boot_id"]
    if os.path.realpath(ctx.paths.root) != "/":
        sources.insert(0, ctx.paths.vnode_boot_id_file)
    for source in sources:
        try:
            with open(source, encoding="ascii") as fh:
                value = fh.read().strip()
        except OSError:
            continue
        if value:
            return value
    return ""


def _host_figures(ctx: NodeContext) -> dict[str, Any]:
    mem = _meminfo()
    total = mem.get("MemTotal", 0)
    free = mem.get("MemAvailable", mem.get("MemFree", 0))
    figures: dict[str, Any] = {
        "memory_total": total, "memory_free": free,
        "memory_dom0": total - free, "cpu_total": os.cpu_count() or 1,
        "cpu_nodes": 1, "cpu_sockets": 1, "cpu_dom0": 0,
    }
    override = os.path.join(ctx.paths.conf_dir, FAKE_NODE_INFO_FILE)
    if os.path.exists(override):
        try:
            data = serializer.loads(uio.read_file(override))
        except (OSError, errors.GanetiError) as exc:
            raise errors.OpExecError(f"Cannot read {override}: {exc}") from exc
        if not isinstance(data, dict):
            raise errors.OpExecError(f"{override} must hold a JSON object")
        figures.update(data)
    return figures


def storage_path(ctx: NodeContext, stype: str, key: str) -> str:
    """The directory to measure for a file storage unit (canonical ``key``).

    A ``sharedfile`` directory outside the node root (the virtual cluster's
    one shared directory) is used as written; a directory not created yet
    is measured through its nearest existing parent.
    """
    path = ctx.local_path(key)
    if (stype in (constants.DT_SHARED_FILE, "sharedfile") and os.path.isabs(key)
            and not ctx.paths.contains(key) and os.path.exists(key)):
        path = key
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _storage_info(ctx: NodeContext, unit: Any, figures: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(unit, (list, tuple)) or len(unit) < 2:
        raise errors.OpExecError(f"Invalid storage unit {unit!r}: expected [type, key, params]")
    stype, key = unit[0], unit[1]
    result: dict[str, Any] = {"type": stype, "name": key}
    if stype in (constants.DT_FILE, constants.DT_SHARED_FILE, "file", "sharedfile"):
        if f"storage_{key}" in figures:
            result.update(figures[f"storage_{key}"])
            return result
        path = storage_path(ctx, stype, str(key))
        try:
            st = os.statvfs(path)
        except OSError as exc:
            result["error"] = f"Cannot stat {key}: {exc.strerror}"
            return result
        result["storage_size"] = st.f_blocks * st.f_frsize // (1024 * 1024)
        result["storage_free"] = st.f_bavail * st.f_frsize // (1024 * 1024)
    elif stype == constants.DT_DISKLESS:
        result.update({"storage_size": 0, "storage_free": 0})
    elif stype == constants.ST_LVM_VG:
        result.update(_vg_info(ctx, key))
    else:
        result["error"] = f"Storage type {stype!r} is not reported yet"
    return result


def _vg_info(ctx: NodeContext, vg: Any) -> dict[str, Any]:
    """``storage_size``/``storage_free`` (and Ganeti's ``vg_size``/``vg_free``,
    the same figures) of volume group ``vg`` in MiB, or an ``error``."""
    try:
        found = [i for i in lvm.list_vgs(ctx.storage_runner, [lvm.check_lvm_name(vg, "volume"
                                                                               " group")])
                 if i.name == vg]
    except errors.StorageError as exc:
        return {"error": str(exc)}
    if not found:
        return {"error": f"Volume group '{vg}' does not exist on this node"}
    return {"storage_size": found[0].size, "storage_free": found[0].free,
            "vg_size": found[0].size, "vg_free": found[0].free}


@procedure(URGENT, keepalive=True)
def node_info(ctx: NodeContext, storage_units: list, hv_specs: list) -> dict[str, Any]:
    """Memory, CPU and storage of the node: {name, bootid, memory_*, cpu_*, storage: [...], hv:
    [...]}.

    Memory, CPU and storage of this node.

    ``storage_units`` is ``[[type, key, params], ...]`` (file storage keys
    are canonical paths); ``hv_specs`` is ``[[hypervisor, hvparams], ...]``.
    Host figures come from ``/proc``, overridden by the JSON file
    ``etc/ganeti/fake-node-info.json`` of the node root when present.
    Each ``hv`` entry is the hypervisor's own view (for the fake: the
    simulated node memory sized by that file's ``memory_total``, minus
    ``memory_dom0`` and the running instances) plus ``instance_count``;
    the top-level memory/cpu figures follow the first hypervisor.  File
    storage units report ``storage_size``/``storage_free`` (MiB) of the
    file system holding the directory; an ``lvm-vg`` unit (key: the volume
    group) those of the VG, also as ``vg_size``/``vg_free``.
    """
    from ganeti.backend import instance as _instance   # instance imports nothing of node
    figures = _host_figures(ctx)
    hv = []
    for spec in hv_specs:
        name = spec[0] if isinstance(spec, (list, tuple)) and spec else spec
        try:
            hyper = _instance.hypervisor_for(ctx, str(name))
        except errors.HypervisorError:
            hyper = None
        if hyper is None:
            entry = {k: figures[k] for k in ("memory_total", "memory_free", "memory_dom0",
                                             "cpu_total", "cpu_nodes", "cpu_sockets",
                                             "cpu_dom0")}
            entry["error"] = f"Hypervisor {name!r} is not available on this node"
        else:
            entry = dict(hyper.get_node_info())
            entry["instance_count"] = len(hyper.list_instances())
        entry["name"] = name
        hv.append(entry)
    if hv and "error" not in hv[0]:
        # the node's own figures are the (first) hypervisor's view
        figures.update({k: hv[0][k] for k in ("memory_total", "memory_free", "memory_dom0",
                                              "cpu_total", "instance_count") if k in hv[0]})
    return {
        "name": ctx.hostname,
        "bootid": figures.get("bootid") or _boot_id(ctx),
        "storage": [_storage_info(ctx, unit, figures) for unit in storage_units],
        "hv": hv,
        **{k: v for k, v in figures.items() if not k.startswith("storage_")},
    }


_file_checksum = uio.file_checksum


def _check_reachable(address: str, port: int) -> str | None:
    try:
        with socket.create_connection((address, port), timeout=_NODELIST_CONNECT_TIMEOUT):
            return None
    except OSError as exc:
        return f"TCP connection to {address}:{port} failed: {exc.strerror or exc}"


def _nodelist(ctx: NodeContext, nodes: Any) -> dict[str, str]:
    if not isinstance(nodes, (list, tuple)):
        raise errors.OpExecError("nodelist check needs a list of [name, address(, port)]")
    targets = []
    for entry in nodes:
        if not isinstance(entry, (list, tuple)) or len(entry) not in (2, 3):
            raise errors.OpExecError(f"Invalid nodelist entry {entry!r}")
        port = int(entry[2]) if len(entry) == 3 else ctx.noded_port
        targets.append((str(entry[0]), str(entry[1]), port))
    failures: dict[str, str] = {}
    if not targets:
        return failures
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        futures = {name: pool.submit(_check_reachable, addr, port)
                   for name, addr, port in targets}
        for name, fut in futures.items():
            err = fut.result()
            if err:
                failures[name] = err
    return failures


def _ssconf_value(ctx: NodeContext, key: str) -> str | None:
    try:
        return uio.read_file(ctx.paths.ssconf_file(key), max_size=1024 * 1024).decode().strip()
    except OSError:
        return None


def _oob_path_problem(local: str, canonical: str) -> str:
    """Why the out-of-band program ``canonical`` cannot run here ('' if it can)."""
    if not os.path.isfile(local):
        return f"out of band path '{canonical}' does not exist or is not a file"
    if not os.access(local, os.X_OK):
        return f"out of band path '{canonical}' is not executable"
    return ""


@procedure(NORMAL, fenced=True)
def run_oob(ctx: NodeContext, oob_program: str, command: str, remote_node: str,
            timeout: int) -> str:
    """Run the out-of-band program (a canonical path) with COMMAND REMOTE_NODE, killed after
    TIMEOUT seconds; returns its standard output (the master checks it), fails with its exit
    status and output (doc/oob.md).

    Run the out-of-band program ``oob_program COMMAND REMOTE_NODE``; its standard output.

    ``oob_program`` is canonical (below this node's root on a virtual node).
    The program is killed after ``timeout`` seconds.  A program that cannot
    run, times out or exits with a status other than 0 is an
    :class:`errors.OpExecError` carrying its status and output (its error
    message is on standard error, doc/oob.md); the master checks the output.
    """
    if command not in constants.OOB_COMMANDS:
        raise errors.OpExecError(f"Unknown out-of-band command '{command}'")
    local = ctx.local_path(oob_program)
    problem = _oob_path_problem(local, oob_program)
    if problem:
        raise errors.OpExecError(problem)
    shown = f"'{oob_program} {command} {remote_node}'"
    try:
        res = process.run_command([local, command, remote_node], timeout=timeout)
    except errors.CommandError as exc:
        raise errors.OpExecError(f"{shown} cannot run: {exc}") from exc
    if res.timed_out:
        raise errors.OpExecError(f"{shown} was killed after its timeout of {timeout}s")
    if res.failed:
        why = (f"killed by signal {res.signal}" if res.signal is not None
               else f"exit status {res.exit_code}")
        output = (res.stderr.strip() or res.stdout.strip())[-2000:]
        raise errors.OpExecError(f"{shown} failed ({why}); output: {output}")
    logger.info("Out-of-band command %s succeeded", shown)
    return res.stdout


@procedure(NORMAL)
def node_verify(ctx: NodeContext, checks: dict, cluster_name: str) -> dict[str, Any]:
    """Run the checks the master asks for ({check: argument}) and return {check: result}; see
    backend.node.node_verify for the check names.

    Run the requested checks; return ``{check: result}``.

    Checks (argument -> result):

    * ``version`` (ignored) -> ``[protocol_version, release_version]``
    * ``filelist`` ([canonical paths]) -> ``{path: sha1 hex or None if missing}``
    * ``nodelist`` ([[name, address(, port)]]) -> ``{name: error}`` for the
      nodes whose node daemon port cannot be reached over TCP (empty = all fine)
    * ``hooks`` (ignored) -> whether the hooks directory exists
    * ``time`` (ignored) -> this node's clock (seconds since the epoch)
    * ``hostname`` (ignored) -> this node's own name
    * ``cluster_name`` (ignored) -> the cluster name of this node's ssconf
      (the master compares it with ``cluster_name``)
    * ``oob_paths`` ([canonical paths of out-of-band programs]) -> one text
      per path: empty when it is an executable file here, else the problem
    * ``lvlist`` (a volume group) -> ``{lv name: [size MiB, active, extent size
      of the group in MiB (0: unknown)]}``, or
      a text saying why the group cannot be listed (missing, LVM failing)
    * ``kvm_firmware`` (a list of ``uefi``, ``tpm2``) -> the problems found:
      OVMF's files (``uefi``) or ``swtpm`` (``tpm2``) missing here
    * ``kvm_firmware_states`` (ignored) -> the keys (instance UUIDs) of the
      kvm UEFI/TPM state directories on this node (the master reports the
      orphans, doc/kvm.md)

    Unknown check names are listed under ``"unsupported"``.
    """
    result: dict[str, Any] = {}
    unsupported = []
    for check, arg in checks.items():
        if check == "version":
            result[check] = [constants.PROTOCOL_VERSION, constants.RELEASE_VERSION]
        elif check == "filelist":
            if not isinstance(arg, (list, tuple)):
                raise errors.OpExecError("filelist check needs a list of file names")
            result[check] = {str(name): _file_checksum(ctx.local_path(str(name)))
                             for name in arg}
        elif check == "nodelist":
            result[check] = _nodelist(ctx, arg)
        elif check == "hooks":
            result[check] = os.path.isdir(ctx.paths.hooks_base_dir)
        elif check == "time":
            result[check] = ctx.clock()
        elif check == "hostname":
            result[check] = ctx.hostname
        elif check == "cluster_name":
            result[check] = _ssconf_value(ctx, "cluster_name")
        elif check == "oob_paths":
            if not isinstance(arg, (list, tuple)):
                raise errors.OpExecError("oob_paths check needs a list of paths")
            result[check] = [_oob_path_problem(ctx.local_path(str(p)), str(p)) for p in arg]
        elif check == "lvlist":
            result[check] = _lvlist(ctx, arg)
        elif check == "kvm_firmware":
            result[check] = kvm_firmware.missing(list(arg or []))
        elif check == "kvm_firmware_states":
            result[check] = kvm_firmware.list_states(ctx.paths.kvm_firmware_dir)
        else:
            unsupported.append(check)
    if unsupported:
        result["unsupported"] = sorted(unsupported)
    return result


def _lvlist(ctx: NodeContext, vg: Any) -> dict[str, list[Any]] | str:
    """``{lv name: [size MiB, active, extent MiB]}`` of volume group ``vg``, or the problem."""
    try:
        return {lv.name: [lv.size, lv.active, lv.extent]
                for lv in lvm.list_lvs(ctx.storage_runner, lvm.check_lvm_name(vg, "volume"
                                                                              " group"))}
    except errors.StorageError as exc:
        return str(exc)


@procedure(URGENT)
def master_node_name(ctx: NodeContext) -> str:
    """The master node name as this node's ssconf says.

    The master node named by this node's ``ssconf_master_node``.
    """
    value = _ssconf_value(ctx, "master_node")
    if not value:
        raise errors.OpExecError(
            f"Cannot read the master node name from {ctx.paths.ssconf_file('master_node')}")
    return value


def _cluster_files(ctx: NodeContext) -> list[str]:
    paths = ctx.paths
    files = [paths.config_file, paths.server_pem, paths.client_pem, paths.rapi_pem,
             paths.confd_hmac_key, paths.cluster_domain_secret, paths.known_hosts_file,
             paths.rapi_users_file, paths.rapi_tokens_file, paths.queue_drain_file,
             paths.watcher_pause_file,
             os.path.join(paths.data_dir, "master_epoch")]    # backend.fencing
    files.extend(glob.glob(paths.ssconf_file("*")))
    # the metadata service's entries (they hold private user-data): doc/images.md
    files.extend(glob.glob(os.path.join(paths.metadata_dir, "*.json")))
    return files


def _stop_metad(ctx: NodeContext) -> None:
    """SIGTERM this node's ``ganeti-metad`` if one runs: it serves nobody once the node left."""
    from ganeti.utils import pidfile
    pid = pidfile.running_pid(ctx.paths.pid_file(constants.METAD))
    if pid is None:
        return
    logger.info("Stopping the metadata daemon (pid %s)", pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


@procedure(NORMAL, fenced=True)
def node_leave_cluster(ctx: NodeContext, modify_ssh_setup: bool) -> None:
    """Remove the cluster files from the node and stop its node daemon after answering.

    Remove the cluster's files from this node and stop the node daemon.

    Removes config.data, the ssconf files, the certificates and keys, and
    the job queue files; the daemon stops once this answer has been sent,
    also when some of the cleanup failed (the answer then says what): the
    master has already forgotten the node.  ``modify_ssh_setup`` is
    accepted for compatibility; SSH keys are not managed by the node daemon
    (yet), so it only gets logged.
    """
    ctx.after_response.append(ctx.stop_daemon)
    if modify_ssh_setup:
        logger.info("node_leave_cluster: SSH setup changes are not implemented; skipped")
    problems = []
    for path in _cluster_files(ctx):
        try:
            if uio.remove_file(path):
                logger.info("Removed %s", path)
        except OSError as exc:
            logger.warning("Cannot remove %s: %s", path, exc)
            problems.append(f"Cannot remove {path}: {exc}")
    _stop_metad(ctx)
    if os.path.isdir(ctx.paths.queue_dir):
        from ganeti.backend import jobqueue
        try:
            jobqueue.jobqueue_purge(ctx)
        except errors.OpExecError as exc:
            problems.append(str(exc))
    if problems:
        raise errors.OpExecError("; ".join(problems))


@procedure(NORMAL)
def node_powercycle(ctx: NodeContext, hypervisor: str, hvparams: dict) -> str:
    """Hard-reset the node through its hypervisor once the answer is sent, then restart the node
    daemon; returns a message for the operator.

    Schedule a hard power cycle of this node through ``hypervisor``.

    The hypervisor is looked up now, so an unknown one fails the call; the
    cycle itself (:meth:`BaseHypervisor.powercycle_node`) runs only once
    this answer has been sent, followed by a restart of the node daemon
    (a real node's init starts it again after the reboot).  Returns the
    message the operator sees.
    """
    from ganeti.backend import instance as _instance   # instance imports nothing of node
    hyper = _instance.hypervisor_for(ctx, hypervisor)

    def _cycle() -> None:
        try:
            hyper.powercycle_node(hvparams)
        finally:
            ctx.restart_daemon()

    ctx.after_response.append(_cycle)
    return f"Power cycle of {ctx.hostname} scheduled (hypervisor {hypervisor})"


@procedure(FAST, fenced=True)
def set_watcher_pause(ctx: NodeContext, until: float | None) -> float | None:
    """Store the watcher pause-until timestamp on the node (null: not paused).

    Store (or with None remove) the watcher pause-until time on this node.
    """
    try:
        watcherpause.write_pause(ctx.paths.watcher_pause_file,
                                 watcherpause.check_until(until))
    except OSError as exc:
        raise errors.OpExecError(f"Cannot write the watcher pause file: {exc}") from exc
    return until


def config_backup_name(config_file: str, when: float) -> str:
    """``<config_file>.backup-<YYYY-MM-DD_HH_MM_SS>`` for the time ``when`` (local time)."""
    return f"{config_file}.backup-{time.strftime('%Y-%m-%d_%H_%M_%S', time.localtime(when))}"


@procedure(FAST, fenced=True)
def node_demote_from_mc(ctx: NodeContext) -> str | None:
    """No longer a master candidate: back up config.data (config.data.backup-<time>) and remove
    it; refused on the master. -> canonical backup path or None

    Forget the cluster configuration after losing the master candidate role.

    ``config.data`` is first copied atomically to
    :func:`config_backup_name` (``.1``, ``.2``... appended when that name
    exists) and then removed, so no stale configuration stays on a node
    that no longer receives updates.  Refused on the master node (the one
    named by this node's ssconf).  Returns the canonical path of the
    backup, or None when there was no configuration file.  Raises
    :class:`errors.OpExecError`.
    """
    master = _ssconf_value(ctx, "master_node")
    if master and master == ctx.hostname:
        raise errors.OpExecError("This is the master node; it cannot be demoted from the"
                                 " master candidate role")
    path = ctx.paths.config_file
    try:
        data = uio.read_file(path)
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        logger.info("Demotion: no %s to remove", path)
        return None
    except OSError as exc:
        raise errors.OpExecError(f"Cannot read {path}: {exc}") from exc
    backup = base = config_backup_name(path, ctx.clock())
    counter = 0
    while os.path.exists(backup):
        counter += 1
        backup = f"{base}.{counter}"
    try:
        uio.write_file_atomic(backup, data, mode=mode)
        os.unlink(path)
    except FileNotFoundError:
        pass        # removed meanwhile: the backup holds what it had
    except OSError as exc:
        raise errors.OpExecError(f"Cannot back up and remove {path}: {exc}") from exc
    logger.info("Demoted from master candidate: %s saved as %s and removed", path, backup)
    return ctx.canonical(backup)
