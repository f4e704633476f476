"""``gnt-instance``: add, remove, list, start/stop, migrate, modify... instances.

Opcodes are built as JSON dicts (the master validates them), which keeps
the start-up of this frequently used tool light.
"""

from __future__ import annotations

from ganeti import cli, constants, errors
from ganeti.cli.ipolicy_opts import IGNORE_IPOLICY_OPT
from ganeti.client import relocation
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "commands", "LIST_DEFAULT_FIELDS", "parse_kv", "parse_indexed",
           "parse_mods", "parse_hv"]

LIST_DEFAULT_FIELDS = ["name", "hypervisor", "os", "pnode", "status", "oper_ram"]


# --- argument parsing ------------------------------------------------------------

def parse_kv(text: str | None, what: str = "parameter") -> dict[str, Any]:
    """``a=1,b=x,no_c`` -> ``{"a": "1", "b": "x", "c": False}``; a comma inside a
    value is written ``\\,`` (:func:`ganeti.cli.split_escaped`)."""
    result: dict[str, Any] = {}
    if not text:
        return result
    for part in cli.split_escaped(text):
        if not part:
            continue
        if "=" in part:
            key, value = part.split("=", 1)
            result[key.strip()] = value
        elif part.startswith("no_"):
            result[part[3:]] = False
        elif part.startswith("-"):
            result[part[1:]] = "default"
        else:
            result[part] = True
    return result


def _size(value: Any, what: str) -> int:
    from ganeti.utils import units
    try:
        return units.parse_unit(value)
    except (errors.GanetiError, ValueError) as exc:
        raise errors.OpPrereqError(f"Invalid {what} {value!r}: {exc}", errors.ECODE_INVAL) from None


def parse_indexed(values: list[str] | None, what: str) -> list[dict[str, Any]]:
    """``["0:size=1G,mode=rw", "1:size=512"]`` -> list of dicts in index order."""
    items: dict[int, dict[str, Any]] = {}
    for value in values or []:
        idx_text, _, rest = value.partition(":")
        try:
            idx = int(idx_text)
        except ValueError:
            raise errors.OpPrereqError(f"Invalid {what} index in {value!r}",
                                       errors.ECODE_INVAL) from None
        if idx in items:
            raise errors.OpPrereqError(f"Duplicate {what} index {idx}", errors.ECODE_INVAL)
        items[idx] = parse_kv(rest, what)
    if items and sorted(items) != list(range(len(items))):
        raise errors.OpPrereqError(f"{what} indices must be 0..N-1 without gaps",
                                   errors.ECODE_INVAL)
    return [items[i] for i in sorted(items)]


def _disk_spec(params: dict[str, Any]) -> dict[str, Any]:
    spec = dict(params)
    if "size" in spec:
        spec["size"] = _size(spec["size"], "disk size")
    if isinstance(spec.get("spindles"), str) and spec["spindles"].isdigit():
        spec["spindles"] = int(spec["spindles"])
    return spec


def parse_mods(values: list[str] | None, what: str) -> list[list[Any]]:
    """``add:size=1G`` / ``remove`` / ``N:mode=ro`` -> ``[[op, index, params]]``.

    An index may carry the operation as a flag: ``N:add,...``, ``N:remove``,
    ``N:modify,...`` (the default for an index).  As in Ganeti, an existing
    NIC or disk may be named by its name or UUID instead of its index
    (``NAME:remove``); it is sent as given, the master resolves it.
    """
    result: list[list[Any]] = []
    for value in values or []:
        head, _, rest = value.partition(":")
        params = parse_kv(rest, what)
        if what == "disk":
            params = _disk_spec(params)
        if head in ("add", "remove"):
            result.append([head, -1, params])
        else:
            if not head:
                raise errors.OpPrereqError(f"Invalid {what} modification {value!r}",
                                           errors.ECODE_INVAL)
            idx: int | str
            try:
                idx = int(head)
            except ValueError:
                idx = head          # a name or UUID
            ops = [op for op in ("add", "remove", "modify") if params.get(op) is True]
            if len(ops) > 1:
                raise errors.OpPrereqError(f"Invalid {what} modification {value!r}: more"
                                           f" than one of {', '.join(ops)}",
                                           errors.ECODE_INVAL)
            op = ops[0] if ops else "modify"
            params.pop(op, None)
            result.append([op, idx, params])
    return result


def parse_hv(text: str | None) -> tuple[str | None, dict[str, Any]]:
    """``-H fake:migration_mode=live`` -> ``("fake", {...})``; ``-H k=v`` -> (None, ...)."""
    if not text:
        return None, {}
    if ":" in text.split(",", 1)[0] and "=" not in text.split(":", 1)[0]:
        hv, _, rest = text.partition(":")
        return hv, parse_kv(rest)
    if "=" not in text and "," not in text:
        return text, {}
    return None, parse_kv(text)


def _os_opt(value: str | None) -> str | None:
    return value


# --- options --------------------------------------------------------------------

O = cli.Option
TEMPLATE_OPT = O("-t", "--disk-template", dest="disk_template", default=None,
                 help="Disk template: diskless, file, sharedfile, plain or drbd")
CONVERT_TEMPLATE_OPT = O("-t", "--disk-template", dest="disk_template", default=None,
                         metavar="TEMPLATE", help="Convert the stopped instance's disks to"
                         " this template (plain <-> drbd; drbd needs -n SNODE)")
CONVERT_SNODE_OPT = O("-n", "--node", dest="node", default=None, metavar="SNODE",
                      help="The secondary node of a conversion to drbd")
