"""Instance opcodes (doc/protocols/opcodes.md, "Instance opcodes"): lifecycle, migration, disks, queries.

Parameter names are Ganeti's.  Disks are ``[{"size": MiB, "mode": "rw",
"name": ...}]``, NICs ``[{"mac", "ip", "mode", "link", "name",
"network"}]``; modifications (:class:`OpInstanceSetParams`) take
``[[op, index, params], ...]`` with ``op`` ``add``/``modify``/``remove``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors, parameters
from ganeti.impexp import imagestore
from ganeti.opcodes.base import OpCode, param
from ganeti.opcodes.node import APPLY_DOC, PLAN_DOC
from ganeti.private import Private
from ganeti.utils import units

__all__ = [
    "OpInstanceBase",
    "OpInstanceCreate", "OpInstanceRemove", "OpInstanceStartup", "OpInstanceShutdown",
    "OpInstanceReboot", "OpInstanceReinstall", "OpInstanceRename", "OpInstanceSetParams",
    "OpInstanceMigrate", "OpInstanceFailover", "OpInstanceMove", "OpInstanceGrowDisk",
    "OpInstanceReplaceDisks",
    "OpInstanceActivateDisks", "OpInstanceDeactivateDisks", "OpInstanceConsole",
    "OpInstanceQueryData", "OpInstanceChangeGroup", "OpInstanceMultiAlloc", "OpInstanceRecreateDisks", "ALL_OPCODES", "DDM_ADD", "DDM_MODIFY", "DDM_REMOVE", "DDMS",
    "MAX_DISK_SIZE", "check_disk_size",
]

DDM_ADD = "add"
DDM_MODIFY = "modify"
DDM_REMOVE = "remove"
DDMS = frozenset([DDM_ADD, DDM_MODIFY, DDM_REMOVE])

_CREATE_MODES = [constants.INSTANCE_CREATE, constants.INSTANCE_IMPORT,
                 constants.INSTANCE_REMOTE_IMPORT]
_SHUTDOWN_TIMEOUT = 120

#: Largest disk, MiB: 1 EiB, so that its size in bytes fits a signed 64-bit word.
MAX_DISK_SIZE = 2 ** 40
#: Most entries of a NIC or disk modification list (each index removed, then added).
_MAX_NIC_MODS = 2 * constants.MAX_NICS
_MAX_DISK_MODS = 2 * constants.MAX_DISKS


def check_disk_size(value: Any, where: str) -> int:
    """A disk size in MiB (a number or ``"10G"``) checked to be 1..:data:`MAX_DISK_SIZE`.

    Raises :class:`errors.ParameterError` naming ``where``.
    """
    try:
        size = units.parse_unit(value)
    except errors.UnitParseError:
        raise errors.ParameterError(f"Parameter '{where}': invalid size {value!r}"
                                    " (a number of MiB, or with a unit: 10G)",
                                    errors.ECODE_INVAL) from None
    if not 1 <= size <= MAX_DISK_SIZE:
        raise errors.ParameterError(f"Parameter '{where}': size {value!r} is out of range"
                                    f" (1..{MAX_DISK_SIZE} MiB)", errors.ECODE_INVAL)
    return size


def _check_disks(value: list[Any], where: str) -> None:
    """Disk dicts: ``size`` (and ``spindles``) in range; the rest is checked by the LU."""
    for idx, spec in enumerate(value):
        if not isinstance(spec, dict):
            continue
        if spec.get("size") is not None:
            check_disk_size(spec["size"], f"{where}[{idx}].size")
        spindles = spec.get("spindles")
        if spindles is not None and (not isinstance(spindles, int) or isinstance(spindles, bool)
                                     or not 0 <= spindles <= constants.MAX_TAGS_PER_OBJ):
            raise errors.ParameterError(f"Parameter '{where}[{idx}].spindles': invalid value"
                                        f" {spindles!r}", errors.ECODE_INVAL)


def _check_disk_mods(value: list[Any], where: str) -> None:
    """Disk modifications ``[[op, index, params], ...]``: the sizes being added in range."""
    for idx, mod in enumerate(value):
        if isinstance(mod, (list, tuple)) and len(mod) == 3 and isinstance(mod[2], dict):
            _check_disks([mod[2]], f"{where}[{idx}]")


def _check_beparams(value: dict[str, Any], where: str) -> None:
    """Backend parameters: types and ranges of the ``be`` table (values stay as given)."""
    parameters.check_params("be", value)


def _check_beparams_change(value: dict[str, Any], where: str) -> None:
    """Backend parameter changes: as :func:`_check_beparams`, ``"default"`` allowed."""
    parameters.check_params("be", value, allow_default=True)


#: URL schemes an OS image may be fetched with (Ganeti's: http, https, ftp, ftps)
_IMAGE_URL_RE = re.compile(r"^(https?|ftps?)://")


def _check_os_image(value: dict[str, Any], where: str, *, allow_default: bool = False,
                    allow_store: bool = True) -> None:
    """The OS parameter ``os-image``, when given: an absolute path or a URL
    (http, https, ftp, ftps), as Ganeti checks it, or (``allow_store``: ours,
    doc/images.md) the name of an image of the store; ``"default"`` too in a change."""
    image = value.get("os-image")
    if image is None or (allow_default and image == "default"):
        return
    if isinstance(image, str) and allow_store and image != "default" \
            and imagestore.NAME_RE.match(image):
        return
    if not isinstance(image, str) or not (_IMAGE_URL_RE.match(image) or
                                          (image.startswith("/") and "\0" not in image)):
        store = " (or the name of an image store image)" if allow_store else ""
        raise errors.ParameterError(f"Parameter '{where}': OS image must be an absolute path"
                                    f" or a URL{store}, got {image!r}", errors.ECODE_INVAL)


def _check_os_image_change(value: dict[str, Any], where: str) -> None:
    # a change takes no store name: it would be checked at the next reinstall only
    _check_os_image(value, where, allow_default=True, allow_store=False)


_EXPECTED_DOC = ("refuse (wrong_state) unless the instance's admin state (and its source)"
                 " is still this when the job holds the instance's lock; for a client"
                 " that decided earlier, such as the watcher")


@dataclass(kw_only=True)
class OpInstanceBase(OpCode):
    """Common base: an operation on one instance, named by ``instance_name``."""

    OP_DSC_FIELD = "instance_name"

    instance_name: str


@dataclass(kw_only=True)
class OpInstanceCreate(OpInstanceBase):
    """Create an instance: allocate disks, install the OS, start it."""

    mode: str = param(constants.INSTANCE_CREATE, choices=_CREATE_MODES)
    os_type: str | None = None
    osparams: dict[str, Any] = param({}, check=_check_os_image)
    osparams_private: dict[str, Private] = param({})
    #: given to the OS scripts of this operation only, never stored
    #: (doc/protocols/opcodes.md, "Private parameters")
    osparams_secret: dict[str, Private] | None = None
    force_variant: bool = False
    disk_template: str | None = param(None, choices=sorted(constants.DISK_TEMPLATES))
    disks: list[dict[str, Any]] = param([], max_len=constants.MAX_DISKS, check=_check_disks)
    nics: list[dict[str, Any]] = param([], max_len=constants.MAX_NICS)
    beparams: dict[str, Any] = param({}, check=_check_beparams)
    hvparams: dict[str, Any] = param({})
    hypervisor: str | None = None
    pnode: str | None = None
    snode: str | None = None
    iallocator: str | None = None
    group_name: str | None = None
    start: bool = True
    no_install: bool = False
    wait_for_sync: bool = True
    name_check: bool = True
    ip_check: bool = True
    conflicts_check: bool = True
    tags: list[str] = param([], max_len=constants.MAX_TAGS_PER_OBJ)
    file_storage_dir: str | None = None
    file_driver: str | None = None
    ignore_ipolicy: bool = False
    opportunistic_locking: bool = False
    #: import mode: the node holding the export and its directory (a name
    #: below the export directory, or a path; default: the instance name)
    src_node: str | None = None
    src_node_uuid: str | None = None
    src_path: str | None = None
    identify_defaults: bool = False
    #: remote-import mode (a move from another cluster sharing the domain secret,
    #: doc/exports.md): what the source's prepared export handed out
    source_handshake: list[Any] | None = None
    source_x509_ca: str | None = None
    source_instance_name: str | None = None
    #: seconds the source is given to stop its instance: added to the wait for the
    #: first disk's sender
    source_shutdown_timeout: int = param(120, min=0)
    compress: str = "none"
    instance_communication: bool = param(
        False, doc="add the instance communication NIC (doc/networks.md)")


@dataclass(kw_only=True)
class OpInstanceRemove(OpInstanceBase):
    """Remove an instance: stop it, remove its disks and its config entry."""

    shutdown_timeout: int = param(_SHUTDOWN_TIMEOUT, min=0)
    ignore_failures: bool = False


@dataclass(kw_only=True)
class OpInstanceStartup(OpInstanceBase):
    """Start an instance (and remember it should run, unless no_remember)."""

    force: bool = False
    ignore_offline_nodes: bool = False
    hvparams: dict[str, Any] = param({})
    beparams: dict[str, Any] = param({}, check=_check_beparams)
    no_remember: bool = False
    startup_paused: bool = False
    expected_admin_state: str | None = param(None, choices=sorted(constants.ADMINST_ALL),
                                             doc=_EXPECTED_DOC)
    expected_admin_state_source: str | None = param(
        None, choices=[constants.ADMIN_SOURCE, constants.USER_SOURCE], doc=_EXPECTED_DOC)


@dataclass(kw_only=True)
class OpInstanceShutdown(OpInstanceBase):
    """Stop an instance (soft for ``timeout`` seconds, then hard)."""

    timeout: int = param(_SHUTDOWN_TIMEOUT, min=0)
    force: bool = False
    ignore_offline_nodes: bool = False
    no_remember: bool = False
    admin_state_source: str | None = param(None, choices=[constants.ADMIN_SOURCE,
                                                          constants.USER_SOURCE])
    expected_admin_state: str | None = param(None, choices=sorted(constants.ADMINST_ALL),
                                             doc=_EXPECTED_DOC)
    expected_admin_state_source: str | None = param(
        None, choices=[constants.ADMIN_SOURCE, constants.USER_SOURCE], doc=_EXPECTED_DOC)


@dataclass(kw_only=True)
class OpInstanceReboot(OpInstanceBase):
    """Reboot a running instance (soft, hard or full)."""

    reboot_type: str = param(constants.REBOOT_HARD, choices=sorted(constants.REBOOT_TYPES))
    ignore_secondaries: bool = False
    shutdown_timeout: int = param(_SHUTDOWN_TIMEOUT, min=0)


@dataclass(kw_only=True)
class OpInstanceReinstall(OpInstanceBase):
    """Reinstall the OS of a stopped instance (optionally a new OS)."""

    os_type: str | None = None
    force_variant: bool = False
    osparams: dict[str, Any] | None = param(None, check=_check_os_image)
    osparams_private: dict[str, Private] | None = None
    #: given to the OS scripts of this reinstall only, never stored
    osparams_secret: dict[str, Private] | None = None


@dataclass(kw_only=True)
class OpInstanceRename(OpInstanceBase):
    """Rename a stopped instance; returns the new name."""

    new_name: str
    name_check: bool = True
    ip_check: bool = True


@dataclass(kw_only=True)
class OpInstanceSetParams(OpInstanceBase):
    """Change an instance's parameters, NICs and disks; returns the changes."""

    nics: list[Any] = param([], max_len=_MAX_NIC_MODS)
    disks: list[Any] = param([], max_len=_MAX_DISK_MODS, check=_check_disk_mods)
    beparams: dict[str, Any] = param({}, check=_check_beparams_change)
    hvparams: dict[str, Any] = param({})
    osparams: dict[str, Any] | None = param(None, check=_check_os_image_change)
    osparams_private: dict[str, Private] | None = None
    os_name: str | None = None
    force_variant: bool = False
    offline: bool | None = None
    runtime_mem: int | None = param(None, min=1, max=parameters.MAX_MEMORY)
    force: bool = False
    wait_for_sync: bool = True
    #: convert the disks to this template (plain <-> drbd; the instance stopped)
    disk_template: str | None = None
    #: the secondary node of a conversion to drbd
    remote_node: str | None = None
    remote_node_uuid: str | None = None
    #: refuse NIC addresses taken in their network, or inside a connected network
    #: the NIC is not on (doc/networks.md)
    conflicts_check: bool = True
    #: or the allocator that picks it
    iallocator: str | None = None
    #: plug NIC/disk changes into the running instance (refused if impossible)
    hotplug: bool = False
    #: as ``hotplug`` where the hypervisor can, else apply at the next start
    hotplug_if_possible: bool = False
    ignore_ipolicy: bool = False
    #: the new primary node, the disks having been moved there by hand (not for drbd)
    pnode: str | None = None
    instance_communication: bool | None = param(
        None, doc="add (true) or remove (false) the instance communication NIC")


