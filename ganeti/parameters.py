"""Typed parameter tables, defaults, layering and validation.

Following the 2.0 design ("Object parameters"), instance settings are split
into namespaces, each with a typed table and defaults:

========  ==========================================  ======================
``hv``    hypervisor parameters, per hypervisor       ``HV_PARAMETERS[hv]``
          (checked only: Ganeti's others)             ``FOREIGN_HV_PARAMETERS``
``be``    backend parameters (memory, vcpus...)       ``BE_PARAMETERS``
``nic``   NIC parameters (mode, link, vlan)           ``NIC_PARAMETERS``
``nd``    node parameters                             ``ND_PARAMETERS``
``disk``  disk parameters, per disk template          ``DISK_PARAMETERS[dt]``
``os``    OS parameters: free-form ``str -> str``     (no table)
========  ==========================================  ======================

**Storage rule.**  Objects store only what the user set at that level
(Ganeti's rule: "once customized, a parameter will be kept, even with the
same value as the default one, until reset").  :func:`update_params`
applies a change set where the value ``"default"`` (:data:`VALUE_DEFAULT`)
removes the key again.  :func:`strip_defaults` is available for callers
that prefer to drop values equal to the built-in defaults (e.g. at cluster
init), but nothing calls it implicitly.

**Layering.**  Effective values are built with :func:`fill_dict`, from the
built-in defaults, then the cluster, then the node group (nd/disk), then
the OS-specific hypervisor overrides (``cluster.os_hvp``), then the object:
:func:`fill_hvparams`, :func:`fill_beparams`, :func:`fill_nicparams`,
:func:`fill_ndparams`, :func:`fill_diskparams`, :func:`fill_osparams`.

**Validation.**  :func:`check_params` converts CLI strings ("128M",
"true", "3") to the declared type and refuses unknown keys, wrong types and
bad values with :class:`errors.ParameterError` naming the parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ganeti import constants, drbdopts, errors
from ganeti.hypervisor import checks as hvchecks
from ganeti.objects import PP_DEFAULT, Cluster, Instance, Node, NodeGroup
from ganeti.utils import units

__all__ = [
    "VALUE_DEFAULT", "P_STR", "P_INT", "P_BOOL", "P_SIZE", "P_FLOAT",
    "P_ENUM", "ParamDef", "HV_PARAMETERS", "FOREIGN_HV_PARAMETERS", "BE_PARAMETERS", "NIC_PARAMETERS",
    "ND_PARAMETERS", "DISK_PARAMETERS", "DISK_PARAM_ALIASES", "NAMESPACES", "disk_param_name",
    "param_table", "defaults", "check_params", "update_params",
    "strip_defaults", "fill_dict", "fill_hvparams", "fill_instance_hvparams",
    "fill_beparams", "fill_instance_beparams", "fill_nicparams",
    "fill_ndparams", "fill_diskparams", "fill_osparams",
]

VALUE_DEFAULT = "default"

#: Type-level range of integer parameters (a signed 64-bit word).
INT_MIN = -(2 ** 63)
INT_MAX = 2 ** 63 - 1
#: Most memory of an instance, MiB (1 PiB; Ganeti sets no bound, the
#: hypervisors do, far below).
MAX_MEMORY = 2 ** 30
#: Most virtual CPUs of an instance.
MAX_VCPUS = 4096

P_STR = "string"
P_INT = "int"
P_BOOL = "bool"
P_SIZE = "size"     # MiB; accepts "128M", "2G"
P_FLOAT = "float"
P_ENUM = "enum"     # a string out of ``choices``

NAMESPACES = ("hv", "be", "nic", "nd", "disk", "os")

#: the only texts a boolean parameter takes (any case), as in Ganeti:
#: ``-B auto_balance=1`` or ``=yes`` is refused, not guessed
_TRUE = frozenset(["true"])
_FALSE = frozenset(["false"])


@dataclass(frozen=True)
class ParamDef:
    """One parameter: name, type, default and limits."""

    name: str
    kind: str
    default: Any
    doc: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    #: extra syntax check of the converted value: an error text or None
    check: Callable[[Any], str | None] | None = None

    def convert(self, value: Any, where: str) -> Any:
        """Return ``value`` converted to this parameter's type, or raise."""
        what = f"{where} parameter '{self.name}'"
        converter = _CONVERTERS[self.kind]
        result = converter(value, what)
        if self.kind == P_ENUM and result not in self.choices:
            raise errors.ParameterError(
                f"Invalid value {value!r} for {what}: must be one of {', '.join(self.choices)}",
                errors.ECODE_INVAL)
        if (isinstance(result, int) and not isinstance(result, bool)
                and not INT_MIN <= result <= INT_MAX):
            raise errors.ParameterError(
                f"Invalid value {value!r} for {what}: out of range", errors.ECODE_INVAL)
        if self.minimum is not None and result < self.minimum:
            raise errors.ParameterError(
                f"Invalid value {value!r} for {what}: must be at least {self.minimum:g}",
                errors.ECODE_INVAL)
        if self.maximum is not None and result > self.maximum:
            raise errors.ParameterError(
                f"Invalid value {value!r} for {what}: must be at most {self.maximum:g}",
                errors.ECODE_INVAL)
        if self.check is not None:
            problem = self.check(result)
            if problem:
                raise errors.ParameterError(f"Invalid value {value!r} for {what}: {problem}",
                                            errors.ECODE_INVAL)
        return result