DISK_OPT = O("--disk", dest="disks", action="append", default=None, metavar="N:size=..,mode=..",
             help="Disk N (repeatable, indices 0..N-1), e.g. 0:size=10G,mode=rw")
SIZE_OPT = O("-s", "--os-size", dest="sd_size", default=None, metavar="SIZE",
             help="Size of a single disk (shortcut for --disk 0:size=SIZE)")
NET_OPT = O("--net", dest="nics", action="append", default=None, metavar="N:mac=..,ip=..",
            help="NIC N (repeatable), e.g. 0:mac=aa:00:00:00:00:01,ip=192.0.2.1,link=br0; with "
                 "modify: add:..., remove, N:remove or N:link=...")
NO_NICS_OPT = O("--no-nics", dest="no_nics", action="store_true", default=False,
                help="Create the instance without any NIC")
BE_OPT = O("-B", "--backend-parameters", dest="beparams", default=None,
           help="Back-end parameters, e.g. maxmem=512,minmem=256,vcpus=2 ('default' resets)")
HV_OPT = O("-H", "--hypervisor-parameters", dest="hvparams", default=None,
           help="Hypervisor and/or its parameters: HV:key=val,... or key=val,...")
OS_OPT = O("-o", "--os-type", dest="os", default=None,
           help="Operating system definition, OS[+VARIANT] (see gnt-os list)")
OSP_OPT = O("-O", "--os-parameters", dest="osparams", default=None,
            help="OS parameters, key=val,... (see gnt-os info)")
OSP_PRIVATE_OPT = O("--os-parameters-private", dest="osparams_private", default=None,
                    metavar="KEY=VAL,...",
                    help="Private OS parameters: kept in the configuration for later"
                         " reinstalls, never shown or logged")
OS_IMAGE_OPT = O("--os-image", dest="os_image", default=None, metavar="IMAGE",
                 help="Install from a raw or qcow2 image (an absolute path on the master or"
                      " an http(s) URL) instead of OS scripts: the OS parameter os-image")
OS_IMAGE_CHECKSUM_OPT = O("--os-image-checksum", dest="os_image_checksum", default=None,
                          metavar="sha256:HEX",
                          help="The image's expected digest, checked before anything is"
                               " written: the OS parameter os-image-checksum")
OSP_SECRET_OPT = O("--os-parameters-secret", dest="osparams_secret", default=None,
                   metavar="KEY=VAL,...",
                   help="Secret OS parameters: given to the OS scripts of this operation"
                        " only, never stored, shown or logged (give them again for every"
                        " reinstall)")
NEW_PRIMARY_OPT = O("--new-primary", dest="new_primary", default=None, metavar="NODE",
                    help="Make NODE the primary node, the disks having been moved there by"
                         " hand (checks the instance is stopped, unless --force)")
RECREATE_DISK_OPT = O("--disk", dest="recreate_disks", action="append", default=None,
                      metavar="N[:size=..,spindles=..,mode=..]",
                      help="A disk to recreate, with changed parameters (repeatable;"
                           " default: all)")
PNODE_OPT = O("-n", "--node", dest="node", default=None, metavar="NODE[:SNODE]",
              help="Primary node (and secondary node, for mirrored templates)")
ALLOW_FAILOVER_OPT = O("--allow-failover", dest="allow_failover", action="store_true",
                       default=False, help="Fail the instance over when it cannot be"
                       " migrated because it does not run (although it should)")
REPLACE_PRI_OPT = O("-p", "--on-primary", dest="on_primary", action="store_true",
                    default=False, help="Replace the volumes on the primary node (the"
                    " secondary's data is copied onto the new ones)")
REPLACE_SEC_OPT = O("-s", "--on-secondary", dest="on_secondary", action="store_true",
                    default=False, help="Replace the volumes on the secondary node")
NEW_SECONDARY_OPT = O("-n", "--new-secondary", dest="new_secondary", default=None,
                      metavar="NODE", help="Move the mirrors to a new secondary node")
REPLACE_AUTO_OPT = O("-a", "--auto", dest="auto", action="store_true", default=False,
                     help="Replace the volumes on whichever node's data is not in order")
REPLACE_DISKS_OPT = O("--disks", dest="disks", default=None, metavar="N,N",
                      help="Only these disks (indices; with -p or -s)")
NO_WAIT_SYNC_OPT = O("--no-wait-for-sync", dest="wait_for_sync", action="store_false",
                     default=True, help="Do not wait for the new mirrors (drbd) to sync;"
                     " the instance starts with its disks degraded")
WAIT_SYNC_OPT = O("--wait-for-sync", dest="wait_for_sync", action="store_true",
                  default=False, help="Wait until the mirrors (drbd) are in sync, showing"
                  " the resync's progress")
IGNORE_SIZE_OPT = O("--ignore-size", dest="ignore_size", action="store_true",
                    default=False, help="Accepted (Ganeti's): the volumes are assembled"
                    " whatever size the configuration records (see"
                    " gnt-cluster repair-disk-sizes)")
NOSTART_OPT = O("--no-start", dest="start", action="store_false", default=True,
                help="Do not start the instance after creating it")
NOINSTALL_OPT = O("--no-install", dest="no_install", action="store_true", default=False,
                  help="Do not run the OS create scripts (the disks stay blank)")
NONAMECHECK_OPT = O("--no-name-check", dest="name_check", action="store_false", default=True,
                    help="Do not check the instance name (by default it must resolve via "
                         "DNS or /etc/hosts, the instance takes the resolved FQDN and NICs "
                         "with ip=auto its address); needs --no-ip-check too")