@dataclass(kw_only=True)
class OpInstanceMigrate(OpInstanceBase):
    """Live (or non-live) migrate an instance to another node."""

    mode: str | None = param(None, choices=sorted(constants.HT_MIGRATION_MODES))
    live: bool | None = None
    target_node: str | None = None
    iallocator: str | None = None
    cleanup: bool = False
    allow_failover: bool = False
    allow_runtime_changes: bool = True
    ignore_ipolicy: bool = False
    ignore_hvversions: bool = False
    with_disks: bool = param(False, doc="copy local (file) disks to the target while the"
                                         " guest runs (kvm; doc/kvm.md)")


@dataclass(kw_only=True)
class OpInstanceFailover(OpInstanceBase):
    """Fail an instance over: stop it, start it on another node."""

    ignore_consistency: bool = False
    shutdown_timeout: int = param(_SHUTDOWN_TIMEOUT, min=0)
    target_node: str | None = None
    iallocator: str | None = None
    cleanup: bool = False
    ignore_ipolicy: bool = False


@dataclass(kw_only=True)
class OpInstanceReplaceDisks(OpInstanceBase):
    """Replace the volumes of a mirrored (drbd) instance's disks: on its primary or
    secondary node, or onto a new secondary node (``remote_node`` or the
    ``iallocator``'s choice); ``replace_auto`` repairs the side that is degraded."""

    mode: str = param(choices=sorted(constants.REPLACE_MODES))
    disks: list[int] = param([], max_len=constants.MAX_DISKS)
    remote_node: str | None = None
    iallocator: str | None = None
    early_release: bool = False
    ignore_ipolicy: bool = False


