"""The qemu command line of a kvm instance, built from its hvparams (pure).

:func:`build_command` turns an :class:`~ganeti.hypervisor.base.InstanceSpec`
(filled hvparams, upstream's names and defaults: doc/kvm.md), its disk
paths and the per-instance runtime files into an argv list; nothing here
touches the system, so every choice is tested on the produced words.  The
hypervisor (``ganeti.hypervisor.kvm.hypervisor``) decides what needs the
node: the acceleration (``kvm`` with a usable ``/dev/kvm``, else ``tcg``),
the binary and, per NIC, whether a tap on a bridge or user-mode networking
is used.

Fixed choices, on every instance:

* ``-daemonize -pidfile``: qemu forks into the background once its
  sockets exist, so the node daemon's request can return.
* QMP on a UNIX socket (``-chardev socket ... -mon mode=control``), the
  serial console on another one, both servers that do not wait.
* ``-no-shutdown``: a guest that powers itself off leaves qemu alive in
  the ``shutdown`` state, which is how ``USER_down`` is told from a crash.
* ``-nodefaults``: no device is added behind our back (no default NIC,
  VGA or cdrom); ``-display none`` unless VNC is asked for
  (``vnc_bind_address``; with ``password=on`` when ``vnc_password_file`` is
  set: the hypervisor sets the password over QMP once qemu runs; with
  ``vnc_tls``, a TLS credentials object :data:`VNC_TLS_ID`, x509 from
  ``vnc_x509_path`` or anonymous without it, named by ``tls-creds=``).
* ``firmware=uefi``: two pflash drives (OVMF's code read-only, the
  instance's NVRAM), ``tpm=tpm2``: a ``tpm-tis`` device on swtpm's socket
  (:mod:`ganeti.hypervisor.kvm.firmware`).
* a ``virtio-balloon-pci`` device (id :data:`BALLOON_ID`) after the NICs,
  for runtime memory changes.
* an instance with a cloud-init seed (doc/images.md): the seed as a
  read-only cdrom (``cloud_init_source=seed``), or no cdrom and the SMBIOS
  serial number :data:`METAD_SMBIOS_SERIAL` (``metad``), which makes the
  guest's cloud-init read the metadata service instead.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ganeti import constants, errors
from ganeti.hypervisor import checks as hvchecks
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import firmware

__all__ = [
    "RuntimeFiles", "NicBackend", "NETDEV_TAP", "NETDEV_USER", "BALLOON_ID",
    "DISK_INTERFACES", "NIC_MODELS", "BOOT_DEVICES", "ACCEL_KVM", "ACCEL_TCG",
    "VNC_BASE_PORT", "VNC_PORTS", "VNC_TLS_ID", "escape_option", "build_command", "kernel_command_line",
    "cpu_affinity", "migration_parameters", "disk_cache_for",
]

ACCEL_KVM = "kvm"
ACCEL_TCG = "tcg"
#: VNC display N listens on TCP port 5900 + N.
VNC_BASE_PORT = 5900
#: the ports a node gives its instances' VNC servers (the first free one at start)
VNC_PORTS = range(VNC_BASE_PORT + 1, VNC_BASE_PORT + 1000)

#: the id of the TLS credentials object of VNC (``vnc_tls``)
VNC_TLS_ID = "vnctls0"

#: disk_type -> qemu ``-drive if=`` value
DISK_INTERFACES = {"paravirtual": "virtio", "ide": "ide", "scsi": "scsi", "sd": "sd",
                   "mtd": "mtd", "pflash": "pflash"}
#: nic_type -> qemu ``-device`` model
NIC_MODELS = {"paravirtual": "virtio-net-pci", "e1000": "e1000", "rtl8139": "rtl8139",
              "ne2k_pci": "ne2k_pci", "ne2k_isa": "ne2k_isa", "pcnet": "pcnet",
              "i82551": "i82551", "i82557b": "i82557b", "i82559er": "i82559er"}
#: boot_order -> qemu ``-boot order=`` letter
BOOT_DEVICES = {"disk": "c", "cdrom": "d", "network": "n", "floppy": "a"}
#: disk_cache values passed through to ``-drive cache=`` ("default": omitted)
_CACHE_DEFAULT = "default"
#: a DRBD device's path (``/dev/drbd<minor>``): see :func:`disk_cache_for`
_DRBD_DEVICE = re.compile(r"/dev/drbd[0-9]+")


def disk_cache_for(disk_cache: str, path: str) -> str:
    """The cache mode qemu opens the disk on ``path`` with, for the hvparam ``disk_cache``.

    ``default`` on a DRBD device is ``none`` (``O_DIRECT``): the two nodes of a
    mirror each have a page cache of the device that the other's writes bypass
    (both are primary during a live migration), and a write the guest sees done
    is then on both nodes' disks (doc/kvm.md, "Disk cache").  Any other value
    is the operator's and is kept.
    """
    if disk_cache == _CACHE_DEFAULT and _DRBD_DEVICE.fullmatch(path):
        return "none"
    return disk_cache

#: the qdev id of the memory balloon every instance has
BALLOON_ID = "balloon0"

NETDEV_TAP = "tap"
NETDEV_USER = "user"


@dataclass(frozen=True)
class RuntimeFiles:
    """Where one instance's qemu keeps its pid file and sockets."""

    pidfile: str
    qmp_socket: str
    serial_socket: str
    #: everything the guest writes on its serial port (empty: not kept)
    serial_log: str = ""