def _bad_type(value: Any, what: str, expected: str) -> errors.ParameterError:
    return errors.ParameterError(
        f"Invalid value {value!r} for {what}: expected {expected}", errors.ECODE_INVAL)


def _to_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _bad_type(value, what, "a string")
    if any(ord(c) < 32 for c in value):
        raise _bad_type(value, what, "a string without control characters")
    return value


def _to_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise _bad_type(value, what, "an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _bad_type(value, what, "an integer")


def _to_float(value: Any, what: str) -> float:
    # finite only: the configuration is strict JSON (no NaN or Infinity)
    result = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            pass
    if result is None or not math.isfinite(result):
        raise _bad_type(value, what, "a finite number")
    return result


def _to_bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise _bad_type(value, what, "a boolean (true/false)")


def _to_size(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise _bad_type(value, what, "a size such as 512M or 2G")
    if isinstance(value, (int, float, str)):
        try:
            return units.parse_unit(value)
        except errors.UnitParseError:
            pass
    raise _bad_type(value, what, "a size such as 512M or 2G")


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    P_STR: _to_str, P_INT: _to_int, P_BOOL: _to_bool, P_SIZE: _to_size,
    P_FLOAT: _to_float, P_ENUM: _to_str,
}


def _table(*defs: ParamDef) -> dict[str, ParamDef]:
    return {d.name: d for d in defs}


_MIGRATION_MODE = ParamDef("migration_mode", P_ENUM, constants.HT_MIGRATION_LIVE,
                           "live or non-live migration",
                           choices=tuple(sorted(constants.HT_MIGRATION_MODES)))

HV_PARAMETERS: dict[str, dict[str, ParamDef]] = {
    constants.HT_FAKE: _table(
        _MIGRATION_MODE,
        # the fake "transfers" the instance's memory at this speed, so that
        # progress can be watched without a real hypervisor (doc/progress.md)
        ParamDef("migration_bandwidth", P_INT, 0,
                 "simulated migration speed (MiB/s, 0: instant)", minimum=0),
    ),
    constants.HT_KVM: _table(
        ParamDef("kvm_path", P_STR, "/usr/bin/kvm", "the kvm/qemu binary",
                 check=hvchecks.check_abs_path),
        ParamDef("kernel_path", P_STR, "", "kernel for direct boot (empty: boot from disk)",
                 check=hvchecks.check_optional_abs_path),
        ParamDef("initrd_path", P_STR, "", "initrd for direct boot",
                 check=hvchecks.check_optional_abs_path),
        ParamDef("root_path", P_STR, "/dev/vda1", "root device passed to the kernel"),
        ParamDef("kernel_args", P_STR, "ro", "extra kernel command line"),
        ParamDef("boot_order", P_ENUM, "disk", "first boot device",
                 choices=("cdrom", "disk", "floppy", "network")),
        ParamDef("cdrom_image_path", P_STR, "", "ISO image attached as cdrom",
                 check=hvchecks.check_optional_abs_path),
        ParamDef("nic_type", P_ENUM, "paravirtual", "emulated NIC model",
                 choices=("e1000", "i82551", "i82557b", "i82559er", "ne2k_isa",
                          "ne2k_pci", "paravirtual", "pcnet", "rtl8139")),
        ParamDef("disk_type", P_ENUM, "paravirtual", "emulated disk bus",
                 choices=("ide", "mtd", "paravirtual", "pflash", "scsi", "sd")),
        ParamDef("disk_cache", P_ENUM, "default", "host cache mode of disks",
                 choices=("default", "none", "writeback", "writethrough")),
        ParamDef("vnc_bind_address", P_STR, "", "address the VNC console listens on",
                 check=hvchecks.check_bind_address),
        ParamDef("vnc_password_file", P_STR, "",
                 "file whose first line is the VNC password (on every node)",
                 check=hvchecks.check_optional_abs_path),
        ParamDef("vnc_tls", P_BOOL, False, "VNC over TLS (VeNCrypt)"),
        ParamDef("vnc_x509_path", P_STR, "",
                 "directory of the VNC TLS certificates (empty: anonymous TLS)",
                 check=hvchecks.check_optional_abs_path),
        ParamDef("vnc_x509_verify", P_BOOL, False,
                 "VNC TLS checks the client's certificate"),
        ParamDef("serial_console", P_BOOL, True, "expose the serial console"),
        ParamDef("serial_speed", P_INT, 38400, "serial console speed", minimum=1),
        ParamDef("acpi", P_BOOL, True, "enable ACPI"),
        ParamDef("use_chroot", P_BOOL, False, "run kvm chrooted"),
        ParamDef("security_model", P_ENUM, "none", "which user kvm runs as",
                 choices=("none", "pool", "user")),
        ParamDef("security_domain", P_STR, "", "user for security_model=user"),
        ParamDef("reboot_behavior", P_ENUM, "reboot", "what a guest reboot does",
                 choices=("exit", "reboot")),
        ParamDef("cpu_type", P_STR, "", "emulated CPU model (empty: kvm default)",
                 check=hvchecks.check_no_space),
        ParamDef("machine_version", P_STR, "", "machine type (empty: kvm default)",
                 check=hvchecks.check_no_space),
        ParamDef("firmware", P_ENUM, constants.HT_KVM_FIRMWARE_BIOS,
                 "bios (SeaBIOS) or uefi (OVMF, with an NVRAM)",
                 choices=(constants.HT_KVM_FIRMWARE_BIOS, constants.HT_KVM_FIRMWARE_UEFI)),
        ParamDef("tpm", P_ENUM, constants.HT_KVM_TPM_NONE, "none or tpm2 (an swtpm per instance)",
                 choices=(constants.HT_KVM_TPM_NONE, constants.HT_KVM_TPM_TPM2)),
        ParamDef("cloud_init_source", P_ENUM, constants.HT_KVM_CLOUD_INIT_SEED,
                 "where cloud-init reads its data: seed (a NoCloud cdrom) or metad"
                 " (ganeti-metad, named in the SMBIOS serial)",
                 choices=(constants.HT_KVM_CLOUD_INIT_METAD, constants.HT_KVM_CLOUD_INIT_SEED)),
        ParamDef("cpu_mask", P_STR, "all", "physical CPUs the vCPUs may use",
                 check=hvchecks.check_cpu_mask),
        ParamDef("mem_path", P_STR, "", "hugepage mount for guest memory",
                 check=hvchecks.check_optional_abs_path),
        ParamDef("vhost_net", P_BOOL, False, "use vhost-net for NICs"),
        ParamDef("keymap", P_STR, "", "VNC keymap"),
        ParamDef("usb_mouse", P_STR, "", "USB pointing device"),
        ParamDef("user_shutdown", P_BOOL, False, "track guest-initiated shutdown"),
        _MIGRATION_MODE,
        ParamDef("migration_port", P_INT, 8102, "TCP port for migration",
                 minimum=1, maximum=65535),
        ParamDef("migration_bandwidth", P_INT, 32, "max migration bandwidth (MiB/s)",
                 minimum=1),
        ParamDef("migration_downtime", P_INT, 30, "max migration downtime (ms)",
                 minimum=1),
        ParamDef("kvm_extra", P_STR, "", "extra words for the kvm command line",
                 check=hvchecks.check_shell_words),
    ),
}

_XEN_COMMON = {
    "kernel_path": P_STR, "migration_port": P_INT, "migration_mode": P_STR,
    "blockdev_prefix": P_STR, "reboot_behavior": P_STR, "cpu_mask": P_STR,
    "cpu_cap": P_INT, "cpu_weight": P_INT, "vif_script": P_STR, "cpuid": P_STR,
    "soundhw": P_STR,
}

#: Ganeti's hypervisors we do not run: each parameter's name and type (Ganeti 3.0's
#: tables).  :func:`check_params` checks values for them as Ganeti does (known names,
#: the type) so that ``gnt-os modify -H xen-pvm:...`` and ``gnt-cluster modify -H`` are
#: taken as by Ganeti; they have no defaults here and are never filled.
FOREIGN_HV_PARAMETERS: dict[str, dict[str, str]] = {
    constants.HT_XEN_PVM: {
        **_XEN_COMMON, "use_bootloader": P_BOOL, "bootloader_path": P_STR,
        "bootloader_args": P_STR, "initrd_path": P_STR, "root_path": P_STR,
        "kernel_args": P_STR},
    constants.HT_XEN_HVM: {
        **_XEN_COMMON, "boot_order": P_STR, "cdrom_image_path": P_STR, "nic_type": P_STR,
        "disk_type": P_STR, "vnc_bind_address": P_STR, "acpi": P_BOOL, "pae": P_BOOL,
        "device_model": P_STR, "use_localtime": P_BOOL, "pci_pass": P_STR,
        "vif_type": P_STR, "viridian": P_BOOL},
    constants.HT_LXC: {
        "cpu_mask": P_STR, "devices": P_STR, "drop_capabilities": P_STR,
        "extra_cgroups": P_STR, "extra_config": P_STR, "num_ttys": P_INT,
        "startup_timeout": P_INT},
    constants.HT_CHROOT: {"init_script": P_STR},
}

BE_PARAMETERS: dict[str, ParamDef] = _table(
    ParamDef("vcpus", P_INT, 1, "number of virtual CPUs", minimum=1, maximum=MAX_VCPUS),
    ParamDef("maxmem", P_SIZE, 128, "maximum memory (MiB)", minimum=1, maximum=MAX_MEMORY),
    ParamDef("minmem", P_SIZE, 128, "minimum memory (MiB)", minimum=1, maximum=MAX_MEMORY),
    ParamDef("auto_balance", P_BOOL, True, "keep N+1 redundancy for this instance"),
    ParamDef("always_failover", P_BOOL, False, "failover instead of migrating"),
    ParamDef("spindle_use", P_INT, 1, "spindles used by the instance", minimum=0),
)
# legacy key: sets both maxmem and minmem
BE_MEMORY = "memory"

NIC_PARAMETERS: dict[str, ParamDef] = _table(
    ParamDef("mode", P_ENUM, constants.NIC_MODE_BRIDGED, "bridged, routed or openvswitch",
             choices=tuple(sorted(constants.NIC_VALID_MODES))),
    ParamDef("link", P_STR, constants.DEFAULT_BRIDGE, "bridge, routing table or switch"),
    ParamDef("vlan", P_STR, "", "VLAN id(s) for openvswitch"),
)

ND_PARAMETERS: dict[str, ParamDef] = _table(
    ParamDef("oob_program", P_STR, "", "out-of-band management program"),
    ParamDef("spindle_count", P_INT, 1, "spindles of the node", minimum=1),
    ParamDef("exclusive_storage", P_BOOL, False, "one PV per instance disk"),
    ParamDef("ovs", P_BOOL, False, "set up openvswitch"),
    ParamDef("ovs_name", P_STR, "switch1", "name of the openvswitch"),
    ParamDef("ovs_link", P_STR, "", "physical interface of the switch"),
    ParamDef("ssh_port", P_INT, 22, "SSH port of the node", minimum=1, maximum=65535),
    ParamDef("cpu_speed", P_FLOAT, 1.0, "relative CPU speed", minimum=0),
)

_ACCESS = ParamDef("access", P_ENUM, "kernel", "how the hypervisor reaches the disk",
                   choices=("kernel", "userspace"))
DISK_PARAMETERS: dict[str, dict[str, ParamDef]] = {
    constants.DT_DISKLESS: {},
    constants.DT_FILE: {},
    constants.DT_SHARED_FILE: {},
    constants.DT_BLOCK: {},
    constants.DT_PLAIN: _table(
        ParamDef("stripes", P_INT, 1, "LVM stripes", minimum=1),
    ),
    # Ganeti's names (doc/storage.md, "DRBD"); the ones spelt with "_" before are
    # accepted and read as these (DISK_PARAM_ALIASES); the ranges are drbdsetup 8.4's
    constants.DT_DRBD8: _table(
        ParamDef("resync-rate", P_INT, 61440, "resync speed (KiB/s)", minimum=1,
                 maximum=4194304),
        ParamDef("dynamic-resync", P_BOOL, False,
                 "let DRBD adapt the resync speed (the c-* parameters) instead of a"
                 " fixed resync-rate"),
        ParamDef("c-plan-ahead", P_INT, 20, "dynamic resync: planning horizon (0.1 s)",
                 minimum=0, maximum=300),
        ParamDef("c-fill-target", P_INT, 0, "dynamic resync: data in flight to aim at"
                 " (sectors; 0: use c-delay-target)", minimum=0, maximum=1048576),
        ParamDef("c-delay-target", P_INT, 1, "dynamic resync: delay to aim at (0.1 s)",
                 minimum=1, maximum=100),
        ParamDef("c-max-rate", P_INT, 61440, "dynamic resync: highest speed (KiB/s)",
                 minimum=250, maximum=4194304),
        ParamDef("c-min-rate", P_INT, 4096, "dynamic resync: speed kept while the"
                 " application writes (KiB/s)", minimum=0, maximum=4194304),
        ParamDef("data-stripes", P_INT, 1, "stripes of the data LV", minimum=1),
        ParamDef("meta-stripes", P_INT, 1, "stripes of the metadata LV", minimum=1),
        ParamDef("metavg", P_STR, "", "volume group of the metadata"),
        ParamDef("net-custom", P_STR, "", "more drbdsetup connect options"
                 " (--name=value ...; doc/storage.md)",
                 check=lambda text: drbdopts.problem(text, drbdopts.NET_OWNED)),
        ParamDef("disk-custom", P_STR, "", "more drbdsetup attach options"
                 " (--name=value ...; doc/storage.md)",
                 check=lambda text: drbdopts.problem(text, drbdopts.DISK_OWNED)),
    ),
    constants.DT_RBD: _table(
        ParamDef("pool", P_STR, "rbd", "RADOS pool"),
        _ACCESS,
    ),
    constants.DT_EXT: _table(_ACCESS),
    constants.DT_GLUSTER: _table(
        ParamDef("host", P_STR, "127.0.0.1", "gluster server"),
        ParamDef("port", P_INT, 24007, "gluster port", minimum=1, maximum=65535),
        ParamDef("volume", P_STR, "gv0", "gluster volume"),
        _ACCESS,
    ),
}


#: disk parameter names spelt otherwise before (template -> {old: Ganeti's name})
DISK_PARAM_ALIASES: dict[str, dict[str, str]] = {
    constants.DT_DRBD8: {"resync_rate": "resync-rate", "dynamic_resync": "dynamic-resync",
                         "data_stripes": "data-stripes", "meta_stripes": "meta-stripes"},
}


def disk_param_name(template: str | None, key: str) -> str:
    """``key`` under its current name (an old spelling of :data:`DISK_PARAM_ALIASES`
    is translated)."""
    return DISK_PARAM_ALIASES.get(template or "", {}).get(key, key)


def param_table(namespace: str, subtype: str | None = None) -> dict[str, ParamDef] | None:
    """The table of ``namespace`` (``None`` for the free-form ``os``).

    ``subtype`` is the hypervisor for ``hv`` and the disk template for
    ``disk``.  Raises :class:`errors.ParameterError` for an unknown
    namespace, hypervisor or template.
    """
    if namespace == "hv":
        if subtype not in HV_PARAMETERS:
            raise errors.ParameterError(f"Unknown hypervisor {subtype!r}", errors.ECODE_INVAL)
        return HV_PARAMETERS[subtype]
    if namespace == "disk":
        if subtype not in DISK_PARAMETERS:
            raise errors.ParameterError(f"Unknown disk template {subtype!r}", errors.ECODE_INVAL)
        return DISK_PARAMETERS[subtype]
    if namespace == "be":
        return BE_PARAMETERS
    if namespace == "nic":
        return NIC_PARAMETERS
    if namespace == "nd":
        return ND_PARAMETERS
    if namespace == "os":
        return None
    raise errors.ParameterError(f"Unknown parameter namespace {namespace!r}", errors.ECODE_INVAL)


def defaults(namespace: str, subtype: str | None = None) -> dict[str, Any]:
    """The built-in defaults of a namespace (a fresh dict)."""
    table = param_table(namespace, subtype)
    return {} if table is None else {name: d.default for name, d in table.items()}


def _where(namespace: str, subtype: str | None) -> str:
    label = {"hv": "hypervisor", "be": "backend", "nic": "NIC", "nd": "node",
             "disk": "disk", "os": "OS"}[namespace]
    return f"{subtype} {label}" if subtype else label


def check_params(namespace: str, values: Mapping[str, Any] | None,
                 hypervisor: str | None = None, *, template: str | None = None,
                 allow_default: bool = False) -> dict[str, Any]:
    """Validate ``values`` and return them converted to their declared types.

    ``hypervisor`` selects the ``hv`` table and ``template`` the ``disk``
    table.  With ``allow_default`` (modifications) the value ``"default"``
    is passed through unchanged so :func:`update_params` can remove the key.
    For ``be`` the legacy key ``memory`` sets both ``maxmem`` and
    ``minmem`` (unless those are given too), and ``minmem > maxmem`` is
    refused when both are given.  Raises :class:`errors.ParameterError`.
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise errors.ParameterError(
            f"Invalid {namespace} parameters: expected a dictionary, got {type(values).__name__}",
            errors.ECODE_INVAL)
    subtype = template if namespace == "disk" else hypervisor if namespace == "hv" else None
    if namespace == "hv" and hypervisor in FOREIGN_HV_PARAMETERS:
        table: dict[str, ParamDef] | None = {
            name: ParamDef(name, kind, None)
            for name, kind in FOREIGN_HV_PARAMETERS[hypervisor].items()}
    else:
        table = param_table(namespace, subtype)
    where = _where(namespace, subtype)
    result: dict[str, Any] = {}
    items = dict(values)
    if namespace == "disk":
        items = {disk_param_name(template, k) if isinstance(k, str) else k: v
                 for k, v in items.items()}
    if namespace == "be" and BE_MEMORY in items:
        memory = items.pop(BE_MEMORY)
        items.setdefault("maxmem", memory)
        items.setdefault("minmem", memory)
    for key, value in items.items():
        if not isinstance(key, str) or not key:
            raise errors.ParameterError(f"Invalid {where} parameter name {key!r}",
                                        errors.ECODE_INVAL)
        if allow_default and value == VALUE_DEFAULT:
            if table is not None and key not in table:
                raise errors.ParameterError(
                    f"Unknown {where} parameter '{key}'", errors.ECODE_INVAL)
            result[key] = VALUE_DEFAULT
            continue
        if table is None:   # OS parameters: free-form strings
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise _bad_type(value, f"{where} parameter '{key}'", "a string")
            result[key] = _to_str(str(value), f"{where} parameter '{key}'")
            continue
        pdef = table.get(key)
        if pdef is None:
            known = ", ".join(sorted(table)) or "none"
            raise errors.ParameterError(
                f"Unknown {where} parameter '{key}' (known: {known})", errors.ECODE_INVAL)
        result[key] = pdef.convert(value, where)
    if namespace == "be":
        lo, hi = result.get("minmem"), result.get("maxmem")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            raise errors.ParameterError(
                f"Invalid backend parameter 'minmem': {lo} is larger than maxmem {hi}",
                errors.ECODE_INVAL)
    return result


def update_params(current: Mapping[str, Any] | None,
                  changes: Mapping[str, Any] | None) -> dict[str, Any]:
    """Apply checked ``changes`` to the stored ``current`` dict.

    A value of ``"default"`` removes the key (back to the inherited value);
    others are set even if equal to the default (storage rule above).
    Returns a new dict; the inputs are not modified.
    """
    result = dict(current or {})
    for key, value in (changes or {}).items():
        if value == VALUE_DEFAULT:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def strip_defaults(values: Mapping[str, Any], inherited: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the entries of ``values`` that equal those of ``inherited``.

    ``inherited`` is what the object would get without ``values`` (e.g.
    :func:`defaults` or the filled cluster level).
    """
    return {k: v for k, v in values.items() if k not in inherited or inherited[k] != v}


def fill_dict(base: Mapping[str, Any] | None, custom: Mapping[str, Any] | None,
              skip_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """Return ``base`` updated with ``custom`` (a new dict), minus ``skip_keys``."""
    result = dict(base or {})
    result.update(custom or {})
    for key in skip_keys:
        result.pop(key, None)
    return result


def fill_hvparams(cluster: Cluster, hypervisor: str, params: Mapping[str, Any] | None = None,
                  *, os_name: str | None = None) -> dict[str, Any]:
    """Effective hv parameters: defaults <- cluster <- os_hvp[os] <- ``params``.

    Unknown hypervisors (no table) start from an empty default set.
    """
    base = defaults("hv", hypervisor) if hypervisor in HV_PARAMETERS else {}
    result = fill_dict(base, cluster.hvparams.get(hypervisor))
    if os_name:
        for name in _os_variants(os_name):
            result = fill_dict(result, cluster.os_hvp.get(name, {}).get(hypervisor))
    return fill_dict(result, params)


def _os_variants(os_name: str) -> list[str]:
    # "debian+buster": first the base OS, then the variant-specific entry
    base = os_name.split("+", 1)[0]
    return [base] if base == os_name else [base, os_name]


def fill_instance_hvparams(cluster: Cluster, instance: Instance) -> dict[str, Any]:
    """Effective hv parameters of ``instance`` (its hypervisor and OS)."""
    return fill_hvparams(cluster, instance.hypervisor, instance.hvparams, os_name=instance.os)


def fill_beparams(cluster: Cluster, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Effective backend parameters: defaults <- cluster <- ``params``."""
    return fill_dict(fill_dict(defaults("be"), cluster.beparams.get(PP_DEFAULT)), params)


def fill_instance_beparams(cluster: Cluster, instance: Instance) -> dict[str, Any]:
    """Effective backend parameters of ``instance``."""
    return fill_beparams(cluster, instance.beparams)


def fill_nicparams(cluster: Cluster, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Effective NIC parameters: defaults <- cluster <- ``params``."""
    return fill_dict(fill_dict(defaults("nic"), cluster.nicparams.get(PP_DEFAULT)), params)


def fill_ndparams(cluster: Cluster, group: NodeGroup | None = None,
                  node: Node | None = None) -> dict[str, Any]:
    """Effective node parameters: defaults <- cluster <- group <- node."""
    result = fill_dict(defaults("nd"), cluster.ndparams)
    if group is not None:
        result = fill_dict(result, group.ndparams)
    if node is not None:
        result = fill_dict(result, node.ndparams)
    return result


def fill_diskparams(cluster: Cluster, template: str,
                    group: NodeGroup | None = None) -> dict[str, Any]:
    """Effective disk parameters of ``template``: defaults <- cluster <- group."""
    def named(params: Mapping[str, Any] | None) -> dict[str, Any]:
        return {disk_param_name(template, k): v for k, v in (params or {}).items()}
    result = fill_dict(defaults("disk", template), named(cluster.diskparams.get(template)))
    if group is not None:
        result = fill_dict(result, named(group.diskparams.get(template)))
    return result


def fill_osparams(cluster: Cluster, os_name: str,
                  params: Mapping[str, str] | None = None) -> dict[str, str]:
    """Effective OS parameters: cluster[os] (base, then variant) <- ``params``."""
    result: dict[str, str] = {}
    for name in _os_variants(os_name):
        result = fill_dict(result, cluster.osparams.get(name))
    return fill_dict(result, params)