NOIPCHECK_OPT = O("--no-ip-check", dest="ip_check", action="store_false", default=True,
                  help="Do not check that the resolved IP address is free (by default the "
                       "command fails when a host answers a TCP connect to it, even with "
                       "a refusal)")
#: rename checks nothing unless asked, as Ganeti's (``--no-*`` accepted: the default)
RENAME_CHECK_OPTS = [
    O("--name-check", dest="name_check", action="store_true", default=False,
      help="Check the new name: it must resolve (DNS or /etc/hosts) to itself or itself"
           " plus a domain, and the instance takes the resolved FQDN"),
    O("--ip-check", dest="ip_check", action="store_true", default=False,
      help="Check that nothing answers at the new name's address (needs --name-check)"),
    O("--no-name-check", dest="name_check", action="store_false", default=False,
      help="Do not check the new name (the default)"),
    O("--no-ip-check", dest="ip_check", action="store_false", default=False,
      help="Do not check the new name's address (the default)"),
]
NOCONFLICTS_OPT = O("--no-conflicts-check", dest="conflicts_check", action="store_false",
                    default=True,
                    help="Do not check NIC addresses for conflicts: an address taken in its"
                         " network, or inside a network of the node group the NIC is not on"
                         " (doc/networks.md)")
TAGS_OPT = O("--tags", dest="tags", default=None, metavar="TAG,TAG",
             help="Tags to put on the new instance, comma separated")
FSDIR_OPT = O("--file-storage-dir", dest="file_storage_dir", default=None,
              help="Directory of the disk files, relative to the cluster file storage dir")
FDRIVER_OPT = O("--file-driver", dest="file_driver", default=None,
                help="Driver for file-based disks (loop)")
IGNORE_FAIL_OPT = O("--ignore-failures", dest="ignore_failures", action="store_true",
                    default=False,
                    help="Remove the instance from the configuration even if removing its "
                         "disks fails")
SHUTDOWN_TIMEOUT_OPT = O("--shutdown-timeout", dest="shutdown_timeout", type=int, default=120,
                         help="Seconds to wait for a clean shutdown before forcing it")
STOP_TIMEOUT_OPT = O("--timeout", dest="timeout", type=int, default=120,
                     help="Seconds to wait for a clean shutdown before forcing it")
NOREMEMBER_OPT = O("--no-remember", dest="no_remember", action="store_true", default=False,
                   help="Do not record the change of state in the configuration (the instance "
                        "then shows as ERROR_up/ERROR_down)")
ALL_OPT = O("--all", dest="multi_all", action="store_true", default=False,
            help="Act on all instances (no arguments)")
NODE_SEL_OPT = O("--node", dest="multi_node", action="store_true", default=False,
                 help="Arguments are nodes: act on their primary and secondary instances")
PRIMARY_SEL_OPT = O("--primary", dest="multi_primary", action="store_true", default=False,
                    help="Arguments are nodes: act on their primary instances")
TAGS_SEL_OPT = O("--tags", dest="multi_tags", action="store_true", default=False,
                 help="Arguments are tags: act on the instances having any of them")
FORCE_MULTI_OPT = O("--force-multiple", dest="force_multiple", action="store_true",
                    default=False,
                    help="Do not ask for confirmation when acting on more than one instance")
PAUSED_OPT = O("--paused", dest="startup_paused", action="store_true", default=False,
               help="Start the instance paused")
REBOOT_TYPE_OPT = O("--type", dest="reboot_type", default=constants.REBOOT_HARD,
                    choices=sorted(constants.REBOOT_TYPES),
                    help="soft (inside the guest), hard (stop and start, default) or full "
                         "(also re-activate the disks)")
NONLIVE_OPT = O("--non-live", dest="live", action="store_false", default=True,
                help="Migrate without keeping the instance running (pause, copy, resume)")
MIGRATION_MODE_OPT = O("--migration-mode", dest="migration_mode", default=None,
                       choices=sorted(constants.HT_MIGRATION_MODES),
                       help="Migration mode, overriding the hypervisor's migration_mode")
CLEANUP_OPT = O("--cleanup", dest="cleanup", action="store_true", default=False,
                help="Recover from a failed migration (find where the instance runs)")
TARGET_OPT = O("-n", "--target-node", dest="target_node", default=None,
               help="Target node")
IGNORE_CONSIST_OPT = O("--ignore-consistency", dest="ignore_consistency", action="store_true",
                       default=False,
                       help="Fail over even if the disks are not consistent")
OFFLINE_OPT = O("--offline", dest="offline", action="store_const", const=True, default=None,
                help="Mark the (stopped) instance offline")
# a separate dest: the option parser keeps only the first option of each dest
ONLINE_OPT = O("--online", dest="online", action="store_true", default=False,
               help="Mark an offline instance online again (stopped)")
RUNTIME_MEM_OPT = O("-m", "--runtime-memory", dest="runtime_mem", default=None, metavar="SIZE",
                    help="Change the memory of the running instance (within minmem..maxmem"
                         " unless --force)")
HOTPLUG_OPT = O("--hotplug", dest="hotplug", action="store_true", default=False,
                help="Plug NIC and disk additions/removals into the running instance"
                     " (fails if the hypervisor cannot)")
HOTPLUG_IF_POSSIBLE_OPT = O("--hotplug-if-possible", dest="hotplug_if_possible",
                            action="store_true", default=False,
                            help="Hotplug where the hypervisor can, else apply the changes"
                                 " at the next start")
NOHOTPLUG_OPT = O("--no-hotplug", dest="no_hotplug", action="store_true", default=False,
                  help="Do not hotplug (our default; Ganeti's default is to hotplug)")