@dataclass(frozen=True)
class NicBackend:
    """How one NIC reaches the network: a tap device or qemu's user mode."""

    kind: str            # NETDEV_TAP or NETDEV_USER
    ifname: str = ""     # the tap device name (NETDEV_TAP)


def escape_option(value: str) -> str:
    """A value safe inside a qemu ``key=value,...`` option (commas doubled)."""
    return value.replace(",", ",,")


def _param(hvp: dict[str, Any], name: str, default: Any) -> Any:
    value = hvp.get(name, default)
    return default if value is None else value


def kernel_command_line(hvp: dict[str, Any]) -> str:
    """``root=<root_path> <kernel_args>`` plus the serial console when enabled."""
    words = []
    root = str(_param(hvp, "root_path", ""))
    if root:
        words.append(f"root={root}")
    args = str(_param(hvp, "kernel_args", ""))
    if args:
        words.append(args)
    if _param(hvp, "serial_console", True):
        words.append(f"console=ttyS0,{int(_param(hvp, 'serial_speed', 38400))}")
    return " ".join(words)


def _machine(hvp: dict[str, Any]) -> list[str]:
    machine = str(_param(hvp, "machine_version", ""))
    acpi = bool(_param(hvp, "acpi", True))
    if not machine and acpi:
        return []
    opt = machine or "pc"
    if not acpi:
        opt += ",acpi=off"
    return ["-machine", opt]


def _firmware(hvp: dict[str, Any], pflash: tuple[str, str] | None) -> list[str]:
    """OVMF's pflash pair ``pflash`` (code, NVRAM) for ``firmware=uefi`` and the
    swtpm TPM (``tpm=tpm2``) (:mod:`ganeti.hypervisor.kvm.firmware`)."""
    argv: list[str] = []
    fw = str(_param(hvp, "firmware", firmware.FIRMWARE_BIOS))
    if fw not in firmware.FIRMWARES:
        raise errors.HypervisorError(f"Unsupported firmware {fw!r}")
    if fw == firmware.FIRMWARE_UEFI:
        if _param(hvp, "disk_type", "paravirtual") == "pflash":
            raise errors.HypervisorError("firmware=uefi uses the pflash chips itself:"
                                         " disk_type=pflash is not possible")
        if pflash is None:
            raise errors.HypervisorError("firmware=uefi: OVMF is not installed"
                                         f" ({firmware.OVMF_DIR}, Debian package ovmf)")
        argv += firmware.pflash_args(*pflash)
    tpm = str(_param(hvp, "tpm", firmware.TPM_NONE))
    if tpm not in firmware.TPMS:
        raise errors.HypervisorError(f"Unsupported tpm {tpm!r}")
    if tpm == firmware.TPM_TPM2:
        argv += firmware.tpm_args()
    return argv


def _boot(hvp: dict[str, Any]) -> list[str]:
    kernel = str(_param(hvp, "kernel_path", ""))
    if kernel:
        argv = ["-kernel", kernel]
        initrd = str(_param(hvp, "initrd_path", ""))
        if initrd:
            argv += ["-initrd", initrd]
        cmdline = kernel_command_line(hvp)
        if cmdline:
            argv += ["-append", cmdline]
        return argv
    order = str(_param(hvp, "boot_order", "disk"))
    if order not in BOOT_DEVICES:
        raise errors.HypervisorError(f"Unsupported boot_order {order!r}")
    return ["-boot", f"order={BOOT_DEVICES[order]}"]


#: the SMBIOS system serial number of ``cloud_init_source=metad``: cloud-init's NoCloud
#: over the network, seeded from ganeti-metad's address (doc/images.md)
METAD_SMBIOS_SERIAL = f"ds=nocloud-net;s=http://{constants.METAD_ADDRESS}/"


def _cloud_init_source(hvp: dict[str, Any]) -> str:
    source = str(_param(hvp, "cloud_init_source", constants.HT_KVM_CLOUD_INIT_SEED))
    if source not in (constants.HT_KVM_CLOUD_INIT_SEED, constants.HT_KVM_CLOUD_INIT_METAD):
        raise errors.HypervisorError(f"Unsupported cloud_init_source {source!r}")
    return source