@dataclass(kw_only=True)
class OpInstanceMove(OpInstanceBase):
    """Move an instance by copying its disks to ``target_node``."""

    target_node: str
    shutdown_timeout: int = param(_SHUTDOWN_TIMEOUT, min=0)
    compress: str = "none"
    ignore_consistency: bool = False
    ignore_ipolicy: bool = False


@dataclass(kw_only=True)
class OpInstanceGrowDisk(OpInstanceBase):
    """Grow one disk by ``amount`` MiB (or to ``amount`` with ``absolute``)."""

    disk: int = param(min=0, max=constants.MAX_DISKS - 1)
    amount: int = param(min=0, max=MAX_DISK_SIZE)
    absolute: bool = False
    wait_for_sync: bool = True
    ignore_ipolicy: bool = False


@dataclass(kw_only=True)
class OpInstanceRecreateDisks(OpInstanceBase):
    """Recreate the missing volumes of a stopped instance's disks.

    All disks, or those in ``disks``, on the instance's nodes; a selected
    disk that still exists is refused, as in Ganeti (doc/storage.md, "The
    plain template").
    """

    disks: list[Any] = param([], doc="disk indices, or Ganeti's [index, {parameters}]"
                             " pairs (size, spindles, mode of the new disk)")
    nodes: list[str] = param([], doc="the nodes to make the disks on (another primary;"
                             " a drbd instance: primary and secondary)")
    iallocator: str | None = param(None, doc="an allocator picks the node (a drbd"
                                   " instance's two, once its volumes are gone) ('.' or"
                                   " none given: the cluster's default)")