COMMUNICATION_OPT = O("-c", "--communication", dest="instance_communication", default=None,
                      choices=["yes", "no"], metavar="yes|no", help="Enable or disable the"
                      " instance's NIC on the instance communication network")
OPPORTUNISTIC_OPT = O("--opportunistic-locking", dest="opportunistic_locking",
                      action="store_true", default=False,
                      help="With an iallocator, lock only the nodes free at the time"
                           " (passed to the master in the opcode)")
ABSOLUTE_OPT = O("--absolute", dest="absolute", action="store_true", default=False,
                 help="AMOUNT is the new size, not the increase")
STATIC_OPT = O("-s", "--static", dest="static", action="store_true", default=False,
               help="Only static information from the configuration (no node queries)")
ALL_INFO_OPT = O("--all", dest="show_all", action="store_true", default=False,
                 help="Show all instances")
SHOWCMD_OPT = O("--show-cmd", dest="show_command", action="store_true", default=False,
                help="Print only the command to reach the console")
NEW_NAME_ARGS: list[cli.Arg] = [cli.ArgUnknown(min=1, max=1, name="INSTANCE"),
                                cli.ArgUnknown(min=1, max=1, name="NEW_NAME")]
ONE_INSTANCE: list[cli.Arg] = [cli.ArgUnknown(min=1, max=1, name="INSTANCE")]
MANY_INSTANCES: list[cli.Arg] = [cli.ArgUnknown(min=0, name="INSTANCE")]
LIST_OPTS = [cli.NOHDR_OPT, cli.SEP_OPT, cli.FIELDS_OPT, cli.UNITS_OPT, cli.FILTER_OPT,
             cli.VERBOSE_OPT]
SELECT_OPTS = [ALL_OPT, NODE_SEL_OPT, PRIMARY_SEL_OPT, TAGS_SEL_OPT, FORCE_MULTI_OPT,
               cli.SUBMIT_OPT]


# --- verbs --------------------------------------------------------------------------

def _image_osparams(opts: Any) -> dict[str, Any] | None:
    """``-O`` parameters with ``--os-image`` and ``--os-image-checksum`` (doc/images.md)."""
    params = parse_kv(opts.osparams) if opts.osparams else None
    for key, value in (("os-image", getattr(opts, "os_image", None)),
                       ("os-image-checksum", getattr(opts, "os_image_checksum", None))):
        if value:
            params = {**(params or {}), key: value}
    return params


def add_instance(opts: Any, args: list[str]) -> int:
    """Create an instance."""
    name = args[0]
    template = opts.disk_template
    if template is None:
        return cli.usage_error(opts.command, "The disk template (-t) is required")
    if opts.disks and opts.sd_size:
        return cli.usage_error(opts.command, "Give either --disk or -s, not both")
    disks = [_disk_spec(d) for d in parse_indexed(opts.disks, "disk")]
    if opts.sd_size:
        disks = [{"size": _size(opts.sd_size, "disk size")}]
    if template != constants.DT_DISKLESS and not disks:
        return cli.usage_error(opts.command, "No disks given (--disk or -s)")
    nics = [] if opts.no_nics else (parse_indexed(opts.nics, "NIC") or [{}])
    hv, hvparams = parse_hv(opts.hvparams)
    pnode = opts.node
    snode = None
    if pnode and ":" in pnode:
        pnode, snode = pnode.split(":", 1)
    op = wire.drop_none(wire.instance_create(
        instance_name=name, mode=constants.INSTANCE_CREATE, os_type=opts.os,
        osparams=_image_osparams(opts) or {},
        osparams_private=parse_kv(opts.osparams_private) or wire.NOT_SENT,
        osparams_secret=parse_kv(opts.osparams_secret) or None, disk_template=template, disks=disks,
        nics=nics, beparams=parse_kv(opts.beparams), hvparams=hvparams, hypervisor=hv, pnode=pnode,
        snode=snode, iallocator=opts.iallocator, start=opts.start, no_install=opts.no_install,
        wait_for_sync=wire.NOT_SENT if opts.wait_for_sync else False,
        name_check=opts.name_check, ip_check=opts.ip_check,
        conflicts_check=wire.NOT_SENT if opts.conflicts_check else False,
        tags=[t for t in (opts.tags or "").split(",") if t], file_storage_dir=opts.file_storage_dir,
        file_driver=opts.file_driver, ignore_ipolicy=opts.ignore_ipolicy or wire.NOT_SENT,
        opportunistic_locking=opts.opportunistic_locking or wire.NOT_SENT,
        instance_communication=_yes_no(opts.instance_communication) or wire.NOT_SENT))
    cli.submit_or_send(op, opts)
    return 0


def _yes_no(value: str | None) -> bool | None:
    """``yes``/``no`` of an option as a bool (None: not given)."""
    return None if value is None else value == "yes"


def _confirm(opts: Any, text: str, flag: str = "--force") -> bool:
    return cli.confirm(text, forced=getattr(opts, "force", False), flag=flag)


def remove_instance(opts: Any, args: list[str]) -> int:
    """Remove an instance (asks for confirmation without --force)."""
    name = args[0]
    if not _confirm(opts, f"This will remove the volumes of the instance {name} (including"
                          " mirrors), thus removing all the data of the instance."):
        return 1
    cli.submit_or_send(wire.drop_none(wire.instance_remove(instance_name=name,
                                                           ignore_failures=opts.ignore_failures,
                                                           shutdown_timeout=opts.shutdown_timeout)), opts)
    return 0


list_instances = cli.query_list_verb(constants.QR_INSTANCE, LIST_DEFAULT_FIELDS)
list_fields = cli.list_fields_verb(constants.QR_INSTANCE)


