"""``gnt-cluster``: initialise, inspect, modify, verify and destroy the cluster.

``init`` runs on the future master node without any daemon (it creates the
files and starts them); every other verb talks to the master daemon over
LUXI, except ``command``/``copyfile`` which use SSH to the nodes directly.

Path mapping of ``copyfile`` on a virtual cluster: when this node's
``$GANETI_ROOTDIR`` is not ``/`` and the file lies below it, the file goes
to the same path *relative to each node's root* (``$GANETI_ROOTDIR`` of the
remote node, expanded by the remote shell); other paths are copied as is.

Master IP: ``init --master-netdev DEV`` brings the master IP up once the
daemons run; ``activate-master-ip`` / ``deactivate-master-ip`` submit the
opcodes of the same names; ``modify --master-netdev``/``--master-netmask``
move it and ``--use-external-mip-script yes|no`` picks the setup script.
"""

from __future__ import annotations

import os
import time

from ganeti import cli, constants, errors
from ganeti.cli import ipolicy_opts
from ganeti.client import cluster_epo, gnt_cluster_maint, gnt_cluster_master, tags_common
from ganeti.client.cluster_common import masterd_args, node_ssh_targets
from ganeti.client.gnt_cluster_crypto import RENEW_OPTS, renew_crypto, renew_crypto_opcode
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "init_cluster", "destroy_cluster", "show_cluster_info",
           "show_master", "show_version", "modify_cluster", "redist_conf", "verify_cluster",
           "verify_disks", "format_verify_disks",
           "queue_ops", "watcher_ops", "run_command", "copy_file", "renew_crypto",
           "renew_crypto_opcode", "parse_diskparams",
           "parse_keyval", "parse_hvparams", "node_ssh_targets", "format_command_output"]

_SEPARATOR = "-" * 48


# --- option parsing helpers ------------------------------------------------------

def parse_keyval(text: str | None, what: str = "parameters") -> dict[str, str] | None:
    """``"a=1,b=2"`` -> ``{"a": "1", "b": "2"}``; ``no_a`` -> ``a=False``, ``-a`` -> default.

    A comma inside a value is written ``\\,`` (:func:`ganeti.cli.split_escaped`).
    """
    if text is None:
        return None
    out: dict[str, str] = {}
    for item in (i.strip() for i in cli.split_escaped(text)):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            if key.startswith("no_"):
                key, value = key[3:], "False"
            elif key.startswith("-"):
                key, value = key[1:], "default"
            else:
                value = "True"
        if not key:
            raise errors.ParameterError(f"Invalid {what} item '{item}'", errors.ECODE_INVAL)
        out[key] = value
    return out


def _shell_quote(text: str) -> str:
    import shlex  # lazy: only command/copyfile need it (CLI start-up)
    return shlex.quote(text)


def _per_name(values: list[str] | None, what: str, name: str, need_params: bool
              ) -> dict[str, dict[str, str]] | None:
    """``NAME:key=val,...`` options (repeatable) -> ``{NAME: {key: val}}``; ``need_params``
    refuses a ``NAME`` without ``:``."""
    if not values:
        return None
    out: dict[str, dict[str, str]] = {}
    for text in values:
        head, sep, rest = text.partition(":")
        if not head or (need_params and not sep):
            raise errors.ParameterError(f"Invalid {what} '{text}' (expected"
                                        f" {name}:key=value,...)", errors.ECODE_INVAL)
        out.setdefault(head, {}).update(parse_keyval(rest if sep else "", what) or {})
    return out


def parse_hvparams(values: list[str] | None) -> dict[str, dict[str, str]] | None:
    """``-H fake:a=1,b=2`` (repeatable) -> ``{"fake": {"a": "1", "b": "2"}}``."""
    return _per_name(values, "hypervisor parameters", "HV", need_params=False)


def parse_diskparams(values: list[str] | None) -> dict[str, dict[str, str]] | None:
    """``-D plain:key=val,...`` (repeatable) -> ``{"plain": {"key": "val"}}``."""
    return _per_name(values, "disk parameters", "TEMPLATE", need_params=True)