def _smbios(hvp: dict[str, Any], seed: str | None) -> list[str]:
    """``-smbios`` naming the metadata service, for an instance with a seed and
    ``cloud_init_source=metad``."""
    if not seed or _cloud_init_source(hvp) != constants.HT_KVM_CLOUD_INIT_METAD:
        return []
    return ["-smbios", f"type=1,serial={escape_option(METAD_SMBIOS_SERIAL)}"]


def _disks(hvp: dict[str, Any], disks: Sequence[str], seed: str | None = None) -> list[str]:
    disk_type = str(_param(hvp, "disk_type", "paravirtual"))
    if disk_type not in DISK_INTERFACES:
        raise errors.HypervisorError(f"Unsupported disk_type {disk_type!r}")
    cache = str(_param(hvp, "disk_cache", _CACHE_DEFAULT))
    argv: list[str] = []
    for idx, path in enumerate(disks):
        opt = (f"file={escape_option(path)},format=raw,if={DISK_INTERFACES[disk_type]}"
               f",id=disk{idx}")
        mode = disk_cache_for(cache, path)
        if mode != _CACHE_DEFAULT:
            opt += f",cache={mode}"
        argv += ["-drive", opt]
    cdrom = str(_param(hvp, "cdrom_image_path", ""))
    if cdrom:
        argv += ["-drive", f"file={escape_option(cdrom)},format=raw,media=cdrom,"
                           "if=ide,readonly=on,id=cdrom0"]
    if seed and _cloud_init_source(hvp) == constants.HT_KVM_CLOUD_INIT_SEED:
        # the cloud-init NoCloud seed (doc/images.md): a read-only cdrom of its own
        argv += ["-drive", f"file={escape_option(seed)},format=raw,media=cdrom,"
                           "if=ide,readonly=on,id=cidata"]
    return argv


def _nics(hvp: dict[str, Any], nics: Sequence[base.NicSpec],
          backends: Sequence[NicBackend]) -> list[str]:
    if len(backends) != len(nics):
        raise errors.ProgrammerError("one NicBackend per NIC is needed")
    nic_type = str(_param(hvp, "nic_type", "paravirtual"))
    if nic_type not in NIC_MODELS:
        raise errors.HypervisorError(f"Unsupported nic_type {nic_type!r}")
    vhost = bool(_param(hvp, "vhost_net", False))
    argv: list[str] = []
    for idx, (nic, backend) in enumerate(zip(nics, backends)):
        if backend.kind == NETDEV_TAP:
            if not backend.ifname:
                raise errors.ProgrammerError("a tap NIC needs an interface name")
            netdev = (f"tap,id=net{idx},ifname={escape_option(backend.ifname)}"
                      ",script=no,downscript=no")
            if vhost:
                netdev += ",vhost=on"
        elif backend.kind == NETDEV_USER:
            netdev = f"user,id=net{idx}"
        else:
            raise errors.ProgrammerError(f"unknown NIC backend {backend.kind!r}")
        argv += ["-netdev", netdev,
                 "-device", f"{NIC_MODELS[nic_type]},netdev=net{idx},mac={nic.mac},id=nic{idx}"]
    return argv


def _display(hvp: dict[str, Any], vnc_port: int | None) -> list[str]:
    bind = str(_param(hvp, "vnc_bind_address", ""))
    if not bind:
        return ["-display", "none"]
    if vnc_port is None or vnc_port < VNC_BASE_PORT:
        raise errors.HypervisorError(
            f"VNC on {bind} needs a network port of at least {VNC_BASE_PORT}")
    host = f"[{bind}]" if ":" in bind else bind
    vnc = f"{host}:{vnc_port - VNC_BASE_PORT}"
    argv = ["-vga", "std"]
    if _param(hvp, "vnc_tls", False):
        x509 = str(_param(hvp, "vnc_x509_path", ""))
        if x509:
            verify = "on" if _param(hvp, "vnc_x509_verify", False) else "off"
            creds = (f"tls-creds-x509,id={VNC_TLS_ID},dir={escape_option(x509)},"
                     f"endpoint=server,verify-peer={verify}")
        else:
            creds = f"tls-creds-anon,id={VNC_TLS_ID},endpoint=server"
        argv += ["-object", creds]
        vnc += f",tls-creds={VNC_TLS_ID}"
    if _param(hvp, "vnc_password_file", ""):
        vnc += ",password=on"
    argv += ["-vnc", vnc]
    keymap = str(_param(hvp, "keymap", ""))
    if keymap:
        argv += ["-k", keymap]
    return argv