def _select(opts: Any, args: list[str]) -> list[str] | None:
    """Instance names for the selection modes of startup/shutdown/reboot.

    None when the operator did not confirm an operation on several instances
    (``--force-multiple`` confirms without asking).
    """
    cl = cli.get_client(opts)
    if opts.multi_all:
        if args:
            raise errors.OpPrereqError("--all takes no arguments", errors.ECODE_INVAL)
        qfilter = None
    elif opts.multi_node or opts.multi_primary:
        if not args:
            raise errors.OpPrereqError("No node names given", errors.ECODE_INVAL)
        fl: list[Any] = ["|"]
        for node in args:
            fl.append(["==", "pnode", node])
            if opts.multi_node:
                fl.append(["=[]", "snodes", node])
        qfilter = fl
    elif opts.multi_tags:
        if not args:
            raise errors.OpPrereqError("No tags given", errors.ECODE_INVAL)
        qfilter = ["|"] + [["=[]", "tags", t] for t in args]
    else:
        if not args:
            raise errors.OpPrereqError("No instance names given", errors.ECODE_INVAL)
        return list(args)
    result = cl.Query(constants.QR_INSTANCE, ["name"], qfilter)
    names = [row[0][1] for row in result["data"]]
    if len(names) > 1 and not opts.force_multiple and not _confirm(
            opts, f"The operation will affect {len(names)} instances: {', '.join(names)}.",
            flag="--force-multiple"):
        cli.to_stderr("Aborted: nothing was changed.")
        return None
    return names


def _run_many(opts: Any, ops: list[dict[str, Any]] | None) -> int:
    if ops is None:  # not confirmed
        return 1
    if not ops:
        cli.to_stderr("No instances selected")
        return 0
    if len(ops) == 1:
        cli.submit_or_send(ops[0], opts)
        return 0
    cl = cli.get_client(opts)
    data = [[cli.op_to_dict(op)] for op in ops]
    for job in data:
        cli.set_generic_opcode_opts(job, opts, command=opts.command)
    submitted = cl.SubmitManyJobs(data)
    failed = 0
    ids = []
    for (ok, value), op in zip(submitted, ops):
        if not ok:
            cli.to_stderr(f"Submitting the job for {op['instance_name']} failed: {value}")
            failed += 1
        else:
            ids.append((value, op["instance_name"]))
    if opts.submit_only:
        for job_id, _ in ids:
            cli.to_stderr(f"JobID: {job_id}")
        return 1 if failed else 0
    for job_id, name in ids:
        try:
            cli.poll_job(job_id, cl)
        except errors.GanetiError as exc:
            cli.to_stderr(f"{name}: {cli.format_job_error(exc)}")
            failed += 1
    return 1 if failed else 0


def startup(opts: Any, args: list[str]) -> int:
    """Start instances."""
    names = _select(opts, args)
    return _run_many(opts, [wire.drop_none(wire.instance_startup(
        instance_name=n, force=opts.force, no_remember=opts.no_remember,
        startup_paused=opts.startup_paused, beparams=parse_kv(opts.beparams),
        hvparams=parse_hv(opts.hvparams)[1])) for n in names]
                     if names is not None else None)


def shutdown(opts: Any, args: list[str]) -> int:
    """Stop instances."""
    names = _select(opts, args)
    return _run_many(opts, [wire.drop_none(wire.instance_shutdown(
        instance_name=n, timeout=opts.timeout, no_remember=opts.no_remember,
        force=opts.force)) for n in names]
                     if names is not None else None)


def reboot(opts: Any, args: list[str]) -> int:
    """Reboot instances."""
    names = _select(opts, args)
    return _run_many(opts, [wire.drop_none(wire.instance_reboot(
        instance_name=n, reboot_type=opts.reboot_type, shutdown_timeout=opts.shutdown_timeout)) for n in names]
                     if names is not None else None)


def failover(opts: Any, args: list[str]) -> int:
    """Fail an instance over to another node."""
    if not _confirm(opts, f"Failover will happen to image {args[0]}. This requires a shutdown"
                          " of the instance. Continue?"):
        return 1
    cli.submit_or_send(wire.drop_none(wire.instance_failover(
        instance_name=args[0], target_node=opts.target_node, iallocator=opts.iallocator,
        ignore_consistency=opts.ignore_consistency, shutdown_timeout=opts.shutdown_timeout,
        ignore_ipolicy=opts.ignore_ipolicy or wire.NOT_SENT)), opts)
    return 0


def replace_disks(opts: Any, args: list[str]) -> int:
    """Replace the volumes of a drbd instance's disks (one mode of -p/-s/-n/-I/-a)."""
    chosen = [m for m, on in ((constants.REPLACE_DISK_PRI, opts.on_primary),
                              (constants.REPLACE_DISK_SEC, opts.on_secondary),
                              (constants.REPLACE_DISK_CHG, bool(opts.new_secondary
                                                                or opts.iallocator)),
                              (constants.REPLACE_DISK_AUTO, opts.auto)) if on]
    if len(chosen) != 1:
        return cli.usage_error(opts.command, "Give exactly one of -p, -s, -n NODE, -I NAME"
                                             " and -a")
    if opts.new_secondary and opts.iallocator:
        return cli.usage_error(opts.command, "Give either -n NODE or -I NAME, not both")
    disks: list[int] = []
    if opts.disks:
        try:
            disks = [int(i) for i in opts.disks.split(",") if i.strip()]
        except ValueError:
            return cli.usage_error(opts.command, f"Invalid --disks {opts.disks!r}: expected"
                                                 " disk indices like 0,2")
        if chosen[0] in (constants.REPLACE_DISK_CHG, constants.REPLACE_DISK_AUTO):
            return cli.usage_error(opts.command, "--disks goes with -p or -s only (a new"
                                                 " secondary takes every disk)")
    cli.submit_or_send(wire.drop_none(wire.instance_replace_disks(
        instance_name=args[0], mode=chosen[0], disks=disks or wire.NOT_SENT,
        remote_node=opts.new_secondary, iallocator=opts.iallocator,
        early_release=opts.early_release or wire.NOT_SENT,
        ignore_ipolicy=opts.ignore_ipolicy or wire.NOT_SENT)), opts)
    return 0