def _csv(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def _submit(op: dict[str, Any], opts: Any, **kwargs: Any) -> Any:
    return cli.submit_or_send(op, opts, **kwargs)


# --- init / destroy ------------------------------------------------------------------

#: seconds each daemon of a new cluster may take to start and answer: a slow node (an
#: emulated one, or one under load) spends most of them importing
INIT_START_TIMEOUT = 120.0


def init_cluster(opts: Any, args: list[str]) -> int:
    """Initialise a new cluster with this node as its master."""
    from ganeti import bootstrap, daemonctl, luxi, pathutils
    from ganeti.utils import net

    paths = pathutils.get_paths()
    cluster_name = args[0]
    master_name = net.hostname()
    master_ip = opts.primary_ip or bootstrap.resolve_host(master_name)
    try:
        cluster_ip = bootstrap.resolve_host(cluster_name)
    except errors.ResolverError:
        cluster_ip = master_ip
    ndparams = parse_keyval(opts.ndparams, "node parameters") or {}
    noded_port = int(os.environ.get(constants.ENV_NODED_PORT) or constants.DEFAULT_NODED_PORT)
    bootstrap.init_cluster(
        paths, cluster_name, master_name=master_name, master_ip=master_ip,
        secondary_ip=opts.secondary_ip, cluster_ip=cluster_ip,
        enabled_hypervisors=_csv(opts.enabled_hypervisors) or [constants.HT_FAKE],
        enabled_disk_templates=(_csv(opts.enabled_disk_templates)
                                or list(bootstrap.DEFAULT_DISK_TEMPLATES)),
        master_netdev=opts.master_netdev or "", master_netmask=opts.master_netmask,
        use_external_mip_script=bool(_bool_arg(opts.use_external_mip_script)),
        file_storage_dir=opts.file_storage_dir,
        shared_file_storage_dir=opts.shared_file_storage_dir,
        vg_name=opts.vg_name or None,
        drbd_helper=opts.drbd_helper or None,
        candidate_pool_size=(opts.candidate_pool_size
                             or constants.DEFAULT_CANDIDATE_POOL_SIZE),
        hvparams=parse_hvparams(opts.hvparams), beparams=parse_keyval(opts.beparams),
        nicparams=parse_keyval(opts.nicparams), ndparams=ndparams,
        ipolicy=ipolicy_opts.ipolicy_changes(opts, group=False, current=ipolicy_opts.default_source(
            _csv(opts.enabled_disk_templates) or bootstrap.DEFAULT_DISK_TEMPLATES)),
        primary_ip_version=opts.primary_ip_version)
    daemonctl.start_noded(paths, master_ip, noded_port, timeout=INIT_START_TIMEOUT)
    daemonctl.start_master_daemons(paths, extra_args=masterd_args(),
                                   timeout=INIT_START_TIMEOUT)
    cl = luxi.Client(paths.master_socket)
    cli.submit_opcode_and_wait(wire.cluster_post_init(), opts, cl, feedback_fn=None)
    # --no-ssh-init (nodes added without SSH): no SSH connection, and paramiko
    # (~0.07 s of CPU) is never imported
    why = None if opts.no_ssh_init else bootstrap.record_own_host_key(
        paths, master_ip, int(ndparams.get("ssh_port") or 22))
    if why is not None:
        cli.to_stderr(f"Warning: this node's SSH host key is not recorded in"
                      f" {paths.known_hosts_file} ({why}); a console opened from another"
                      " node refuses this one until it is")
    if opts.master_netdev:
        cli.submit_opcode_and_wait(wire.cluster_activate_master_ip(), opts, cl,
                                   feedback_fn=None)
    return cli.EXIT_SUCCESS


def destroy_cluster(opts: Any, args: list[str]) -> int:
    """Destroy the cluster (only the master may be left); needs --yes-do-it."""
    if not opts.yes_do_it:
        cli.to_stderr("Destroying a cluster is irreversible. If you really want to destroy"
                      " this cluster, supply the --yes-do-it option.")
        return cli.EXIT_FAILURE
    from ganeti import bootstrap, daemonctl, pathutils
    paths = pathutils.get_paths()
    cli.submit_opcode_and_wait(wire.cluster_destroy(), opts)
    for daemon in (constants.RAPI, constants.MASTERD, constants.NODED, constants.METAD):
        daemonctl.stop_daemon(paths, daemon)
    bootstrap.remove_cluster_files(paths)
    return cli.EXIT_SUCCESS


# --- information ------------------------------------------------------------------------

def _csv_or_none(values: Any) -> str:
    return ", ".join(str(v) for v in values) if values else "(none)"


#: (label, QueryClusterInfo key) of Ganeti's ``Cluster parameters`` section.
_CLUSTER_PARAMETERS = (
    ("candidate pool size", "candidate_pool_size"),
    ("maximal number of jobs running simultaneously", "max_running_jobs"),
    ("maximal number of jobs simultaneously tracked by the scheduler", "max_tracked_jobs"),
    ("mac prefix", "mac_prefix"),
    ("master netdev", "master_netdev"),
    ("master netmask", "master_netmask"),
    ("use external master IP address setup script", "use_external_mip_script"),
    ("lvm volume group", "volume_group_name"),
    ("lvm reserved volumes", "reserved_lvs"),
    ("drbd usermode helper", "drbd_usermode_helper"),
    ("file storage path", "file_storage_dir"),
    ("shared file storage path", "shared_file_storage_dir"),
    ("gluster storage path", "gluster_storage_dir"),
    ("maintenance of node health", "maintain_node_health"),
    ("automatic master promotion", "auto_promote"),
    ("automatic node loss recovery", "ha_recovery"),
    ("node loss timeout", "ha_node_timeout"),
    ("recovery restart limit", "ha_max_restart"),
    ("recovery relocation limit", "ha_max_relocate"),
    ("uid pool", "uid_pool"),
    ("default instance allocator", "default_iallocator"),
    ("default instance allocator parameters", "default_iallocator_params"),
    ("primary ip version", "primary_ip_version"),
    ("preallocation wipe disks", "prealloc_wipe_disks"),
    ("OS search path", "os_search_path"),
    ("enabled disk templates", "enabled_disk_templates"),
    ("install image", "install_image"),
    ("instance communication network", "instance_communication_network"),
    ("zeroing image", "zeroing_image"),
    ("compression tools", "compression_tools"),
    ("enabled user shutdown", "enabled_user_shutdown"),
    ("modify ssh setup", "modify_ssh_setup"),
    ("ssh_key_type", "ssh_key_type"),
    ("ssh_key_bits", "ssh_key_bits"),
)


def _cluster_parameter(key: str, value: Any) -> Any:
    if key in ("reserved_lvs", "uid_pool"):
        return _csv_or_none(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        from ganeti.cli import info
        return info.grouped_params_info(value)
    return value


def _data_collectors(result: dict[str, Any]) -> dict[str, Any]:
    """``{name: {active, interval}}`` (interval in seconds, as Ganeti's ``1.000s``)."""
    intervals = result.get("data_collector_interval") or {}
    return {name: {"active": active,
                   "interval": f"{(intervals.get(name) or 0) / 1e6:.3f}s"}
            for name, active in (result.get("enabled_data_collectors") or {}).items()}


def format_cluster_info(result: dict[str, Any]) -> list[tuple[str, Any]]:
    """``gnt-cluster info`` for a QueryClusterInfo dict: Ganeti's keys and nesting."""
    from ganeti.cli import info   # lazy: CLI start-up
    arch = result.get("architecture") or ["?", "?"]
    enabled_hv = result.get("enabled_hypervisors") or []
    hvparams = {hv: p for hv, p in (result.get("hvparams") or {}).items() if hv in enabled_hv}
    params = [(label, _cluster_parameter(key, result[key]))
              for label, key in _CLUSTER_PARAMETERS if key in result]
    return [
        ("Cluster name", result.get("name")),
        ("Cluster UUID", result.get("uuid")),
        ("Creation time", cli.format_timestamp(result.get("ctime"))),
        ("Modification time", cli.format_timestamp(result.get("mtime"))),
        ("Master node", result.get("master")),
        ("Architecture (this node)", f"{arch[0]} ({arch[1]})"),
        ("Tags", _csv_or_none(info.nice_sort(result.get("tags") or []))),
        ("Default hypervisor", result.get("default_hypervisor")),
        ("Enabled hypervisors", ", ".join(enabled_hv)),
        ("Hypervisor parameters", info.grouped_params_info(hvparams)),
        ("OS-specific hypervisor parameters", info.grouped_params_info(result.get("os_hvp"))),
        ("OS parameters", info.grouped_params_info(result.get("osparams"))),
        ("Hidden OSes", ", ".join(result.get("hidden_os") or [])),
        ("Blacklisted OSes", ", ".join(result.get("blacklisted_os") or [])),
        ("Cluster parameters", params),
        ("Default node parameters", info.grouped_params_info(result.get("ndparams"))),
        ("Default instance parameters", info.grouped_params_info(result.get("beparams"))),
        ("Default nic parameters", info.grouped_params_info(result.get("nicparams"))),
        ("Default disk parameters", info.grouped_params_info(result.get("diskparams"))),
        ("Instance policy - limits for instances",
         ipolicy_opts.ipolicy_info(result.get("ipolicy") or {})),
        ("Data collectors", _data_collectors(result)),
    ]


def show_cluster_info(opts: Any, args: list[str]) -> int:
    """Show the cluster's name, master, parameters and defaults (YAML, doc/commands.md)."""
    from ganeti.cli import info
    info.print_info(format_cluster_info(cli.get_client(opts).QueryClusterInfo()))
    return cli.EXIT_SUCCESS


def show_master(opts: Any, args: list[str]) -> int:
    """Print the name of the master node (from this node's ssconf, on every node)."""
    return gnt_cluster_master.show_master(opts, args)


def show_version(opts: Any, args: list[str]) -> int:
    """Print the software, protocol, config and OS API versions of the master."""
    info = cli.get_client(opts).QueryClusterInfo()
    cli.to_stdout(f"Software version: {info.get('software_version')}")
    cli.to_stdout(f"Internode protocol: {info.get('protocol_version')}")
    cli.to_stdout(f"Configuration format: {info.get('config_version')}")
    cli.to_stdout(f"OS api version: {info.get('os_api_version')}")
    cli.to_stdout(f"Export interface: {info.get('export_version')}")
    cli.to_stdout(f"VCS version: {info.get('vcs_version') or '(unknown)'}")
    return cli.EXIT_SUCCESS


# --- modification ---------------------------------------------------------------------------

def _bool_arg(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.lower() in ("yes", "true", "1", "on")


def modify_cluster(opts: Any, args: list[str]) -> int:
    """Change cluster parameters (only the given ones)."""
    op: dict[str, Any] = wire.cluster_set_params()
    values = {
        "enabled_hypervisors": _csv(opts.enabled_hypervisors),
        "enabled_disk_templates": _csv(opts.enabled_disk_templates),
        "hvparams": parse_hvparams(opts.hvparams),
        "beparams": parse_keyval(opts.beparams),
        "nicparams": parse_keyval(opts.nicparams),
        "ndparams": parse_keyval(opts.ndparams, "node parameters"),
        "candidate_pool_size": opts.candidate_pool_size,
        "file_storage_dir": opts.file_storage_dir,
        "shared_file_storage_dir": opts.shared_file_storage_dir,
        "vg_name": opts.vg_name,
        "drbd_helper": opts.drbd_helper,
        "master_netdev": opts.master_netdev,
        "master_netmask": opts.master_netmask,
        "use_external_mip_script": _bool_arg(opts.use_external_mip_script),
        "maintain_node_health": _bool_arg(opts.maintain_node_health),
        "auto_promote": _bool_arg(opts.auto_promote),
        "ha_recovery": _bool_arg(opts.ha_recovery),
        "ha_node_timeout": opts.ha_node_timeout,
        "ha_max_restart": opts.ha_max_restart,
        "ha_max_relocate": opts.ha_max_relocate,
        "prealloc_wipe_disks": _bool_arg(opts.prealloc_wipe_disks),
        "max_running_jobs": opts.max_running_jobs,
        "max_tracked_jobs": opts.max_tracked_jobs,
        "install_image": opts.install_image,
        "instance_communication_network": opts.instance_communication_network,
        "default_iallocator": opts.default_iallocator,
        "default_iallocator_params": parse_keyval(opts.default_iallocator_params,
                                                  "iallocator parameters"),
        "ipolicy": ipolicy_opts.ipolicy_changes(
            opts, group=False, current=lambda: cli.get_client(opts).QueryClusterInfo()["ipolicy"]),
        "diskparams": parse_diskparams(opts.diskparams),
    }
    op.update({k: v for k, v in values.items() if v is not None})
    if len(op) == 1:
        cli.to_stderr("Please give at least one of the parameters.")
        return cli.EXIT_FAILURE
    if opts.force:
        op["force"] = True
    cl = cli.get_client(opts)
    # a new instance communication network is created by a follow-up job
    failed = cli.follow_result_jobs(_submit(op, opts, cl=cl), cl)
    return cli.EXIT_FAILURE if failed else cli.EXIT_SUCCESS


def redist_conf(opts: Any, args: list[str]) -> int:
    """Push the configuration and cluster files to all nodes again."""
    _submit(wire.cluster_redist_conf(), opts)
    return cli.EXIT_SUCCESS


def verify_cluster(opts: Any, args: list[str]) -> int:
    """Verify the cluster; exit 1 when errors were found."""
    op: dict[str, Any] = wire.cluster_verify(error_codes=opts.error_codes,
                                             verbose=bool(opts.verbose),
                                             skip_checks=_csv(opts.skip_checks) or [],
                                             ignore_errors=_csv(opts.ignore_errors) or [])
    if opts.group_name:
        op["group_name"] = opts.group_name
    cl = cli.get_client(opts)
    result = cli.submit_opcode_and_wait(op, opts, cl)
    jobs = (result or {}).get("jobs", []) if isinstance(result, dict) else []
    bad = 0
    for entry in jobs:
        ok, job_id = entry[0], entry[1]
        if not ok:
            cli.to_stderr(f"Submitting a verify job failed: {job_id}")
            bad += 1
            continue
        try:
            results = cli.poll_job(int(job_id), cl)
        except errors.GanetiError as exc:
            cli.to_stderr(f"Verify job {job_id} failed: {cli.format_job_error(exc)}")
            bad += 1
            continue
        if not all(bool(r) for r in results):
            bad += 1
    _warn_rapi_not_running()
    return cli.EXIT_FAILURE if bad else cli.EXIT_SUCCESS


def format_verify_disks(result: Any) -> tuple[list[str], list[str], list[str]]:
    """Read one OP_GROUP_VERIFY_DISKS result (doc/protocols/opcodes.md, "Verify disks").

    Returns ``(node error lines, instances to activate, missing disk
    lines)``; either kind of line means trouble.  Instances with inactive
    disks are to be activated unless a disk of theirs is missing.
    """
    bad_nodes, inactive, missing = result
    node_lines = [f"Error gathering data on node {node}: {str(text)[-400:]}"
                  for node, text in sorted(bad_nodes.items())]
    if bad_nodes:
        node_lines.append("You need to fix these nodes first before fixing instances")
    lines: list[str] = []
    activate = [name for name in inactive if name not in missing]
    for name, entries in sorted(missing.items()):
        if all(node in bad_nodes for node, _idx in entries):
            lines.append(f"Instance {name} cannot be verified as it lives on broken nodes")
            continue
        lines.append(f"Instance {name} has missing disks:")
        for node, idx in sorted(entries):
            broken = "broken node " if node in bad_nodes else ""
            lines.append(f"\t{broken}{node} disk/{idx}")
    if missing:
        lines.append("You need to replace or recreate disks for all the above instances if"
                     " this message persists after fixing broken nodes.")
    return node_lines, activate, lines


def verify_disks(opts: Any, args: list[str]) -> int:
    """Check the instance disks of every group (or one); activate the inactive ones.

    Exit 1 when a node could not be asked, a disk is missing or an
    activation failed.
    """
    op: dict[str, Any] = wire.cluster_verify_disks()
    if opts.group_name:
        op["group_name"] = opts.group_name
    cl = cli.get_client(opts)
    result = cli.submit_opcode_and_wait(op, opts, cl)
    retcode = cli.EXIT_SUCCESS
    for ok, job_id in (result or {}).get("jobs", []):
        if not ok:
            cli.to_stderr(f"Submitting a verify-disks job failed: {job_id}")
            retcode = cli.EXIT_FAILURE
            continue
        try:
            (group_result,) = cli.poll_job(int(job_id), cl)
        except errors.GanetiError as exc:
            cli.to_stdout(f"Job failed: {cli.format_job_error(exc)}")
            retcode = cli.EXIT_FAILURE
            continue
        node_lines, activate, missing_lines = format_verify_disks(group_result)
        for line in node_lines:
            cli.to_stdout(line)
        for name in activate:
            cli.to_stdout(f"Activating disks for instance '{name}'")
            try:
                cli.submit_opcode_and_wait(wire.instance_activate_disks(
                    instance_name=name, wait_for_sync=True), opts, cl)
            except errors.GanetiError as exc:
                cli.to_stderr(f"Error activating disks for instance {name}:"
                              f" {cli.format_job_error(exc)}")
                retcode = cli.EXIT_FAILURE
        for line in missing_lines:
            cli.to_stdout(line)
        if node_lines or missing_lines:
            retcode = cli.EXIT_FAILURE
        elif not activate:
            cli.to_stdout("No disks need to be activated.")
    return retcode


def _warn_rapi_not_running() -> None:
    """A warning when this node is the master (its ssconf says so) and runs no
    ``ganeti-rapi`` (its pid file); run elsewhere (a node, or a host that reaches
    the master's LUXI socket) the command cannot see the master's processes."""
    from ganeti import pathutils, ssconfstore
    from ganeti.utils import pidfile
    paths = pathutils.get_paths()
    try:
        master = ssconfstore.SimpleStore(paths).get_master_node()
    except errors.GanetiError:
        return
    # short names (no resolver: outside this verb's start-up set, test_startup_budget)
    here = os.environ.get(constants.ENV_HOSTNAME) or os.uname().nodename
    if master.split(".")[0].lower() != here.split(".")[0].lower():
        return
    if pidfile.running_pid(paths.pid_file(constants.RAPI)) is None:
        cli.to_stderr(f"WARNING: the RAPI daemon ({constants.RAPI}) is not running on the"
                      " master node")


# --- queue and watcher ---------------------------------------------------------------------------

def queue_ops(opts: Any, args: list[str]) -> int:
    """``queue drain|undrain|info``: set, clear or show the queue drain flag."""
    command = args[0]
    cl = cli.get_client(opts)
    if command == "drain":
        cl.SetDrainFlag(True)
    elif command == "undrain":
        cl.SetDrainFlag(False)
    elif command == "info":
        drained = cl.QueryConfigValues(["drain_flag"])[0]
        cli.to_stdout(f"The drain flag is {'set' if drained else 'unset'}")
    else:
        return cli.usage_error(opts.command, f"unknown queue command '{command}'"
                               " (use drain, undrain or info)")
    return cli.EXIT_SUCCESS


def _show_watcher_pause(until: Any) -> None:
    if until is None or until < time.time():
        cli.to_stdout("The watcher is not paused.")
    else:
        cli.to_stdout(f"The watcher is paused until {time.ctime(until)}.")


def watcher_ops(opts: Any, args: list[str]) -> int:
    """``watcher pause DURATION|continue|info``."""
    command = args[0]
    cl = cli.get_client(opts)
    if command == "pause":
        if len(args) != 2:
            return cli.usage_error(opts.command, "watcher pause needs a DURATION (e.g. 1h)")
        until = time.time() + cli.parse_timespec(args[1])
        _show_watcher_pause(cl.SetWatcherPause(until))
    elif command == "continue":
        cl.SetWatcherPause(None)
        cli.to_stdout("The watcher is no longer paused.")
    elif command == "info":
        _show_watcher_pause(cl.QueryConfigValues(["watcher_pause"])[0])
    else:
        return cli.usage_error(opts.command, f"unknown watcher command '{command}'"
                               " (use pause, continue or info)")
    return cli.EXIT_SUCCESS


# --- SSH: command and copyfile ---------------------------------------------------------------------

def format_command_output(name: str, output: str, code: int | str) -> list[str]:
    """Ganeti's per-node block of ``gnt-cluster command``."""
    lines = [_SEPARATOR, f"node: {name}"]
    if output:
        lines.append(output.rstrip("\n"))
    lines.append(f"return code = {code}")
    return lines


def _ssh_runner(paths: Any) -> Any:
    from ganeti import ssh
    return ssh.SshRunner(paths.ssh_key_file, known_hosts_path=paths.known_hosts_file)


def run_command(opts: Any, args: list[str]) -> int:
    """Run a shell command on all nodes (or the -n ones) over SSH and show the output."""
    from ganeti import pathutils
    paths = pathutils.get_paths()
    targets = node_ssh_targets(paths, opts.nodes)
    runner = _ssh_runner(paths)
    command = " ".join(args)
    by_addr = {addr: name for name, addr, _ in targets}
    results = runner.run_many([a for _, a, _ in targets], command,
                              ports={a: p for _, a, p in targets}, timeout=opts.timeout)
    failed = False
    for name, addr, _port in targets:
        res = results[addr]
        if isinstance(res, errors.GanetiError):
            lines = format_command_output(by_addr[addr], str(res), "?")
            failed = True
        else:
            text = res.stdout + res.stderr
            code = res.exit_code if res.exit_code is not None else f"signal {res.signal}"
            failed = failed or res.failed
            lines = format_command_output(name, text, code)
        for line in lines:
            cli.to_stdout(line)
    return cli.EXIT_FAILURE if failed else cli.EXIT_SUCCESS


def _remote_path_expr(paths: Any, path: str) -> str:
    """Shell expression of ``path`` on a node (see the module doc for the mapping)."""
    if os.path.abspath(paths.root) != "/" and paths.contains(path):
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(paths.root))
        return '"${GANETI_ROOTDIR:-}"' + _shell_quote("/" + rel)
    return _shell_quote(path)


def copy_file(opts: Any, args: list[str]) -> int:
    """Copy a file to the same place on all other nodes (or the -n ones) over SSH."""
    from ganeti import pathutils
    from ganeti.utils import net
    paths = pathutils.get_paths()
    path = os.path.abspath(args[0])
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        mode = os.stat(path).st_mode & 0o7777
    except OSError as exc:
        raise errors.OpPrereqError(f"Cannot read {path}: {exc}", errors.ECODE_NOENT) from exc
    me = net.hostname()
    targets = [t for t in node_ssh_targets(paths, opts.nodes) if t[0] != me]
    dst = _remote_path_expr(paths, path)
    script = (f'dst={dst}; mkdir -p "$(dirname "$dst")" && cat > "$dst.gnt-tmp" && '
              f'chmod {mode:o} "$dst.gnt-tmp" && mv -f "$dst.gnt-tmp" "$dst"')
    runner = _ssh_runner(paths)
    results = runner.run_many([a for _, a, _ in targets], script,
                              ports={a: p for _, a, p in targets}, input_data=data)
    failed = False
    for name, addr, _port in targets:
        res = results[addr]
        if isinstance(res, errors.GanetiError) or res.failed:
            detail = res if isinstance(res, errors.GanetiError) else (
                res.stderr.strip() or res.fail_reason)
            cli.to_stderr(f"Copy of file {path} to node {name} failed: {detail}")
            failed = True
    return cli.EXIT_FAILURE if failed else cli.EXIT_SUCCESS


# --- the commands table ---------------------------------------------------------------------------

_O = cli.Option
HV_LIST_OPT = _O("--enabled-hypervisors", dest="enabled_hypervisors", default=None,
                 metavar="HV[,HV...]", help="Comma-separated list of enabled hypervisors"
                 " (the first is the default; init default: fake)")
DT_LIST_OPT = _O("--enabled-disk-templates", dest="enabled_disk_templates", default=None,
                 metavar="TEMPLATE[,...]", help="Comma-separated list of enabled disk"
                 " templates (init default: diskless,file,sharedfile)")
NETDEV_OPT = _O("--master-netdev", dest="master_netdev", default=None, metavar="DEV",
                help="Network device for the master IP address")
FSDIR_OPT = _O("--file-storage-dir", dest="file_storage_dir", default=None, metavar="DIR",
               help="Directory for file-based instance disks")
DRBD_HELPER_OPT = _O("--drbd-usermode-helper", dest="drbd_helper", default=None,
                     metavar="HELPER", help="The usermode helper DRBD must use on the nodes"
                     " (an absolute path; default at init with drbd enabled: /bin/true);"
                     " gnt-cluster verify checks it")
VG_OPT = _O("--vg-name", dest="vg_name", default=None, metavar="VG",
            help="LVM volume group of plain disks (needed to enable plain; modify: ''"
            " removes it)")
SFSDIR_OPT = _O("--shared-file-storage-dir", dest="shared_file_storage_dir", default=None,
                metavar="DIR", help="Directory for shared-file instance disks")
POOL_OPT = _O("-C", "--candidate-pool-size", dest="candidate_pool_size", type=int,
              default=None, metavar="N", help="Number of master candidates to maintain")
HVP_OPT = _O("-H", "--hypervisor-parameters", dest="hvparams", action="append", default=[],
             metavar="HV:key=val,...", help="Hypervisor parameters (repeatable)")
BEP_OPT = _O("-B", "--backend-parameters", dest="beparams", default=None,
             metavar="key=val,...", help="Default instance (backend) parameters")
NICP_OPT = _O("-N", "--nic-parameters", dest="nicparams", default=None, metavar="key=val,...",
              help="Default NIC parameters")
NDP_OPT = _O("--node-parameters", dest="ndparams", default=None, metavar="key=val,...",
             help="Default node parameters (e.g. ssh_port=2222)")
PIP_OPT = _O("--primary-ip", dest="primary_ip", default=None, metavar="IP",
             help="Primary IP of this (master) node (default: resolve its name through"
                  " $GANETI_HOSTS_FILE or DNS)")
SIP_OPT = _O("-s", "--secondary-ip", dest="secondary_ip", default=None, metavar="IP",
             help="Secondary IP of this node (default: the primary IP)")
NOSSH_OPT = _O("--no-ssh-init", dest="no_ssh_init", action="store_true", default=False,
               help="Do not connect to this node's SSH server to record its host key (a"
                    " cluster whose nodes are not reached over SSH); the cluster key is"
                    " still made")
MNH_OPT = _O("--maintain-node-health", dest="maintain_node_health", default=None,
             choices=["yes", "no"], help="Enable or disable node health maintenance")
AUTOPROMOTE_OPT = _O("--auto-promote", dest="auto_promote", default=None, choices=["yes", "no"],
                     help="Whether the master candidates promote one of themselves when the"
                          " master is gone (default no; doc/ha.md, \"Master autopromotion\")")
HAREC_OPT = _O("--ha-recovery", dest="ha_recovery", default=None, choices=["yes", "no"],
                help="Whether the master fences a node it declares dead and restarts its HA"
                     " instances elsewhere (default no; doc/ha.md, \"Node loss recovery\")")
HATMO_OPT = _O("--ha-node-timeout", dest="ha_node_timeout", type=int, default=None,
               metavar="SECONDS", help="Seconds without an answer from a node before the"
               " master candidates are asked whether they reach it (default 20)")
HARESTART_OPT = _O("--ha-max-restart", dest="ha_max_restart", type=int, default=None,
                   metavar="N", help="Recovery jobs submitted again for one instance after a"
                   " failed one (default 1)")
HARELOC_OPT = _O("--ha-max-relocate", dest="ha_max_relocate", type=int, default=None,
                 metavar="N", help="Automatic relocations of one instance while one master"
                 " daemon runs (default 1)")
WIPE_OPT = _O("--prealloc-wipe-disks", dest="prealloc_wipe_disks", default=None,
              choices=["yes", "no"], help="Overwrite new disks (and the part a grow-disk adds)"
              " with zeros before use (doc/storage.md, \"Wiping disks\")")
MAXJOBS_OPT = _O("--max-running-jobs", dest="max_running_jobs", type=int, default=None,
                 metavar="N", help="Maximum number of jobs running at once")
MAXTRACK_OPT = _O("--max-tracked-jobs", dest="max_tracked_jobs", type=int, default=None,
                  metavar="N", help="Maximum number of jobs tracked by the scheduler")
IMAGE_OPT = _O("--install-image", dest="install_image", default=None, metavar="IMAGE",
               help="Absolute path or URL of the image that runs OS scripts safely (stored"
                    " and shown; not used here, doc/compat.md); '' clears it")
ICN_OPT = _O("--instance-communication-network", dest="instance_communication_network",
             default=None, metavar="NETWORK", help="Network name for instance communication"
             " (created and connected to every node group when missing); '' clears it")
PIPV_OPT = _O("--primary-ip-version", dest="primary_ip_version", type=int, default=4,
              choices=[4, 6], metavar="4|6", help="Cluster-wide IP version of the primary"
              " IP addresses (default 4)")
IALLOC_OPT = _O("-I", "--default-iallocator", dest="default_iallocator", default=None,
                metavar="NAME", help="Default instance allocator")
IALLOCP_OPT = _O("--default-iallocator-params", dest="default_iallocator_params",
                 default=None, metavar="KEY=VALUE,...",
                 help="Options passed to the default allocator as --KEY=VALUE (replaces"
                      " the current ones; '' clears them)")
YES_OPT = _O("--yes-do-it", dest="yes_do_it", action="store_true", default=False,
             help="Really destroy the cluster")
ECODES_OPT = _O("--error-codes", dest="error_codes", action="store_true", default=False,
                help="Print machine-parsable error codes")
SKIP_OPT = _O("--skip-checks", dest="skip_checks", default=None, metavar="CHECK[,...]",
              help="Optional checks to skip (nplusone_mem, disk, clock...)")
IGNERR_OPT = _O("-I", "--ignore-errors", dest="ignore_errors", default=None,
                metavar="CODE[,...]", help="Error codes to report as warnings")
GROUP_OPT = _O("-g", "--node-group", "--group", dest="group_name", default=None,
               metavar="GROUP", help="Verify only this node group")
NODES_OPT = _O("-n", "--node", dest="nodes", action="append", default=[], metavar="NODE",
               help="Only this node (repeatable; default: all nodes)")
CMD_TIMEOUT_OPT = _O("--timeout", dest="timeout", type=float, default=60.0, metavar="SECONDS",
                     help="Per-node command timeout (default 60)")
NETMASK_OPT = _O("--master-netmask", dest="master_netmask", type=int, default=None,
                 metavar="BITS", help="Prefix length of the master IP address (e.g. 32)")
EXTMIP_OPT = _O("--use-external-mip-script", dest="use_external_mip_script", default=None,
                choices=["yes", "no"], help="Use the cluster's own master IP setup script"
                " (etc/ganeti/scripts/master-ip-setup) instead of the default one")

_INIT_OPTS = [HV_LIST_OPT, DT_LIST_OPT, NETDEV_OPT, NETMASK_OPT, EXTMIP_OPT, FSDIR_OPT,
              SFSDIR_OPT, VG_OPT, DRBD_HELPER_OPT, POOL_OPT, HVP_OPT, BEP_OPT, NICP_OPT,
              NDP_OPT, PIP_OPT, SIP_OPT, PIPV_OPT, NOSSH_OPT, *ipolicy_opts.CLUSTER_IPOLICY_OPTS]
DISKP_OPT = _O("-D", "--disk-parameters", dest="diskparams", action="append", default=[],
               metavar="TEMPLATE:KEY=VAL,...", help="Disk parameters of a template (repeatable)")
_MODIFY_OPTS = [HV_LIST_OPT, DT_LIST_OPT, NETDEV_OPT, NETMASK_OPT, EXTMIP_OPT, FSDIR_OPT,
                SFSDIR_OPT, VG_OPT, DRBD_HELPER_OPT, POOL_OPT, HVP_OPT, BEP_OPT, NICP_OPT, NDP_OPT,
                DISKP_OPT, MNH_OPT, WIPE_OPT, MAXJOBS_OPT, MAXTRACK_OPT, IMAGE_OPT, ICN_OPT,
                IALLOC_OPT, AUTOPROMOTE_OPT, HAREC_OPT, HATMO_OPT, HARESTART_OPT, HARELOC_OPT,
                IALLOCP_OPT, *ipolicy_opts.CLUSTER_IPOLICY_OPTS, cli.FORCE_OPT, cli.SUBMIT_OPT,
                cli.PRIORITY_OPT, cli.DRY_RUN_OPT]

commands: dict[str, cli.Command] = {
    "init": (init_cluster, [cli.ArgUnknown(min=1, max=1, name="CLUSTER_NAME")], _INIT_OPTS,
             "[options] CLUSTER_NAME",
             "Initialise a new cluster with this node as the master: creates the"
             " certificates, keys, configuration and ssconf files and starts the"
             " node and master daemons"),
    "destroy": (destroy_cluster, cli.ARGS_NONE, [YES_OPT], "--yes-do-it",
                "Destroy the cluster (all other nodes must have been removed)"),
    "info": (show_cluster_info, cli.ARGS_NONE, [], "",
             "Show the cluster configuration: name, master, parameters and defaults"),
    "version": (show_version, cli.ARGS_NONE, [], "", "Show the software and protocol versions"),
    "modify": (modify_cluster, cli.ARGS_NONE, _MODIFY_OPTS, "[options]",
               "Change cluster parameters (hypervisors, defaults, candidate pool size...)"),
    "redist-conf": (redist_conf, cli.ARGS_NONE, [cli.SUBMIT_OPT, cli.PRIORITY_OPT], "[options]",
                    "Push the configuration and cluster files to all nodes"),
    "verify": (verify_cluster, cli.ARGS_NONE,
               [cli.VERBOSE_OPT, ECODES_OPT, SKIP_OPT, IGNERR_OPT, GROUP_OPT, cli.PRIORITY_OPT],
               "[options]",
               "Verify the cluster (config, node reachability, versions, files, clock);"
               " prints ERROR/WARNING lines and exits 1 when errors were found"),
    "verify-disks": (verify_disks, cli.ARGS_NONE, [GROUP_OPT, cli.PRIORITY_OPT], "[-g GROUP]",
                     "Check the instance disks of every node group (or one): report missing"
                     " disk files and files of the wrong size, activate inactive disks"),
    "queue": (queue_ops, [cli.ArgUnknown(min=1, max=1, name="drain|undrain|info")], [],
              "drain|undrain|info", "Set, clear or show the job queue drain flag"),
    "watcher": (watcher_ops, [cli.ArgUnknown(min=1, max=2, name="pause DURATION|continue|info")],
                [], "pause DURATION|continue|info",
                "Pause the watcher for DURATION (e.g. 30m, 1h), resume it or show its state"),
    "command": (run_command, [cli.ArgUnknown(min=1, name="COMMAND")], [NODES_OPT,
                CMD_TIMEOUT_OPT], "[-n NODE...] COMMAND...",
                "Run a shell command on all nodes (or the given ones) over SSH"),
    "copyfile": (copy_file, [cli.ArgFile(min=1, max=1)], [NODES_OPT], "[-n NODE...] FILE",
                 "Copy a file to the same path on all other nodes (or the given ones)"),
    "renew-crypto": (renew_crypto, cli.ARGS_NONE,
                     [*RENEW_OPTS, cli.FORCE_OPT],
                     "[options]",
                     "Renew the cluster certificate (restarts the daemons), the RAPI"
                     " certificate, the cluster SSH key and/or the cluster domain secret"
                     " on all nodes"),
}


commands.update({
    "add-tags": tags_common.add_tags(constants.TAG_CLUSTER),
    "list-tags": tags_common.list_tags(constants.TAG_CLUSTER),
    "remove-tags": tags_common.remove_tags(constants.TAG_CLUSTER),
    "search-tags": tags_common.search_tags(),
})
# master-failover, master-ping, getmaster (doc/design/failover.md)
commands.update(gnt_cluster_master.commands)
# rename, repair-disk-sizes, show-ispecs-cmd
commands.update(gnt_cluster_maint.commands)
commands.update(cluster_epo.EPO_ROWS)   # epo (doc/oob.md)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-cluster``."""
    return cli.generic_main(commands, argv, prog="gnt-cluster")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