def build_command(spec: base.InstanceSpec, disks: Sequence[str], files: RuntimeFiles, *,
                  binary: str, accel: str, nic_backends: Sequence[NicBackend] = (),
                  startup_paused: bool = False, incoming: str | None = None,
                  vnc_port: int | None = None, seed: str | None = None,
                  pflash: tuple[str, str] | None = None) -> list[str]:
    """The argv starting ``spec`` (see the module docstring for fixed choices).

    ``seed`` is the instance's cloud-init seed ISO, attached as a cdrom (or, with
    ``cloud_init_source=metad``, replaced by the SMBIOS serial naming the
    metadata service);
    ``pflash`` OVMF's code and the instance's NVRAM (``firmware=uefi``).

    ``accel`` is :data:`ACCEL_KVM` or :data:`ACCEL_TCG`; ``incoming`` a
    migration URI (the target side waits paused for the memory stream);
    ``vnc_port`` the instance's network port when ``vnc_bind_address`` is
    set.  Raises :class:`errors.HypervisorError` for unsupported values.
    """
    if accel not in (ACCEL_KVM, ACCEL_TCG):
        raise errors.ProgrammerError(f"unknown acceleration {accel!r}")
    hvp = dict(spec.hvparams)
    argv = [binary, "-name", spec.name, "-nodefaults", "-daemonize",
            "-pidfile", files.pidfile, "-accel", accel]
    if spec.uuid:
        argv += ["-uuid", spec.uuid]
    argv += _machine(hvp)
    cpu_type = str(_param(hvp, "cpu_type", ""))
    if cpu_type:
        argv += ["-cpu", cpu_type]
    argv += ["-m", str(spec.memory), "-smp", str(spec.vcpus)]
    mem_path = str(_param(hvp, "mem_path", ""))
    if mem_path:
        argv += ["-mem-path", mem_path]
    argv += ["-chardev", f"socket,id=qmp,path={escape_option(files.qmp_socket)},"
                         "server=on,wait=off",
             "-mon", "chardev=qmp,mode=control"]
    if _param(hvp, "serial_console", True):
        serial = (f"socket,id=serial0,path={escape_option(files.serial_socket)},"
                  "server=on,wait=off")
        if files.serial_log:
            serial += f",logfile={escape_option(files.serial_log)},logappend=on"
        argv += ["-chardev", serial, "-serial", "chardev:serial0"]
    argv += ["-no-shutdown"]
    if _param(hvp, "reboot_behavior", "reboot") == "exit":
        argv += ["-no-reboot"]
    argv += _display(hvp, vnc_port)
    usb_mouse = str(_param(hvp, "usb_mouse", ""))
    if usb_mouse:
        argv += ["-usb", "-device", f"usb-{usb_mouse}"]
    argv += _firmware(hvp, pflash)
    argv += _boot(hvp)
    argv += _smbios(hvp, seed)
    argv += _disks(hvp, disks, seed)
    argv += _nics(hvp, spec.nics, nic_backends)
    # the memory balloon (gnt-instance modify --runtime-memory)
    argv += ["-device", f"virtio-balloon-pci,id={BALLOON_ID}"]
    if _param(hvp, "security_model", "none") == "user":
        domain = str(_param(hvp, "security_domain", ""))
        if not domain:
            raise errors.HypervisorError("security_model=user needs a security_domain")
        argv += ["-runas", domain]
    if startup_paused or incoming:
        argv += ["-S"]
    if incoming:
        argv += ["-incoming", incoming]
    extra = str(_param(hvp, "kvm_extra", ""))
    if extra:
        try:
            argv += shlex.split(extra)
        except ValueError as exc:
            raise errors.HypervisorError(f"Invalid kvm_extra {extra!r}: {exc}") from exc
    return argv


def cpu_affinity(cpu_mask: str, vcpus: int) -> list[list[int] | None]:
    """The CPUs each vCPU thread may run on (``None``: unrestricted).

    One list in the mask applies to every vCPU; a per-vCPU mask
    (``"0:1"``) must have exactly ``vcpus`` entries.  Raises
    :class:`errors.HypervisorError` otherwise.
    """
    try:
        masks = hvchecks.parse_cpu_mask(cpu_mask)
    except ValueError as exc:
        raise errors.HypervisorError(f"Invalid cpu_mask {cpu_mask!r}: {exc}") from exc
    if len(masks) == 1:
        return masks * vcpus
    if len(masks) != vcpus:
        raise errors.HypervisorError(
            f"cpu_mask {cpu_mask!r} has {len(masks)} entries for {vcpus} vCPUs")
    return masks


def migration_parameters(hvp: dict[str, Any]) -> dict[str, int]:
    """QMP ``migrate-set-parameters`` arguments from the hvparams.

    ``migration_bandwidth`` is MiB/s (qemu wants bytes/s), and
    ``migration_downtime`` milliseconds, as upstream defines them.
    """
    return {"max-bandwidth": int(_param(hvp, "migration_bandwidth", 32)) * 1024 * 1024,
            "downtime-limit": int(_param(hvp, "migration_downtime", 30))}