def migrate(opts: Any, args: list[str]) -> int:
    """Migrate an instance (live unless --non-live)."""
    mode = opts.migration_mode or (None if opts.live else constants.HT_MIGRATION_NONLIVE)
    cli.submit_or_send(wire.drop_none(wire.instance_migrate(
        instance_name=args[0], mode=mode, target_node=opts.target_node, iallocator=opts.iallocator,
        cleanup=opts.cleanup, with_disks=opts.with_disks or wire.NOT_SENT,
        allow_failover=opts.allow_failover or wire.NOT_SENT,
        ignore_ipolicy=opts.ignore_ipolicy or wire.NOT_SENT)), opts)
    return 0


def move(opts: Any, args: list[str]) -> int:
    """Move an instance by copying its disks."""
    if not opts.target_node:
        return cli.usage_error(opts.command, "The target node (-n) is required")
    cli.submit_or_send(wire.drop_none(wire.instance_move(
        instance_name=args[0], target_node=opts.target_node, shutdown_timeout=opts.shutdown_timeout,
        ignore_ipolicy=opts.ignore_ipolicy or wire.NOT_SENT)), opts)
    return 0


def rename(opts: Any, args: list[str]) -> int:
    """Rename an instance."""
    result = cli.submit_or_send(wire.drop_none(wire.instance_rename(
        instance_name=args[0], new_name=args[1], name_check=opts.name_check, ip_check=opts.ip_check)), opts)
    if result:
        cli.to_stdout(f"Instance '{args[0]}' renamed to '{result}'")
    return 0


def modify(opts: Any, args: list[str]) -> int:
    """Change parameters, NICs and disks of an instance."""
    if opts.no_hotplug and (opts.hotplug or opts.hotplug_if_possible):
        return cli.usage_error(opts.command, "--no-hotplug contradicts --hotplug")
    _, hvparams = parse_hv(opts.hvparams)
    op = wire.drop_none(wire.instance_set_params(
        instance_name=args[0], beparams=parse_kv(opts.beparams), hvparams=hvparams,
        osparams=parse_kv(opts.osparams) if opts.osparams else None,
        osparams_private=parse_kv(opts.osparams_private) if opts.osparams_private else None,
        os_name=opts.os, offline=True if opts.offline else (False if opts.online else None),
        disks=parse_mods(opts.disks, "disk"), nics=parse_mods(opts.nics, "NIC"),
        ignore_ipolicy=opts.ignore_ipolicy or wire.NOT_SENT,
        runtime_mem=_size(opts.runtime_mem, "runtime memory")
        if opts.runtime_mem is not None else None,
        force=True if opts.force else wire.NOT_SENT,
        hotplug=True if opts.hotplug else wire.NOT_SENT,
        hotplug_if_possible=True if opts.hotplug_if_possible else wire.NOT_SENT,
        disk_template=opts.disk_template, remote_node=opts.node,
        iallocator=opts.iallocator or wire.NOT_SENT, pnode=opts.new_primary,
        conflicts_check=wire.NOT_SENT if opts.conflicts_check else False,
        wait_for_sync=wire.NOT_SENT if opts.wait_for_sync else False,
        instance_communication=_yes_no(opts.instance_communication)))
    result = cli.submit_or_send(op, opts)
    if result:
        cli.to_stdout(f"Modified instance {args[0]}")
        for param, value in result:
            cli.to_stdout(f" - {param} -> {value}")
    return 0


def reinstall(opts: Any, args: list[str]) -> int:
    """Reinstall the OS of a stopped instance."""
    if not _confirm(opts, f"This will reinstall the instance {args[0]} and remove all"
                          " data. Continue?"):
        return 1
    cli.submit_or_send(wire.drop_none(wire.instance_reinstall(
        instance_name=args[0], os_type=opts.os,
        osparams=_image_osparams(opts),
        osparams_private=parse_kv(opts.osparams_private) if opts.osparams_private else None,
        osparams_secret=parse_kv(opts.osparams_secret) if opts.osparams_secret else None)), opts)
    return 0


def grow_disk(opts: Any, args: list[str]) -> int:
    """Grow a disk: INSTANCE DISK AMOUNT."""
    try:
        disk = int(args[1])
    except ValueError:
        return cli.usage_error(opts.command, f"Invalid disk index {args[1]!r}")
    cli.submit_or_send(wire.drop_none(wire.instance_grow_disk(
        instance_name=args[0], disk=disk, amount=_size(args[2], "amount"), absolute=opts.absolute)), opts)
    return 0


