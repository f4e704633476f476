"""The kvm hypervisor: qemu-system-x86_64 processes driven through QMP.

Every instance has a directory ``<kvm_run_dir>/<name>/`` with its runtime
record, pid file, sockets and serial log; :mod:`ganeti.hypervisor.kvm.rundir`
owns those files and the qemu process (nothing lives in memory: the node
daemon forks per request).  qemu is started in that directory with
relative socket names, so the 108-byte limit of UNIX socket paths does not
depend on where the node's root is (the virtual cluster's roots are long).

States come from the live process: no process (or a pid that is not our
qemu) -> ``crashed`` (ERROR_down); QMP ``shutdown`` (the guest powered
itself off, qemu runs with ``-no-shutdown``) -> ``shutdown`` (USER_down);
``running``, ``paused``, ``inmigrate`` as such.

Migration: :mod:`ganeti.hypervisor.kvm.migration` (the QMP side); a
target's qemu runs ``-incoming defer`` and its runtime record says so.
Online changes (disk growth, hotplug, the balloon):
:mod:`ganeti.hypervisor.kvm.hotplug`.

Not built yet (refused with a clear error):
routed/openvswitch NICs, ``use_chroot``, ``security_model=pool``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ganeti import constants, errors, parameters, pathutils, serializer
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import (cmdline, consoles, firmware, hotplug, migration, mirror,
                                   nicmodes, powerdown, qmp, rundir, taps, vmjobs)
from ganeti.hypervisor.kvm.rundir import RUNTIME_FILE
from ganeti.utils import meminfo as uminfo

__all__ = ["KvmHypervisor", "QEMU_BINARY", "KVM_DEVICE", "RUNTIME_FILE", "qmp_state"]

logger = logging.getLogger(__name__)

QEMU_BINARY = "qemu-system-x86_64"
KVM_DEVICE = "/dev/kvm"
#: seconds qemu gets to start (it daemonizes once its sockets exist)
START_TIMEOUT = 60.0
#: times (0.2 s apart, so 30 s) the target is asked whether it left ``inmigrate``
#: after the source reported the migration completed: a loaded target loads the
#: device state a while after the last byte arrived
_RESUME_ATTEMPTS = 150

#: QMP RunState -> our HV_STATE_*
_RUNSTATES = {
    "running": base.HV_STATE_RUNNING,
    "paused": base.HV_STATE_PAUSED,
    "prelaunch": base.HV_STATE_PAUSED,
    "debug": base.HV_STATE_PAUSED,
    "suspended": base.HV_STATE_PAUSED,
    "save-vm": base.HV_STATE_PAUSED,
    "restore-vm": base.HV_STATE_PAUSED,
    "watchdog": base.HV_STATE_PAUSED,
    "colo": base.HV_STATE_PAUSED,
    "shutdown": base.HV_STATE_SHUTDOWN,
    "inmigrate": base.HV_STATE_INCOMING,
    "finish-migrate": base.HV_STATE_MIGRATING,
    "postmigrate": base.HV_STATE_MIGRATING,
    "internal-error": base.HV_STATE_CRASHED,
    "io-error": base.HV_STATE_CRASHED,
    "guest-panicked": base.HV_STATE_CRASHED,
}


def qmp_state(status: str) -> str:
    """Our state word for a QMP ``query-status`` status (unknown -> crashed)."""
    return _RUNSTATES.get(status, base.HV_STATE_CRASHED)


def _param_check(pdef: parameters.ParamDef) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        try:
            pdef.convert(value, "kvm")
        except errors.ParameterError as exc:
            return str(exc)
        return None
    return check


class KvmHypervisor(base.BaseHypervisor):
    """Instances are qemu processes; see the module docstring for the files."""

    NAME = constants.HT_KVM
    PARAMETERS = {name: base.ParamSpec(pdef.doc, _param_check(pdef))
                  for name, pdef in parameters.HV_PARAMETERS[constants.HT_KVM].items()}

    def __init__(self, paths: pathutils.Paths, *, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 kvm_device: str = KVM_DEVICE, qmp_timeout: float = 10.0,
                 migration_ports: int = migration.PORT_RANGE,
                 unplug_timeout: float = hotplug.UNPLUG_TIMEOUT,
                 accel: str | None = None) -> None:
        super().__init__(paths)
        #: "auto", "kvm" or "tcg"; by default from $GANETI_KVM_ACCEL (doc/kvm.md)
        self.accel = accel or os.environ.get(constants.ENV_KVM_ACCEL, "") or "auto"
        self.clock = clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.kvm_device = kvm_device
        self.qmp_timeout = qmp_timeout
        #: how many ports from ``migration_port`` upward an incoming migration tries
        self.migration_ports = migration_ports
        #: seconds the guest gets to release an unplugged device
        self.unplug_timeout = unplug_timeout
        self.run_dir = paths.kvm_run_dir
        #: the instance directories and their qemu processes
        self.rundir = rundir.RunDir(self.run_dir, monotonic=monotonic, sleep=sleep,
                                    qmp_timeout=qmp_timeout)

    # --- files (rundir.py) --------------------------------------------------------

    def instance_dir(self, name: str) -> str:
        """The directory of instance ``name`` (not created)."""
        return self.rundir.instance_dir(name)

    def qmp_socket(self, name: str) -> str:
        """The QMP socket of ``name``."""
        return self.rundir.path(name, rundir.QMP_SOCKET)

    def serial_socket(self, name: str) -> str:
        """The serial console socket of ``name``."""
        return self.rundir.path(name, rundir.SERIAL_SOCKET)

    def serial_console_socket(self, name: str) -> str | None:
        """The serial console socket of a running ``name`` (None: no such socket)."""
        path = self.serial_socket(name)
        return path if os.path.exists(path) else None

    def serial_log(self, name: str) -> str:
        """The file holding everything ``name`` wrote on its serial port."""
        return self.rundir.path(name, rundir.SERIAL_LOG)

    def read_runtime(self, name: str) -> dict[str, Any] | None:
        """The persisted runtime record of ``name`` (None: not ours)."""
        return self.rundir.read_runtime(name)

    def _pid(self, name: str) -> int | None:
        """The pid of ``name``'s qemu when that process is alive and ours."""
        return self.rundir.pid(name)

    def _qmp(self, name: str) -> contextlib.AbstractContextManager[qmp.QmpClient]:
        """A QMP session with ``name``'s qemu (one seam for tests)."""
        return self.rundir.qmp(name)

    def qmp_command(self, name: str, command: str, **arguments: Any) -> Any:
        """Run one QMP command on ``name`` (for tests and operators' tools)."""
        with self.rundir.locked(name), self._qmp(name) as client:
            return client.execute(command, **arguments)

    # --- node facts -------------------------------------------------------------

    def acceleration(self) -> str:
        """``kvm`` when the KVM device can be opened read-write, else ``tcg``.

        ``accel`` other than "auto" decides instead (a node where nested
        KVM cannot boot a Linux guest runs TCG; doc/kvm.md).
        """
        if self.accel in (cmdline.ACCEL_KVM, cmdline.ACCEL_TCG):
            return self.accel
        try:
            fd = os.open(self.kvm_device, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return cmdline.ACCEL_TCG
        os.close(fd)
        return cmdline.ACCEL_KVM

    def binary(self, hvparams: dict[str, Any]) -> str:
        """The qemu binary: ``kvm_path`` when it exists, else qemu-system-x86_64."""
        path = str(hvparams.get("kvm_path") or "")
        if path and os.access(path, os.X_OK):
            return path
        found = shutil.which(QEMU_BINARY)
        if found:
            if path:
                logger.info("kvm_path %s not found, using %s", path, found)
            return found
        raise errors.HypervisorError(
            f"No qemu binary: kvm_path {path or '(empty)'} missing and {QEMU_BINARY} not on PATH")

    def _nic_kind(self, name: str, idx: int, nic: base.NicSpec) -> str:
        """A tap (doc/kvm.md, "NIC modes"); for a bridged NIC whose bridge does not
        exist, user mode (logged).  Raises for a bad mode or VLAN."""
        try:
            nicmodes.plan_up(nic.mode, nic.link, nic.vlan, "check", nic.ip,
                             communication=nicmodes.is_communication(nic.name, nic.mode))
        except errors.HypervisorError as exc:
            raise errors.HypervisorError(f"Instance {name} NIC {idx}: {exc}") from None
        if nic.mode != constants.NIC_MODE_BRIDGED or \
                os.path.isdir(f"/sys/class/net/{nic.link}/bridge"):
            return cmdline.NETDEV_TAP
        logger.info("Instance %s NIC %d: bridge %r not found, using user-mode"
                    " networking (test convenience, doc/kvm.md)", name, idx, nic.link)
        return cmdline.NETDEV_USER

    def _seed(self, name: str) -> str | None:
        """The instance's cloud-init seed when the node built one (doc/images.md)."""
        path = self.paths.cloud_init_seed(name)
        return path if os.path.exists(path) else None

    def firmware_dir(self, spec: base.InstanceSpec) -> str:
        """The instance's UEFI NVRAM and TPM state directory on this node (firmware.py)."""
        return firmware.state_dir(self.paths.kvm_firmware_dir, spec.uuid or spec.name)

    def _pflash(self, spec: base.InstanceSpec) -> tuple[str, str] | None:
        ovmf = firmware.find_ovmf()
        return (ovmf.code, firmware.nvram_path(self.firmware_dir(spec))) if ovmf else None

    def _nic_backends(self, spec: base.InstanceSpec) -> list[cmdline.NicBackend]:
        backends = []
        for idx, nic in enumerate(spec.nics):
            kind = self._nic_kind(spec.name, idx, nic)
            backends.append(cmdline.NicBackend(kind, taps.free_name(spec.name, idx)
                                               if kind == cmdline.NETDEV_TAP else ""))
        return backends

    # --- parameters -------------------------------------------------------------

    def validate_parameters(self, hvparams: dict[str, Any]) -> None:
        """Syntax, then what needs the node: files exist, supported modes."""
        super().validate_parameters(hvparams)
        for key in ("kernel_path", "initrd_path", "cdrom_image_path", "mem_path"):
            value = hvparams.get(key)
            if value and not os.path.exists(value):
                raise errors.HypervisorError(f"kvm parameter {key}: {value} does not exist")
        if hvparams.get("vnc_x509_verify") and not hvparams.get("vnc_x509_path"):
            raise errors.HypervisorError("kvm parameter vnc_x509_verify needs vnc_x509_path")
        if hvparams.get("use_chroot"):
            raise errors.HypervisorError("kvm parameter use_chroot is not supported yet")
        if hvparams.get("security_model") == "pool":
            raise errors.HypervisorError("kvm security_model=pool is not supported yet")
        if firmware.uses_uefi(hvparams) and firmware.find_ovmf() is None:
            raise errors.HypervisorError(f"kvm firmware=uefi: no OVMF in {firmware.OVMF_DIR}")
        self.binary(hvparams)

    # --- lifecycle -------------------------------------------------------------

    def start_instance(self, spec: base.InstanceSpec, block_devices: Sequence[str],
                       startup_paused: bool = False) -> None:
        """Start qemu daemonized; refuses a live instance and missing disks.

        A leftover directory of a dead or powered-off instance is cleaned
        first.  Applies ``cpu_mask`` to the vCPU threads once started.
        """
        self._launch(spec, block_devices, startup_paused=startup_paused)

    def _launch(self, spec: base.InstanceSpec, block_devices: Sequence[str], *,
                startup_paused: bool = False, incoming: str | None = None,
                accel: str | None = None, extra: dict[str, Any] | None = None,
                template: dict[str, Any] | None = None) -> None:
        """Start qemu for ``spec`` (also as a migration target: ``incoming``).

        ``accel`` forces the acceleration (a target uses the source's);
        ``extra`` is merged into the runtime record; ``template`` (a
        migration target of a hotplugged source) is the source's machine
        (hotplug.migration_template), started instead of one built from
        ``spec``.
        """
        for path in block_devices:
            if not os.path.exists(path):
                raise errors.HypervisorError(
                    f"Cannot start instance {spec.name}: disk {path} does not exist")
        hvp = dict(spec.hvparams)
        affinity = cmdline.cpu_affinity(str(hvp.get("cpu_mask") or "all"), spec.vcpus)
        binary = self.binary(hvp)
        accel = accel or self.acceleration()
        backends = self._nic_backends(spec)
        files = cmdline.RuntimeFiles(pidfile=rundir.PIDFILE, qmp_socket=rundir.QMP_SOCKET,
                                     serial_socket=rundir.SERIAL_SOCKET,
                                     serial_log=rundir.SERIAL_LOG)
        consoles.check_tls(hvp, spec.name)
        vnc_password = consoles.password(hvp, spec.name)
        vnc_port = consoles.start_port(hvp, map(self.read_runtime, self.list_instances()))
        argv = cmdline.build_command(spec, list(block_devices), files, binary=binary,
                                     accel=accel, nic_backends=backends,
                                     startup_paused=startup_paused, incoming=incoming,
                                     vnc_port=vnc_port, seed=self._seed(spec.name),
                                     pflash=self._pflash(spec))
        if template and incoming:
            built = argv      # its -vnc names this node's VNC port, not the source's
            argv, devices = hotplug.retarget(template, block_devices, binary)
            argv = consoles.with_vnc_of(argv, built) + ["-S", "-incoming", incoming]
            pflash = self._pflash(spec)
            argv = firmware.retarget(argv, *pflash) if pflash else argv
            backends = [cmdline.NicBackend(n.kind, n.ifname) for n in
                        serializer.from_data(hotplug.Devices, devices).nics]
            extra = {**(extra or {}), "devices": devices}
        with self.rundir.locked(spec.name):
            pid = self._pid(spec.name)
            if pid is not None:
                raise errors.HypervisorError(
                    f"Instance {spec.name} is already running (pid {pid})")
            logger.info("Starting instance %s with %s acceleration%s%s", spec.name, accel,
                        f" (forced by {constants.ENV_KVM_ACCEL})" if self.accel != "auto"
                        else "" if accel == cmdline.ACCEL_KVM
                        else f" ({self.kvm_device} not usable: TCG emulation)",
                        " for an incoming migration" if incoming else "")
            self.rundir.start(spec.name, argv, {
                "name": spec.name, "spec": serializer.to_data(spec),
                "disks": list(block_devices), "argv": argv, "accel": accel, "vnc_port": vnc_port,
                "start_time": self.clock(), **(extra or {})}, timeout=START_TIMEOUT,
                before=firmware.starter(self.firmware_dir(spec), hvp))
            try:
                self._attach_taps(spec, backends)
                self.rundir.pin_vcpus(spec.name, affinity)
                consoles.set_password(self._qmp, spec.name, vnc_password)
            except errors.HypervisorError:
                runtime = self.read_runtime(spec.name)
                self.rundir.kill(spec.name)
                taps.detach_all(spec.name, runtime)
                self.rundir.clean_files(spec.name, runtime_too=True)
                raise

    def vnc_console_address(self, name: str) -> tuple[str, int] | None:
        """Where this node reaches the VNC server of ``name`` (consoles.address)."""
        return consoles.address(self.read_runtime(name))

    def vnc_console_tls(self, name: str) -> base.VncTls | None:
        """How this node reaches that VNC server's TLS (consoles.tls)."""
        return consoles.tls(self.read_runtime(name))

    def _attach_taps(self, spec: base.InstanceSpec,
                     backends: Sequence[cmdline.NicBackend]) -> None:
        for nic, backend in zip(spec.nics, backends):
            if backend.kind == cmdline.NETDEV_TAP:
                taps.attach(spec.name, backend.ifname, nic)

    def _powerdown(self, name: str, timeout: float) -> bool:
        """ACPI powerdown, then wait for the guest to reach ``shutdown``.

        The power button is pressed again on :func:`powerdown.repeat_after`'s
        schedule (0.5 s, then backing off to every 3 s): a guest still
        booting (no ACPI button driver yet) drops a press, as a real
        machine's OS does.
        """
        deadline = self.monotonic() + timeout
        try:
            with self._qmp(name) as client:
                pressed, presses = self.monotonic(), 1
                client.execute("system_powerdown")
                while self.monotonic() < deadline:
                    if client.execute("query-status").get("status") == "shutdown":
                        return True
                    self.sleep(0.2)
                    if self.monotonic() - pressed >= powerdown.repeat_after(presses):
                        pressed, presses = self.monotonic(), presses + 1
                        client.execute("system_powerdown")
        except qmp.QmpError as exc:
            logger.warning("Soft shutdown of %s failed: %s", name, exc)
        return self._pid(name) is None

    def stop_instance(self, name: str, force: bool = False,
                      timeout: float | None = None) -> None:
        """ACPI powerdown for ``timeout`` s (unless ``force``), then quit, then SIGKILL.

        Removes the instance's files afterwards.  Raises
        :class:`errors.HypervisorError` for an unknown instance.
        """
        runtime = self.read_runtime(name)
        if runtime is None:
            raise errors.HypervisorError(f"Instance {name} is not running")
        with self.rundir.locked(name):
            if self._pid(name) is not None:
                soft = timeout if timeout is not None else constants.DEFAULT_SHUTDOWN_TIMEOUT
                if not force and soft > 0:
                    if self._powerdown(name, float(soft)):
                        logger.info("Instance %s powered off (ACPI)", name)
                    else:
                        logger.info("Instance %s ignored ACPI powerdown for %ss", name, soft)
                self.rundir.quit(name)
            taps.detach_all(name, runtime)
            self.rundir.clean_files(name, runtime_too=True)
            self.rundir.remove_dir(name)
        logger.info("Stopped kvm instance %s (force=%s)", name, force)

    def reboot_instance(self, name: str) -> None:
        """Reset the virtual machine (QMP ``system_reset``); the start time restarts."""
        with self.rundir.locked(name):
            runtime = self.read_runtime(name)
            if runtime is None or self._pid(name) is None:
                raise errors.HypervisorError(f"Cannot reboot instance {name}: it is not running")
            with self._qmp(name) as client:
                client.execute("system_reset")
                if client.execute("query-status").get("status") == "shutdown":
                    client.execute("cont")
            runtime["start_time"] = self.clock()
            runtime["reboots"] = int(runtime.get("reboots", 0)) + 1
            self.rundir.write_runtime(name, runtime)

    # --- information ------------------------------------------------------------

    def list_instances(self) -> list[str]:
        """Every instance with a runtime record, alive or not."""
        return self.rundir.list_instances()

    def get_instance_info(self, name: str) -> dict[str, Any] | None:
        runtime = self.read_runtime(name)
        if runtime is None:
            return None
        spec = runtime.get("spec") or {}
        info = {"name": name, "memory": int(spec.get("memory", 0)),
                "vcpus": int(spec.get("vcpus", 1)),
                "time": max(0.0, self.clock() - float(runtime.get("start_time", 0))),
                "accel": runtime.get("accel")}
        pid = self._pid(name)
        if pid is None:
            info["state"] = base.HV_STATE_CRASHED
            return info
        info["pid"] = pid
        try:
            with self.rundir.locked(name):
                if self.read_runtime(name) is None:   # stopped while we waited
                    return None
                with self._qmp(name) as client:
                    status = client.execute("query-status")
                    memory = client.execute("query-memory-size-summary")
                    cpus = client.execute("query-cpus-fast")
                    jobs = self._vm_jobs(name, client, spec)
                    balloon = hotplug.query_balloon(client)
        except qmp.QmpError as exc:
            logger.warning("Instance %s: QMP unavailable (%s); reporting it running", name, exc)
            info["state"] = base.HV_STATE_RUNNING
            return info
        info["state"] = qmp_state(str(status.get("status")))
        info["qmp_status"] = status.get("status")
        if isinstance(memory, dict) and isinstance(memory.get("base-memory"), int):
            info["memory"] = memory["base-memory"] // (1024 * 1024)
        if isinstance(cpus, list):
            info["vcpus"] = len(cpus)
        if jobs:
            info["jobs"] = jobs
        if balloon is not None:
            info["memory"] = balloon
        return info

    def _vm_jobs(self, name: str, client: qmp.QmpClient,
                 spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Running migration and block jobs (doc/progress.md, "Runtime jobs");
        block-job samples are kept in the instance's run dir for their rates."""
        samples = self.rundir.read_job_samples(name)
        raw = spec.get("hvparams")
        hvp: dict[str, Any] = raw if isinstance(raw, dict) else {}
        jobs, kept = vmjobs.runtime_jobs(
            client.execute("query-migrate"), client.execute("query-block-jobs"),
            now=self.monotonic(), samples=samples,
            bandwidth_mib=int(hvp.get("migration_bandwidth") or 0))
        if kept or samples is not None:
            self.rundir.write_job_samples(name, kept)
        return jobs

    def get_node_info(self) -> dict[str, Any]:
        meminfo = uminfo.meminfo()
        total = meminfo.get("MemTotal", 0) // 1024
        free = meminfo.get("MemAvailable", meminfo.get("MemFree", 0)) // 1024
        used = sum(int(((self.read_runtime(n) or {}).get("spec") or {}).get("memory", 0))
                   for n in self.list_instances() if self._pid(n) is not None)
        return {"memory_total": total, "memory_free": free,
                "memory_dom0": max(0, total - free - used),
                "cpu_total": os.cpu_count() or 1, "cpu_nodes": 1, "cpu_sockets": 1,
                "cpu_dom0": 1, "accel": self.acceleration()}

    def verify(self) -> str | None:
        """An error text when qemu is missing or the run dir is unusable."""
        try:
            self.binary(parameters.defaults("hv", constants.HT_KVM))
        except errors.HypervisorError as exc:
            return str(exc)
        try:
            os.makedirs(self.run_dir, mode=0o750, exist_ok=True)
        except OSError as exc:
            return f"Cannot create kvm run dir {self.run_dir}: {exc}"
        return None

    def get_console(self, spec: base.InstanceSpec, node_name: str) -> dict[str, Any]:
        """The serial console over its UNIX socket (socat on the primary), else VNC."""
        return self.get_consoles(spec, node_name)[0]

    def get_consoles(self, spec: base.InstanceSpec, node_name: str) -> list[dict[str, Any]]:
        """The serial console, then VNC (consoles.describe)."""
        return consoles.describe(spec, node_name, self.serial_socket(spec.name),
                                 self.vnc_console_address(spec.name))

    # --- online changes (doc/kvm.md, "Online changes"; the QMP side in hotplug.py) ----

    def _online(self, name: str, what: str, step: Callable[..., Any] | None,
                *args: Any) -> Any:
        """Run ``step(client, runtime, *args)`` on a live instance under its lock and
        save the runtime record it changed; returns what ``step`` returns (no
        step: only check the instance is live)."""
        with self.rundir.locked(name):
            runtime = self.read_runtime(name)
            if runtime is None or self._pid(name) is None:
                raise errors.HypervisorError(f"Cannot {what} of instance {name}:"
                                             " it is not running")
            with self._qmp(name) as client:
                status = str(client.execute("query-status").get("status"))
                if qmp_state(status) not in (base.HV_STATE_RUNNING, base.HV_STATE_PAUSED):
                    raise errors.HypervisorError(f"Cannot {what} of instance {name}:"
                                                 f" it is {status}")
                if step is None:
                    return None
                result = step(client, runtime, *args)
            self.rundir.write_runtime(name, runtime)
            return result

    def hotplug_supported(self, name: str) -> None:
        """Refuses unless ``name`` runs here (devices can only change on a live qemu)."""
        self._online(name, "hotplug devices", None)

    def resize_disk(self, name: str, path: str, size: int) -> bool:
        """QMP ``block_resize`` of the disk on ``path`` (see hotplug.resize_disk)."""
        self._online(name, "resize a disk", hotplug.resize_disk, path, size)
        return True

    def hot_add_nic(self, name: str, nic: base.NicSpec, idx: int) -> None:
        """Plug ``nic`` in as NIC ``idx`` (a tap on its bridge, else user mode)."""
        kind = self._nic_kind(name, idx, nic)
        dev = self._online(name, "hotplug a NIC", hotplug.add_nic, name, nic, idx, kind)
        if dev.kind == cmdline.NETDEV_TAP:
            taps.attach(name, dev.ifname, nic)

    def hot_del_nic(self, name: str, nic: base.NicSpec) -> None:
        """Unplug ``nic`` (found by UUID, else MAC); the guest must release it."""
        # the port as the running qemu has it (the configuration may have changed since)
        running = [n for n in ((self.read_runtime(name) or {}).get("spec") or {}).get("nics") or []
                   if (nic.uuid and n.get("uuid") == nic.uuid) or n.get("mac") == nic.mac]
        mode, link = (str(running[0].get("mode") or ""), str(running[0].get("link") or "")) \
            if running else (nic.mode, nic.link)
        dev = self._online(name, "unplug a NIC", hotplug.remove_nic, nic, self.unplug_timeout,
                           self.monotonic)
        if dev is not None and dev.ifname:
            taps.run_steps(name, dev.ifname, nicmodes.plan_down(mode, link, dev.ifname))

    def hot_add_disk(self, name: str, path: str, uuid: str, idx: int) -> None:
        """Plug the disk on ``path`` in as disk ``idx`` (virtio-blk-pci)."""
        if not os.path.exists(path):
            raise errors.HypervisorError(f"Cannot hotplug disk {path} into {name}:"
                                         " it does not exist")
        self._online(name, "hotplug a disk", hotplug.add_disk, path, uuid, idx)

    def hot_del_disk(self, name: str, path: str) -> None:
        """Unplug the disk on ``path``; the guest must release it."""
        self._online(name, "unplug a disk", hotplug.remove_disk, path, self.unplug_timeout,
                     self.monotonic)

    def balloon_instance_memory(self, name: str, mem: int) -> None:
        """Ask the guest's balloon driver to leave it ``mem`` MiB (QMP ``balloon``)."""
        self._online(name, "change the memory", hotplug.balloon, mem)

    # --- migration with local disks (mirror.py, doc/kvm.md) ------------------------

    @contextlib.contextmanager
    def _mirror_session(self, name: str) -> Iterator[qmp.QmpClient]:
        if self._pid(name) is None:
            raise errors.HypervisorError(f"Instance {name} is not running here")
        with self.rundir.locked(name), self._qmp(name) as client:
            yield client

    def mirror_accept(self, name: str, address: str) -> dict[str, Any]:
        """Target: NBD-export the incoming instance's disks on ``address``."""
        with self._mirror_session(name) as client:
            return mirror.start_exports(client, address)

    def mirror_start(self, spec: base.InstanceSpec, target: dict[str, Any]) -> list[str]:
        """Source: mirror every disk to the target's exports at ``migration_bandwidth``."""
        speed = cmdline.migration_parameters(dict(spec.hvparams))["max-bandwidth"]
        with self._mirror_session(spec.name) as client:
            return mirror.start_mirrors(client, target, speed)

    def mirror_status(self, name: str) -> dict[str, Any]:
        """Source: the state of the disk mirrors (:func:`mirror.mirror_status`)."""
        with self._mirror_session(name) as client:
            return mirror.mirror_status(client)

    def mirror_finish(self, name: str, success: bool) -> None:
        """Source: complete (success: the guest is stopped) or abort the disk mirrors."""
        with self._mirror_session(name) as client:
            if success:
                mirror.complete_mirrors(client, clock=self.monotonic, sleep=self.sleep)
            else:
                mirror.abort_mirrors(client, clock=self.monotonic, sleep=self.sleep)

    def mirror_release(self, name: str) -> None:
        """Target: stop the NBD server (a no-op when none runs or qemu is gone)."""
        if self._pid(name) is None:
            return
        with self._mirror_session(name) as client:
            mirror.stop_exports(client)

    # --- migration (doc/kvm.md, "Migration"; the QMP side in migration.py) ---------

    def _live_status(self, name: str, what: str) -> tuple[dict[str, Any], str]:
        """The runtime record and QMP run state of a live instance, or raise."""
        runtime = self.read_runtime(name)
        if runtime is None or self._pid(name) is None:
            raise errors.HypervisorError(f"Cannot {what} instance {name}: it is not running")
        with self._qmp(name) as client:
            status = str(client.execute("query-status").get("status"))
        return runtime, status

    def migration_info(self, name: str) -> dict[str, Any]:
        """Source: what the target needs to start the same machine.

        The spec, acceleration and start time of the running qemu (the
        target starts the same device model from them), and whether the
        guest runs (a paused one stays paused on the target).
        """
        with self.rundir.locked(name):
            runtime, status = self._live_status(name, "migrate")
        if status not in ("running", "paused"):
            raise errors.HypervisorError(f"Cannot migrate instance {name} in state {status}")
        return {"spec": runtime.get("spec"), "accel": runtime.get("accel"),
                "devices": hotplug.migration_template(runtime),
                "start_time": runtime.get("start_time"), "running": status == "running"}

    def accept_instance(self, spec: base.InstanceSpec, info: dict[str, Any], target: str,
                        block_devices: Sequence[str] = ()) -> dict[str, Any]:
        """Target: start qemu paused with ``-incoming defer`` and make it listen.

        The machine is the source's (``info`` from :meth:`migration_info`)
        on this node's disk paths; the port is the first free one from
        ``migration_port`` upward.  Returns ``{"address", "port"}`` for the
        source; the runtime record keeps them (``migration``), so a
        restarted node daemon knows the qemu is an incoming one.
        """
        try:
            source = serializer.from_data(base.InstanceSpec, info.get("spec"))
        except errors.SerializationError as exc:
            raise errors.HypervisorError(
                f"Invalid migration data for instance {spec.name}: {exc}") from exc
        if source.name != spec.name:
            raise errors.HypervisorError(f"Migration data of {source.name} given for {spec.name}")
        accel = str(info.get("accel") or self.acceleration())
        if accel == cmdline.ACCEL_KVM and self.acceleration() != cmdline.ACCEL_KVM:
            raise errors.HypervisorError(
                f"Instance {spec.name} runs with kvm acceleration; {self.kvm_device}"
                " is not usable on this node")
        if self._pid(spec.name) is not None:
            left = (self.migration_state(spec.name) or {}).get("role") == "target"
            raise errors.HypervisorError(
                f"Instance {spec.name} already has a qemu on this node"
                + (" (an interrupted migration's: run gnt-instance migrate --cleanup)"
                   if left else ""))
        first = int(source.hvparams.get("migration_port") or migration.DEFAULT_PORT)
        record = {"role": "target", "address": target, "run": bool(info.get("running", True))}
        self._launch(source, block_devices, incoming="defer", accel=accel,
                     extra={"migration": record}, template=info.get("devices"))
        try:
            with self.rundir.locked(spec.name):
                with self._qmp(spec.name) as client:
                    ports = migration.candidate_ports(first, self.migration_ports)
                    port = migration.listen_incoming(client.execute, target, ports)
                runtime = self.read_runtime(spec.name) or {}
                runtime["migration"] = dict(record, port=port)
                self.rundir.write_runtime(spec.name, runtime)
        except errors.HypervisorError:
            left = self.read_runtime(spec.name)
            self.rundir.drop(spec.name)
            taps.detach_all(spec.name, left)
            raise
        logger.info("Instance %s: incoming migration on %s port %d", spec.name, target, port)
        return {"address": target, "port": port}

    def migrate_instance(self, name: str, target_node: str, target_address: str,
                         live: bool, target_info: dict[str, Any] | None = None,
                         hvparams: dict[str, Any] | None = None) -> None:
        """Source: start sending ``name`` to the port the target listens on.

        Sets ``max-bandwidth``/``downtime-limit`` from ``hvparams`` (the
        current ones; else those it was started with); a non-live
        migration pauses the guest first, and so does a live one under
        TCG (:func:`migration.copies_paused`).  Returns once qemu sends;
        :meth:`get_migration_status` follows it.
        """
        with self.rundir.locked(name):
            runtime, status = self._live_status(name, "migrate")
            if status not in ("running", "paused"):
                raise errors.HypervisorError(f"Cannot migrate instance {name} in state {status}")
            hvp = dict(hvparams if hvparams is not None
                       else (runtime.get("spec") or {}).get("hvparams") or {})
            port = int((target_info or {}).get("port") or hvp.get("migration_port")
                       or migration.DEFAULT_PORT)
            uri = migration.incoming_uri(target_address, port)
            runtime["migration"] = {"role": "source", "target_node": target_node, "uri": uri,
                                    "live": live, "run": status == "running",
                                    "started": self.clock()}
            self.rundir.write_runtime(name, runtime)
            paused = migration.copies_paused(live, str(runtime.get("accel") or ""))
            with self._qmp(name) as client:
                migration.run_commands(client.execute,
                                       migration.outgoing_commands(hvp, uri, not paused))
        logger.info("Instance %s: %s migration to %s (%s) started%s", name,
                    "live" if live else "non-live", target_node, uri,
                    " (copied paused under TCG)" if live and paused else "")

    def get_migration_status(self, name: str) -> dict[str, Any]:
        """Source: qemu's ``query-migrate``, as :func:`migration.parse_status` shapes it."""
        if self._pid(name) is None:
            return {"status": base.MIGRATION_STATUS_FAILED,
                    "info": f"The qemu of instance {name} is not running"}
        try:
            with self.rundir.locked(name), self._qmp(name) as client:
                status = migration.parse_status(client.execute("query-migrate"))
                disks = mirror.status_disks(client.execute("query-block-jobs"))
        except qmp.QmpError as exc:
            return {"status": base.MIGRATION_STATUS_FAILED,
                    "info": f"Instance {name}: {exc}"}
        if disks:
            status["disks"] = disks      # a migration with disks (mirror.py)
        runtime = self.read_runtime(name) or {}
        record = runtime.get("migration")
        if isinstance(record, dict) and record.get("live") \
                and migration.copies_paused(True, str(runtime.get("accel") or "")):
            status["paused_copy"] = True   # asked live, copied paused (TCG)
        return status

    def finalize_migration_dst(self, spec: base.InstanceSpec, info: dict[str, Any],
                               success: bool) -> None:
        """Target: ``cont`` the received guest (success) or kill the incoming qemu.

        The guest is resumed unless it was paused on the source; its
        start time is the source's.  Failure removes the instance's files,
        but refuses to kill a guest running here that is not an incoming
        migration's.
        """
        name = spec.name
        if not success:
            self._drop_incoming(name)
            return
        with self.rundir.locked(name):
            runtime, _ = self._live_status(name, "finish the migration of")
            record = runtime.get("migration") or {}
            run = bool(info.get("running", record.get("run", True)))
            with self._qmp(name) as client:
                status = migration.resume(client.execute, run, time.sleep,
                                          attempts=_RESUME_ATTEMPTS)
            runtime.pop("migration", None)
            if isinstance(info.get("start_time"), (int, float)):
                runtime["start_time"] = info["start_time"]
            self.rundir.write_runtime(name, runtime)
        logger.info("Instance %s: incoming migration finished, qemu %s", name, status)

    def finalize_migration_src(self, name: str, success: bool, live: bool) -> None:
        """Source: quit qemu and remove its files (success), else make it run again.

        After a failure a transfer still going is cancelled and a guest
        that ran before (stopped for a non-live migration, or fully sent)
        is resumed with ``cont``; without a migration record (nothing of
        ours stopped it) a paused guest stays paused.
        """
        if success:
            if self.read_runtime(name) is not None:
                self.stop_instance(name, force=True)
            return
        with self.rundir.locked(name):
            runtime, _ = self._live_status(name, "resume")
            record = runtime.get("migration")
            # no record: no migration of ours touched it (an admin's pause stays)
            run = bool(record.get("run", True)) if isinstance(record, dict) else False
            with self._qmp(name) as client:
                status = migration.abort_outgoing(client.execute, run, self.sleep)
            runtime.pop("migration", None)
            self.rundir.write_runtime(name, runtime)
        logger.info("Instance %s: migration abandoned, qemu %s", name, status)

    def _drop_incoming(self, name: str) -> None:
        """Kill an incoming (or dead) qemu of ``name``; a running guest of ours stays."""
        record = self.migration_state(name) or {}
        if self._pid(name) is not None and record.get("role") != "target":
            try:
                with self.rundir.locked(name), self._qmp(name) as client:
                    status = str(client.execute("query-status").get("status"))
            except qmp.QmpError:
                status = "unknown"
            if status != "inmigrate":
                raise errors.HypervisorError(
                    f"Instance {name} runs on this node ({status}) and is not an incoming"
                    " migration; not killing it")
        runtime = self.read_runtime(name)
        self.rundir.drop(name)
        taps.detach_all(name, runtime)

    def migration_state(self, name: str) -> dict[str, Any] | None:
        """The migration record of ``name`` (role, address/port or uri), if any."""
        runtime = self.read_runtime(name)
        record = (runtime or {}).get("migration")
        return record if isinstance(record, dict) else None