@dataclass(kw_only=True)
class OpInstanceActivateDisks(OpInstanceBase):
    """Assemble the disks of an instance; returns [(node, iv_name, path)]."""

    ignore_size: bool = False
    wait_for_sync: bool = False


@dataclass(kw_only=True)
class OpInstanceDeactivateDisks(OpInstanceBase):
    """Shut down the disks of a stopped instance."""

    force: bool = False


@dataclass(kw_only=True)
class OpInstanceConsole(OpInstanceBase):
    """How to reach the console of a running instance (a console dict)."""


@dataclass(kw_only=True)
class OpInstanceQueryData(OpCode):
    """Detailed data of instances (``gnt-instance info``), by name."""

    OP_DSC_FIELD = "instances"

    instances: list[str] = param([])
    static: bool = False
    use_locking: bool = False




@dataclass(kw_only=True)
class OpInstanceChangeGroup(OpInstanceBase):
    """Move an instance to another node group (jobs from the allocator); result as evacuate."""

    target_groups: list[str] = param([])
    iallocator: str | None = None
    early_release: bool = False
    plan_only: bool = param(False, doc=PLAN_DOC)
    apply_plan: dict[str, Any] | None = param(None, doc=APPLY_DOC)


@dataclass(kw_only=True)
class OpInstanceMultiAlloc(OpCode):
    """Create many instances placed together by the allocator (one create job each).

    Result: ``{"jobs": [[ok, id|error], ...], "allocatable": [names], "failed": [names]}``.
    """

    instances: list[dict[str, Any]] = param([])
    iallocator: str | None = None
    opportunistic_locking: bool = False


ALL_OPCODES = (OpInstanceCreate, OpInstanceRemove, OpInstanceStartup, OpInstanceShutdown,
               OpInstanceReboot, OpInstanceReinstall, OpInstanceRename, OpInstanceSetParams,
               OpInstanceMigrate, OpInstanceFailover, OpInstanceMove, OpInstanceGrowDisk,
               OpInstanceRecreateDisks, OpInstanceActivateDisks, OpInstanceDeactivateDisks, OpInstanceConsole,
               OpInstanceQueryData, OpInstanceChangeGroup, OpInstanceMultiAlloc,
               OpInstanceReplaceDisks)