def recreate_disks(opts: Any, args: list[str]) -> int:
    """Recreate the missing volumes of a stopped instance's disks."""
    disks: list[Any] = []
    for text in opts.recreate_disks or []:
        idx_text, _, rest = text.partition(":")
        try:
            idx = int(idx_text)
        except ValueError:
            return cli.usage_error(opts.command, f"Invalid disk index {idx_text!r}")
        # as Ganeti: N[:size=..,spindles=..,mode=..] changes the recreated disk
        disks.append([idx, _disk_spec(parse_kv(rest, "disk"))] if rest else idx)
    nodes = [n for n in (opts.node or "").replace(":", ",").split(",") if n]
    cli.submit_or_send(wire.instance_recreate_disks(
        instance_name=args[0], disks=disks, nodes=nodes,
        iallocator=opts.iallocator or wire.NOT_SENT), opts)
    return 0


def activate_disks(opts: Any, args: list[str]) -> int:
    """Assemble the disks of an instance and print where they are."""
    result = cli.submit_or_send(wire.instance_activate_disks(
        instance_name=args[0], wait_for_sync=True if opts.wait_for_sync else wire.NOT_SENT,
        ignore_size=True if opts.ignore_size else wire.NOT_SENT), opts)
    for node, iv_name, path in result or []:
        cli.to_stdout(f"{node}:{iv_name}:{path}")
    return 0


def deactivate_disks(opts: Any, args: list[str]) -> int:
    """Shut down the disks of an instance."""
    cli.submit_or_send(wire.drop_none(wire.instance_deactivate_disks(
        instance_name=args[0], force=opts.force)), opts)
    return 0


def console(opts: Any, args: list[str]) -> int:
    """Attach to the console of a running instance, or print how to reach it.

    A console reached by a command (kind ``ssh``, e.g. kvm's serial console
    through socat) runs here on the instance's primary node and over the
    cluster's SSH on a remote terminal elsewhere (:mod:`ganeti.client.console`);
    ``--show-cmd`` prints the command (elsewhere: the ``ssh`` command line).
    """
    result = cli.submit_opcode_and_wait(wire.instance_console(instance_name=args[0]), opts)
    if not isinstance(result, dict):
        cli.to_stdout(str(result))
        return 0
    if result.get("command") and result.get("kind") == "ssh":
        from ganeti.client import console as console_mod
        return console_mod.run_console(args[0], result, show_command=opts.show_command,
                                       out=cli.to_stdout, err=cli.to_stderr)
    command = result.get("command")
    if opts.show_command and command:
        cli.to_stdout(" ".join(command) if isinstance(command, list) else str(command))
        return 0
    cli.to_stdout(result.get("message") or f"Console of {args[0]}: {result}")
    return 0


def show_info(opts: Any, args: list[str]) -> int:
    """Show static and runtime information of instances (YAML, doc/commands.md)."""
    if not args and not opts.show_all:
        return cli.usage_error(opts.command, "Give instance names or --all")
    result = cli.submit_opcode_and_wait(wire.drop_none(wire.instance_query_data(
        instances=list(args), static=opts.static)), opts)
    from ganeti.cli import info
    from ganeti.client.instance_info import format_instance_info
    info.print_info([format_instance_info(result[name], static=opts.static)
                     for name in sorted(result)])
    return 0


def _tag_rows() -> dict[str, cli.Command]:
    from ganeti.client import tags_common
    return {"add-tags": tags_common.add_tags(constants.TAG_INSTANCE),
            "list-tags": tags_common.list_tags(constants.TAG_INSTANCE),
            "remove-tags": tags_common.remove_tags(constants.TAG_INSTANCE)}


ADD_OPTS = [TEMPLATE_OPT, DISK_OPT, SIZE_OPT, NET_OPT, NO_NICS_OPT, BE_OPT, HV_OPT, OS_OPT,
            OSP_OPT, OSP_PRIVATE_OPT, OSP_SECRET_OPT, OS_IMAGE_OPT, OS_IMAGE_CHECKSUM_OPT,
            PNODE_OPT, relocation.IALLOCATOR_OPT,
            NOSTART_OPT, NOINSTALL_OPT, NO_WAIT_SYNC_OPT,
            NONAMECHECK_OPT, NOIPCHECK_OPT, NOCONFLICTS_OPT, TAGS_OPT, FSDIR_OPT, FDRIVER_OPT,
            IGNORE_IPOLICY_OPT, OPPORTUNISTIC_OPT, COMMUNICATION_OPT, cli.SUBMIT_OPT]

