"""Burnin's command line: upstream's option names and defaults (doc/burnin.md).

:func:`parse_args` turns ``argv`` into a checked :class:`BurninOptions`;
wrong combinations (``--nodes`` with ``--iallocator``, a disk size list
longer than the growth list, an unknown reboot type, ...) raise
:class:`errors.OpPrereqError` with upstream's wording, which
:func:`ganeti.tools.burnin.main` prints before exiting with 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors
from ganeti.utils import units

__all__ = ["BurninOptions", "parse_args", "build_parser", "STEP_SWITCHES",
           "SUPPORTED_TEMPLATES", "REBOOT_ORDER", "USAGE"]

USAGE = "burnin -o OS_NAME [options...] instance_name ..."

#: The templates burnin knows how to drive (upstream's list).
SUPPORTED_TEMPLATES = (constants.DT_DISKLESS, constants.DT_DRBD8, constants.DT_EXT,
                       constants.DT_FILE, constants.DT_PLAIN, constants.DT_RBD,
                       constants.DT_SHARED_FILE, constants.DT_GLUSTER)

#: Reboot types in the order burnin runs them when ``--reboot-types`` is not given.
REBOOT_ORDER = (constants.REBOOT_SOFT, constants.REBOOT_HARD, constants.REBOOT_FULL)

#: ``--no-<switch>`` -> (attribute, help): every step can be turned off.
STEP_SWITCHES: dict[str, tuple[str, str]] = {
    "replace1": ("do_replace1", "Skip disk replacement with the same secondary"),
    "replace2": ("do_replace2", "Skip disk replacement with a different secondary"),
    "failover": ("do_failover", "Skip instance failovers"),
    "migrate": ("do_migrate", "Skip instance live migration"),
    "move": ("do_move", "Skip instance moves"),
    "importexport": ("do_importexport", "Skip instance export/import"),
    "startstop": ("do_startstop", "Skip instance stop/start"),
    "reinstall": ("do_reinstall", "Skip instance reinstall"),
    "reboot": ("do_reboot", "Skip instance reboot"),
    "renamesame": ("do_renamesame", "Skip instance rename to same name"),
    "activate-disks": ("do_activate_disks", "Skip disk activation/deactivation"),
    "add-disks": ("do_addremove_disks", "Skip disk addition/removal"),
    "add-nics": ("do_addremove_nics", "Skip NIC addition/removal"),
    "confd": ("do_confd_tests", "Skip confd queries"),
}


@dataclass
class BurninOptions:
    """The checked options of one burnin run (sizes in MiB)."""

    os: str
    instances: list[str]
    disk_template: str = constants.DT_DRBD8
    disk_size: list[int] = field(default_factory=lambda: [1024])
    disk_growth: list[int] = field(default_factory=lambda: [128])
    minmem_size: int = 128
    maxmem_size: int = 256
    vcpu_count: int = 3
    nodes: list[str] = field(default_factory=list)
    iallocator: str | None = None
    hypervisor: str | None = None
    hvparams: dict[str, Any] = field(default_factory=dict)
    osparams: dict[str, Any] = field(default_factory=dict)
    parallel: bool = False
    net_timeout: int = 15
    http_check: bool = False
    keep_instances: bool = False
    early_release: bool = False
    name_check: bool = True
    ip_check: bool = True
    rename: str | None = None
    reboot_types: list[str] = field(default_factory=lambda: list(REBOOT_ORDER))
    reason: str | None = None
    verbose: int = 0
    debug: int = 0
    nics: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    do_replace1: bool = True
    do_replace2: bool = True
    do_failover: bool = True
    do_migrate: bool = True
    do_move: bool = True
    do_importexport: bool = True
    do_startstop: bool = True
    do_reinstall: bool = True
    do_reboot: bool = True
    do_renamesame: bool = True
    do_activate_disks: bool = True
    do_addremove_disks: bool = True
    do_addremove_nics: bool = True
    do_confd_tests: bool = True

    @property
    def beparams(self) -> dict[str, int]:
        """The backend parameters every instance is created with."""
        return {"minmem": self.minmem_size, "maxmem": self.maxmem_size,
                "vcpus": self.vcpu_count}


def _unit(text: str) -> int:
    try:
        return units.parse_unit(text)
    except errors.UnitParseError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _kv(text: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if sep:
            result[key.strip()] = value
        elif key.startswith("no_"):
            result[key[3:]] = False
        else:
            result[key] = True
    return result


def _hypervisor(text: str) -> tuple[str, dict[str, Any]]:
    """``-H fake`` or ``-H kvm:kernel_path=,acpi=true``."""
    name, _, rest = text.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"Invalid hypervisor specification {text!r}")
    return name, _kv(rest)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser (upstream's option names, defaults and help texts)."""
    p = argparse.ArgumentParser(prog="burnin", usage=USAGE,
                                description="Exercise every instance operation on a cluster.")
    p.add_argument("instances", nargs="*", metavar="instance_name")
    p.add_argument("-o", "--os", dest="os", default=None, metavar="<OS>",
                   help="OS to use during burnin")
    p.add_argument("-H", "--hypervisor", dest="hypervisor", type=_hypervisor, default=None,
                   metavar="HYPERVISOR[:k=v,...]", help="Hypervisor and its parameters")
    p.add_argument("-O", "--os-parameters", dest="osparams", type=_kv, default={},
                   metavar="k=v,...", help="OS parameters")
    p.add_argument("--disk-size", dest="disk_size", default="1G", metavar="<size,size,...>",
                   help="Disk size (determines disk count)")
    p.add_argument("--disk-growth", dest="disk_growth", default="128m",
                   metavar="<size,size,...>", help="Disk growth")
    p.add_argument("--mem-size", dest="mem_size", type=_unit, default=None, metavar="<size>",
                   help="Memory size (sets both --minmem-size and --maxmem-size)")
    p.add_argument("--maxmem-size", dest="maxmem_size", type=_unit, default=256,
                   metavar="<size>", help="Max Memory size")
    p.add_argument("--minmem-size", dest="minmem_size", type=_unit, default=128,
                   metavar="<size>", help="Min Memory size")
    p.add_argument("--vcpu-count", dest="vcpu_count", type=int, default=3, metavar="<count>",
                   help="VCPU count")
    p.add_argument("-d", "--debug", dest="debug", action="count", default=0,
                   help="Increase debugging level")
    p.add_argument("-v", "--verbose", dest="verbose", action="count", default=0,
                   help="Show the job log messages of every opcode")
    p.add_argument("--no-ip-check", dest="ip_check", action="store_false", default=True,
                   help="Don't check that the instance's IP is alive")
    p.add_argument("--no-name-check", dest="name_check", action="store_false", default=True,
                   help="Don't check that the instance's name is resolvable")
    p.add_argument("--early-release", dest="early_release", action="store_true",
                   default=False, help="Release the locks on the secondary node(s) early")
    for switch, (dest, text) in STEP_SWITCHES.items():
        p.add_argument(f"--no-{switch}", dest=dest, action="store_false", default=True,
                       help=text)
    p.add_argument("--no-nics", dest="nics", action="store_const", const=[], default=[{}],
                   help="No network interfaces")
    p.add_argument("--reboot-types", dest="reboot_types", default=None,
                   help="Specify the reboot types (comma-separated; default soft,hard,full)")
    p.add_argument("--rename", dest="rename", default=None, metavar="<instance_name>",
                   help="Give one unused instance name which is taken to start the"
                        " renaming sequence")
    p.add_argument("-t", "--disk-template", dest="disk_template",
                   choices=list(SUPPORTED_TEMPLATES), default=constants.DT_DRBD8,
                   help=f"Disk template (default {constants.DT_DRBD8}, otherwise one of"
                        f" {', '.join(SUPPORTED_TEMPLATES)})")
    p.add_argument("-n", "--nodes", dest="nodes", default="",
                   help="Comma separated list of nodes to perform the burnin on"
                        " (defaults to all nodes)")
    p.add_argument("-I", "--iallocator", dest="iallocator", default=None,
                   help="Perform the allocation using an iallocator instead of fixed node"
                        " spread (node restrictions no longer apply, therefore -n/--nodes"
                        " must not be used")
    p.add_argument("-p", "--parallel", dest="parallel", action="store_true", default=False,
                   help="Enable parallelization of some operations in order to speed burnin"
                        " or to test granular locking")
    p.add_argument("--net-timeout", dest="net_timeout", type=int, default=15,
                   help="The instance check network timeout in seconds (defaults to 15"
                        " seconds)")
    p.add_argument("-C", "--http-check", dest="http_check", action="store_true",
                   default=False, help="Enable checking of instance status via http, looking"
                   " for /hostname.txt that should contain the name of the instance")
    p.add_argument("-K", "--keep-instances", dest="keep_instances", action="store_true",
                   default=False, help="Leave instances on the cluster after burnin, for"
                   " investigation in case of errors or simply to use them")
    p.add_argument("--reason", dest="reason", default=None, metavar="TEXT",
                   help="The reason for executing the command")
    return p