commands: dict[str, cli.Command] = {
    "add": (add_instance, ONE_INSTANCE, ADD_OPTS, "-t TEMPLATE [options] INSTANCE",
            "Create an instance"),
    "remove": (remove_instance, ONE_INSTANCE, [cli.FORCE_OPT, IGNORE_FAIL_OPT,
                                               SHUTDOWN_TIMEOUT_OPT, cli.SUBMIT_OPT],
               "[-f] INSTANCE", "Remove an instance"),
    "list": (list_instances, MANY_INSTANCES, LIST_OPTS, "[options] [INSTANCE...]",
             "List instances"),
    "list-fields": (list_fields, [cli.ArgUnknown(name="FIELD")], [cli.NOHDR_OPT, cli.SEP_OPT],
                    "[FIELD...]", "List the fields available for the list command"),
    "info": (show_info, MANY_INSTANCES, [STATIC_OPT, ALL_INFO_OPT], "[-s] INSTANCE...",
             "Show information on instances"),
    "startup": (startup, MANY_INSTANCES, SELECT_OPTS + [cli.FORCE_OPT, NOREMEMBER_OPT,
                                                        PAUSED_OPT, BE_OPT, HV_OPT],
                "[options] INSTANCE...", "Start instances"),
    "shutdown": (shutdown, MANY_INSTANCES, SELECT_OPTS + [STOP_TIMEOUT_OPT, NOREMEMBER_OPT,
                                                          cli.FORCE_OPT],
                 "[options] INSTANCE...", "Stop instances"),
    "reboot": (reboot, MANY_INSTANCES, SELECT_OPTS + [REBOOT_TYPE_OPT, SHUTDOWN_TIMEOUT_OPT,
                                                      cli.FORCE_OPT],
               "[--type soft|hard|full] INSTANCE...", "Reboot instances"),
    "failover": (failover, ONE_INSTANCE, [cli.FORCE_OPT, TARGET_OPT, relocation.IALLOCATOR_OPT,
                                          IGNORE_CONSIST_OPT, SHUTDOWN_TIMEOUT_OPT,
                                          IGNORE_IPOLICY_OPT, cli.SUBMIT_OPT],
                 "[-f] [-n NODE | -I NAME] INSTANCE", "Fail an instance over to another node"),
    "replace-disks": (replace_disks, ONE_INSTANCE, [
        REPLACE_PRI_OPT, REPLACE_SEC_OPT, NEW_SECONDARY_OPT, relocation.IALLOCATOR_OPT,
        REPLACE_AUTO_OPT, REPLACE_DISKS_OPT, relocation.EARLY_RELEASE_OPT, IGNORE_IPOLICY_OPT,
        cli.SUBMIT_OPT],
        "{-p | -s | -n NODE | -I NAME | -a} [--disks N,N] [--early-release] INSTANCE",
        "Replace the volumes under a drbd instance's disks"),
    "migrate": (migrate, ONE_INSTANCE, [cli.FORCE_OPT, NONLIVE_OPT, MIGRATION_MODE_OPT,
                                        CLEANUP_OPT, TARGET_OPT, relocation.IALLOCATOR_OPT,
                                        relocation.WITH_DISKS_OPT, IGNORE_IPOLICY_OPT,
                                        ALLOW_FAILOVER_OPT, cli.SUBMIT_OPT],
                "[--non-live] [--cleanup] [--with-disks] [--allow-failover] [-n NODE | -I NAME]"
                " INSTANCE",
                "Migrate an instance (--with-disks: also its local disks)"),
    "move": (move, ONE_INSTANCE, [cli.FORCE_OPT, TARGET_OPT, SHUTDOWN_TIMEOUT_OPT,
                                  IGNORE_IPOLICY_OPT, cli.SUBMIT_OPT],
             "-n NODE INSTANCE", "Move an instance by copying its disks"),
    "rename": (rename, NEW_NAME_ARGS, [*RENAME_CHECK_OPTS, cli.SUBMIT_OPT],
               "INSTANCE NEW_NAME", "Rename an instance"),
    "modify": (modify, ONE_INSTANCE, [BE_OPT, HV_OPT, OSP_OPT, OSP_PRIVATE_OPT, OS_OPT,
                                      DISK_OPT, NET_OPT,
                                      OFFLINE_OPT, ONLINE_OPT, IGNORE_IPOLICY_OPT,
                                      RUNTIME_MEM_OPT, HOTPLUG_OPT, HOTPLUG_IF_POSSIBLE_OPT,
                                      NOHOTPLUG_OPT, CONVERT_TEMPLATE_OPT,
                                      CONVERT_SNODE_OPT, relocation.IALLOCATOR_OPT,
                                      NO_WAIT_SYNC_OPT, NOCONFLICTS_OPT, NEW_PRIMARY_OPT,
                                      COMMUNICATION_OPT,
                                      cli.FORCE_OPT, cli.SUBMIT_OPT],
               "[options] INSTANCE", "Change instance parameters, disks and NICs"),
    "reinstall": (reinstall, ONE_INSTANCE, [cli.FORCE_OPT, OS_OPT, OSP_OPT, OSP_PRIVATE_OPT,
                                            OSP_SECRET_OPT, OS_IMAGE_OPT,
                                            OS_IMAGE_CHECKSUM_OPT, cli.SUBMIT_OPT],
                  "[-f] [-o OS] INSTANCE", "Reinstall the OS of an instance"),
    "grow-disk": (grow_disk, [cli.ArgUnknown(min=3, max=3, name="INSTANCE DISK AMOUNT")],
                  [ABSOLUTE_OPT, cli.SUBMIT_OPT], "[--absolute] INSTANCE DISK AMOUNT",
                  "Grow a disk of an instance"),
    "recreate-disks": (recreate_disks, ONE_INSTANCE, [RECREATE_DISK_OPT, PNODE_OPT,
                                                      relocation.IALLOCATOR_OPT,
                                                      cli.SUBMIT_OPT],
                       "[--disk N]... [-n NODE | -I NAME] INSTANCE",
                       "Recreate the missing disk volumes of a stopped instance"),
    "activate-disks": (activate_disks, ONE_INSTANCE,
                       [WAIT_SYNC_OPT, IGNORE_SIZE_OPT, cli.SUBMIT_OPT],
                       "[--wait-for-sync] [--ignore-size] INSTANCE",
                       "Activate the disks of an instance"),
    "deactivate-disks": (deactivate_disks, ONE_INSTANCE, [cli.FORCE_OPT, cli.SUBMIT_OPT],
                         "[-f] INSTANCE", "Deactivate the disks of an instance"),
    "console": (console, ONE_INSTANCE, [SHOWCMD_OPT], "[--show-cmd] INSTANCE",
                "Show how to reach the console of an instance"),
    **_tag_rows(),
}
commands.update(relocation.INSTANCE_ROWS)

aliases = {"start": "startup", "stop": "shutdown", "show": "info"}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gnt-instance``."""
    return cli.generic_main(commands, argv, prog="gnt-instance", aliases=aliases)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