def _bad(msg: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(msg, errors.ECODE_INVAL)


def parse_args(argv: Sequence[str]) -> BurninOptions:
    """Parse and check ``argv`` (without the program name).

    argparse errors exit with 2 as usual; inconsistent combinations raise
    :class:`errors.OpPrereqError`.
    """
    ns = build_parser().parse_args(list(argv))
    if not ns.instances or ns.os is None:
        raise _bad(f"Usage: {USAGE}")
    minmem, maxmem = ns.minmem_size, ns.maxmem_size
    if ns.mem_size:
        minmem = maxmem = ns.mem_size
    elif minmem > maxmem:
        raise _bad("Maximum memory lower than minimum memory")
    add_disks = ns.do_addremove_disks
    if ns.disk_template == constants.DT_DISKLESS:
        disk_size: list[int] = []
        disk_growth: list[int] = []
        add_disks = False
    else:
        try:
            disk_size = [units.parse_unit(v) for v in ns.disk_size.split(",")]
            disk_growth = [units.parse_unit(v) for v in ns.disk_growth.split(",")]
        except errors.UnitParseError as exc:
            raise _bad(str(exc)) from None
        if len(disk_growth) != len(disk_size):
            raise _bad("Wrong disk sizes/growth combination")
    if ns.nodes and ns.iallocator:
        raise _bad("Give either the nodes option or the iallocator option, not both")
    if ns.http_check and not ns.name_check:
        raise _bad("Can't enable HTTP checks without name checks")
    if ns.reboot_types is None:
        reboot_types = list(REBOOT_ORDER)
    else:
        reboot_types = [t for t in ns.reboot_types.split(",") if t]
        wrong = sorted(set(reboot_types) - constants.REBOOT_TYPES)
        if wrong:
            raise _bad(f"Invalid reboot types specified: {', '.join(wrong)}")
    if len(set(ns.instances)) != len(ns.instances):
        raise _bad("Instance names must be unique")
    if ns.rename is not None and ns.rename in ns.instances:
        raise _bad(f"The --rename name {ns.rename} is one of the instances")
    hypervisor, hvparams = ns.hypervisor if ns.hypervisor else (None, {})
    return BurninOptions(
        os=ns.os, instances=list(ns.instances), disk_template=ns.disk_template,
        disk_size=disk_size, disk_growth=disk_growth, minmem_size=minmem,
        maxmem_size=maxmem, vcpu_count=ns.vcpu_count,
        nodes=[n for n in ns.nodes.split(",") if n], iallocator=ns.iallocator,
        hypervisor=hypervisor, hvparams=hvparams, osparams=ns.osparams,
        parallel=ns.parallel, net_timeout=ns.net_timeout, http_check=ns.http_check,
        keep_instances=ns.keep_instances, early_release=ns.early_release,
        name_check=ns.name_check, ip_check=ns.ip_check, rename=ns.rename,
        reboot_types=reboot_types, reason=ns.reason, verbose=ns.verbose, debug=ns.debug,
        nics=ns.nics, do_replace1=ns.do_replace1, do_replace2=ns.do_replace2,
        do_failover=ns.do_failover, do_migrate=ns.do_migrate, do_move=ns.do_move,
        do_importexport=ns.do_importexport, do_startstop=ns.do_startstop,
        do_reinstall=ns.do_reinstall, do_reboot=ns.do_reboot,
        do_renamesame=ns.do_renamesame, do_activate_disks=ns.do_activate_disks,
        do_addremove_disks=add_disks, do_addremove_nics=ns.do_addremove_nics,
        do_confd_tests=ns.do_confd_tests)
