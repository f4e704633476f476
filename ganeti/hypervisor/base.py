"""The hypervisor interface every implementation follows.

A hypervisor plug-in runs on a node, inside the node daemon, and is only
ever called by ``ganeti.backend``.  It never sees config objects: the backend
turns an ``objects.Instance`` into an :class:`InstanceSpec` (plain values,
already *filled* hvparams/beparams) and the disks it activated into a list
of block device paths.  Everything a method returns is plain JSON data so
it can travel back over node RPC unchanged.

Writing a new hypervisor
------------------------
1. Subclass :class:`BaseHypervisor` in ``ganeti/hypervisor/<name>.py``.
2. Fill :attr:`BaseHypervisor.PARAMETERS` with ``name -> ParamSpec``; the
   default :meth:`check_parameter_syntax` (pure, runs on the master) checks
   names and values against it.  Override :meth:`validate_parameters` for
   checks that need the node (a kernel file exists, a bridge is up...).
3. Implement every abstract method.  Keep state where the node can find it
   again after a node-daemon restart (the fake keeps one JSON file per
   instance; kvm would use pid files and the monitor socket): the daemon
   forks per request, so nothing may live in memory between calls.
4. Raise :class:`errors.HypervisorError` with a message that names the
   instance for every refusal or failure; never let ``OSError`` escape.
5. Register its module and class name in ``HYPERVISORS`` in
   ``ganeti/hypervisor/__init__.py``.

Migration is split into steps so that node RPC can carry the data between
the two nodes; the master drives them in this order::

    source: info = migration_info(name)
    target: accepted = accept_instance(spec, info, target_address, block_devices)
    source: migrate_instance(name, target_node, target_address, live, accepted)
    source: get_migration_status(name)   # polled until completed/failed/cancelled
    target: finalize_migration_dst(spec, info, success)
    source: finalize_migration_src(name, success, live)

Each step depends only on local state plus its arguments.  ``accepted``
(what the target answers, e.g. the port it listens on) travels to the
source unchanged.  ``gnt-instance migrate --cleanup`` calls the finalize
steps again after an interrupted migration, with ``info`` empty: they
must cope with a half-done state (doc/kvm.md, "Migration").
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ganeti import constants, errors, pathutils

__all__ = [
    "NicSpec", "InstanceSpec", "ParamSpec", "VncTls", "BaseHypervisor",
    "HV_STATE_RUNNING", "HV_STATE_PAUSED", "HV_STATE_SHUTDOWN", "HV_STATE_CRASHED",
    "HV_STATE_INCOMING", "HV_STATE_MIGRATING", "HV_STATES",
    "MIGRATION_STATUS_ACTIVE", "MIGRATION_STATUS_COMPLETED",
    "MIGRATION_STATUS_FAILED", "MIGRATION_STATUS_CANCELLED", "MIGRATION_STATUSES",
    "CONS_MESSAGE", "CONS_SSH", "CONS_VNC", "CONS_SPICE",
    "check_migration_mode", "check_bool",
]

# Runtime states reported in get_instance_info()["state"] (sent to the master
# as "hv_state").  The master maps them to instance statuses
# (cmdlib.instance.runtime_status, doc/protocols/query.md, "Instance status"):
# "shutdown" (the guest powered itself off) becomes USER_down, "crashed"
# ERROR_down (or ADMIN_down when the instance is marked down).
HV_STATE_RUNNING = "running"
HV_STATE_PAUSED = "paused"
HV_STATE_SHUTDOWN = "shutdown"
HV_STATE_CRASHED = "crashed"
HV_STATE_INCOMING = "incoming"     # target side of a migration, not yet running
HV_STATE_MIGRATING = "migrating"   # source side of a migration in progress
HV_STATES = frozenset([HV_STATE_RUNNING, HV_STATE_PAUSED, HV_STATE_SHUTDOWN,
                       HV_STATE_CRASHED, HV_STATE_INCOMING, HV_STATE_MIGRATING])

MIGRATION_STATUS_ACTIVE = "active"
MIGRATION_STATUS_COMPLETED = "completed"
MIGRATION_STATUS_FAILED = "failed"
MIGRATION_STATUS_CANCELLED = "cancelled"
MIGRATION_STATUSES = frozenset([MIGRATION_STATUS_ACTIVE, MIGRATION_STATUS_COMPLETED,
                                MIGRATION_STATUS_FAILED, MIGRATION_STATUS_CANCELLED])

# Console kinds (get_console()["kind"]), as Ganeti names them.
CONS_MESSAGE = "msg"
CONS_SSH = "ssh"
CONS_VNC = "vnc"
CONS_SPICE = "spice"


@dataclass(frozen=True)
class NicSpec:
    """One network interface of an instance, as the hypervisor needs it."""

    mac: str
    ip: str | None = None
    mode: str = constants.NIC_MODE_BRIDGED
    link: str = ""
    uuid: str = ""
    name: str | None = None
    #: the NIC's VLAN parameter (doc/kvm.md, "NIC modes"); "" for none
    vlan: str = ""
    #: the NIC's network for the OS scripts: ``(NETWORK_NAME, ...)`` variables
    #: (doc/networks.md), empty when the NIC is on no network
    network_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class InstanceSpec:
    """What a hypervisor needs to know about an instance (filled params).

    ``memory`` is in MiB (the backend picks beparams maxmem), ``vcpus`` a
    count.  ``hvparams``/``beparams`` are the effective (filled) dicts.
    """

    name: str
    uuid: str = ""
    memory: int = 128
    vcpus: int = 1
    hvparams: dict[str, Any] = field(default_factory=dict)
    beparams: dict[str, Any] = field(default_factory=dict)
    nics: tuple[NicSpec, ...] = ()
    os: str = ""


@dataclass(frozen=True)
class VncTls:
    """How a node reaches an instance's VNC server that runs TLS (VeNCrypt).

    ``ca_file`` is the CA certificate the server's certificate is checked
    against; empty for anonymous TLS (no certificate on either side).
    ``client_cert`` and ``client_key`` are the certificate and key the node
    presents when the server checks its clients' (empty: none).
    """

    ca_file: str = ""
    client_cert: str = ""
    client_key: str = ""


@dataclass(frozen=True)
class ParamSpec:
    """One hypervisor parameter: a description and a value check.

    ``check(value)`` returns an error text, or ``None`` when the value is
    fine.  ``required`` parameters must be present in a filled dict.
    """

    doc: str
    check: Callable[[Any], str | None]
    required: bool = False


def check_migration_mode(value: Any) -> str | None:
    """ParamSpec check: one of ``live``/``non-live``."""
    if value not in constants.HT_MIGRATION_MODES:
        return f"must be one of {sorted(constants.HT_MIGRATION_MODES)}"
    return None


def check_bool(value: Any) -> str | None:
    """ParamSpec check: a boolean."""
    return None if isinstance(value, bool) else "must be a boolean"


class BaseHypervisor(abc.ABC):
    """Abstract hypervisor; one instance is built per call by the factory.

    Construction must be cheap and side-effect free: the node daemon builds
    a new object for each request (``get_hypervisor(name, paths)``).
    """

    #: hypervisor name as in constants.HYPER_TYPES
    NAME: str = ""
    #: parameter table, name -> ParamSpec (see check_parameter_syntax)
    PARAMETERS: dict[str, ParamSpec] = {}

    def __init__(self, paths: pathutils.Paths) -> None:
        self.paths = paths

    # --- parameters ---------------------------------------------------------

    @classmethod
    def check_parameter_syntax(cls, hvparams: dict[str, Any]) -> None:
        """Check ``hvparams`` without touching the node (master side, pure).

        Refuses unknown names, missing required ones and bad values with
        :class:`errors.ParameterError` naming the parameter.
        """
        for name, value in hvparams.items():
            spec = cls.PARAMETERS.get(name)
            if spec is None:
                raise errors.ParameterError(
                    f"Unknown parameter '{name}' for hypervisor {cls.NAME}", errors.ECODE_INVAL)
            problem = spec.check(value)
            if problem:
                raise errors.ParameterError(
                    f"Invalid value {value!r} for hypervisor parameter '{name}': {problem}",
                    errors.ECODE_INVAL)
        for name, spec in cls.PARAMETERS.items():
            if spec.required and name not in hvparams:
                raise errors.ParameterError(
                    f"Missing required hypervisor parameter '{name}'", errors.ECODE_INVAL)

    def validate_parameters(self, hvparams: dict[str, Any]) -> None:
        """Check ``hvparams`` on the node (files, devices...).

        The default runs the syntax check and re-raises as
        :class:`errors.HypervisorError`; override to add node checks.
        """
        try:
            self.check_parameter_syntax(hvparams)
        except errors.ParameterError as exc:
            raise errors.HypervisorError(str(exc)) from exc

    # --- lifecycle ----------------------------------------------------------

    @abc.abstractmethod
    def start_instance(self, spec: InstanceSpec, block_devices: Sequence[str],
                       startup_paused: bool = False) -> None:
        """Start ``spec`` with the given (already assembled) disk paths.

        Raises :class:`errors.HypervisorError` if it is already running or
        the node lacks resources.
        """

    @abc.abstractmethod
    def stop_instance(self, name: str, force: bool = False,
                      timeout: float | None = None) -> None:
        """Stop an instance: soft shutdown for ``timeout`` s, then hard.

        ``force`` skips the soft part.  Raises :class:`errors.HypervisorError`
        if the instance is unknown or refuses to die.
        """

    @abc.abstractmethod
    def reboot_instance(self, name: str) -> None:
        """Reboot a running instance (soft reboot inside the guest)."""

    # --- information --------------------------------------------------------

    @abc.abstractmethod
    def list_instances(self) -> list[str]:
        """Names of all instances the hypervisor knows on this node (any state)."""

    @abc.abstractmethod
    def get_instance_info(self, name: str) -> dict[str, Any] | None:
        """``{"name", "memory", "vcpus", "state", "time"}`` or None if unknown.

        ``memory`` in MiB, ``state`` one of ``HV_STATES``, ``time`` the
        seconds since start.
        """

    def get_all_instances_info(self) -> dict[str, dict[str, Any]]:
        """``name -> get_instance_info(name)`` for every known instance."""
        result: dict[str, dict[str, Any]] = {}
        for name in self.list_instances():
            info = self.get_instance_info(name)
            if info is not None:
                result[name] = info
        return result

    @abc.abstractmethod
    def get_node_info(self) -> dict[str, Any]:
        """Node resources: ``memory_total``, ``memory_free``, ``memory_dom0``
        (MiB), ``cpu_total``, ``cpu_nodes``, ``cpu_sockets``, ``cpu_dom0``."""

    @abc.abstractmethod
    def verify(self) -> str | None:
        """Check the hypervisor works on this node; an error text or None."""

    @abc.abstractmethod
    def get_console(self, spec: InstanceSpec, node_name: str) -> dict[str, Any]:
        """How an operator reaches the console of ``spec`` on ``node_name``.

        A dict with ``instance``, ``kind`` (``CONS_*``) and, depending on the
        kind, ``message``, ``host``, ``port``, ``user``, ``command``.
        """

    def get_consoles(self, spec: InstanceSpec, node_name: str) -> list[dict[str, Any]]:
        """Every console of ``spec`` on ``node_name``, the one :meth:`get_console`
        gives first (each a dict as that one's).  The default: that one alone."""
        return [self.get_console(spec, node_name)]

    def serial_console_socket(self, name: str) -> str | None:
        """The UNIX socket of the serial console of the running instance ``name``,
        or None when it has none.  The node daemon connects to it for the web
        console's broker (:mod:`ganeti.server.console`); the default has none."""
        return None

    def vnc_console_address(self, name: str) -> tuple[str, int] | None:
        """The ``(host, port)`` this node reaches the VNC server of the running
        instance ``name`` at, or None when it has none (the default).  The node
        daemon connects there for the web console's broker; browsers never
        learn it."""
        return None

    def vnc_console_tls(self, name: str) -> VncTls | None:
        """How that VNC server's TLS is reached (:class:`VncTls`), or None when it
        runs none (the default).  The node daemon then speaks VeNCrypt to it and
        plain RFB to the browser (:mod:`ganeti.http.rfb`)."""
        return None

    # --- the node ---------------------------------------------------------

    def powercycle_node(self, hvparams: dict[str, Any]) -> None:
        """Hard-reset the node this hypervisor runs on (``gnt-node powercycle``).

        Called by the node daemon after it has answered the request; every
        instance on the node is gone afterwards, as after a power cut.  The
        default refuses with :class:`errors.HypervisorError`; a hypervisor
        that can reset its host overrides it.
        """
        raise errors.HypervisorError(f"Hypervisor {self.NAME} cannot power-cycle its node")

    # --- online device changes (doc/kvm.md, "Online changes") ---------------

    def resize_disk(self, name: str, path: str, size: int) -> bool:
        """Tell the running instance ``name`` that its disk on ``path`` grew to
        ``size`` bytes (the storage layer already grew it).

        Returns whether the guest was told; the default returns False: the
        guest sees the new size when it next starts.
        """
        return False

    def hotplug_supported(self, name: str) -> None:
        """Refuse (:class:`errors.HypervisorError`) unless devices of the
        running instance ``name`` can be plugged in and out now.

        The default refuses: the hypervisor does not support hotplug.
        """
        raise errors.HypervisorError(f"Hotplug is not supported by hypervisor {self.NAME}")

    def hot_add_nic(self, name: str, nic: NicSpec, idx: int) -> None:
        """Plug ``nic`` into the running instance as its NIC ``idx``."""
        self.hotplug_supported(name)
        raise errors.ProgrammerError(f"{type(self).__name__} lacks hot_add_nic")

    def hot_del_nic(self, name: str, nic: NicSpec) -> None:
        """Unplug ``nic`` (same UUID, else same MAC) from the running instance."""
        self.hotplug_supported(name)
        raise errors.ProgrammerError(f"{type(self).__name__} lacks hot_del_nic")

    def hot_add_disk(self, name: str, path: str, uuid: str, idx: int) -> None:
        """Plug the (assembled) disk on ``path`` into the running instance as disk ``idx``."""
        self.hotplug_supported(name)
        raise errors.ProgrammerError(f"{type(self).__name__} lacks hot_add_disk")

    def hot_del_disk(self, name: str, path: str) -> None:
        """Unplug the disk on ``path`` from the running instance."""
        self.hotplug_supported(name)
        raise errors.ProgrammerError(f"{type(self).__name__} lacks hot_del_disk")

    # --- memory -------------------------------------------------------------

    @abc.abstractmethod
    def balloon_instance_memory(self, name: str, mem: int) -> None:
        """Change the memory (MiB) of a running instance."""

    # --- migration (see module docstring for the order) ---------------------

    @abc.abstractmethod
    def migration_info(self, name: str) -> dict[str, Any]:
        """Source: data the target needs to accept ``name`` (JSON-able)."""

    @abc.abstractmethod
    def accept_instance(self, spec: InstanceSpec, info: dict[str, Any], target: str,
                        block_devices: Sequence[str] = ()) -> dict[str, Any] | None:
        """Target: prepare to receive ``spec`` (``info`` from migration_info).

        ``target`` is this node's address, ``block_devices`` the disk
        paths assembled here.  The returned JSON-able dict (or None) is
        given to :meth:`migrate_instance` on the source.
        """

    @abc.abstractmethod
    def migrate_instance(self, name: str, target_node: str, target_address: str,
                         live: bool, target_info: dict[str, Any] | None = None,
                         hvparams: dict[str, Any] | None = None) -> None:
        """Source: send the instance to the target; progress via get_migration_status.

        ``target_info`` is what the target's :meth:`accept_instance`
        returned; ``hvparams`` the instance's current (filled) hvparams,
        whose migration settings apply (None: the ones it was started with).
        """

    @abc.abstractmethod
    def get_migration_status(self, name: str) -> dict[str, Any]:
        """Source: ``{"status": MIGRATION_STATUS_* or another state of a running
        migration, "info": text}`` plus, when known, ``"ram": {"transferred",
        "remaining", "total"}`` (bytes), ``"mbps"``, ``"downtime_ms"``,
        ``"total_time_ms"`` (doc/kvm.md, "Migration")."""

    @abc.abstractmethod
    def finalize_migration_dst(self, spec: InstanceSpec, info: dict[str, Any],
                               success: bool) -> None:
        """Target: make the instance run (success) or drop the incoming one."""

    @abc.abstractmethod
    def finalize_migration_src(self, name: str, success: bool, live: bool) -> None:
        """Source: forget the instance (success) or resume it (failure)."""

    # --- migration with local disks (constants.HTS_DISK_MIRROR) ---------------
    #
    # Between accept_instance and migrate_instance the master copies the
    # disks while the guest runs, and after a completed memory migration it
    # ends the copy before finalize_migration_dst resumes the target:
    #
    #     target: exports = mirror_accept(name, target_address)
    #     source: mirror_start(spec, exports)
    #     source: mirror_status(name)        # polled until "ready"
    #     ... migrate_instance / get_migration_status as above ...
    #     source: mirror_finish(name, success)
    #     target: mirror_release(name)
    #
    # The defaults refuse; a hypervisor in HTS_DISK_MIRROR overrides all five.

    def _no_disk_mirror(self, name: str) -> errors.HypervisorError:
        return errors.HypervisorError(
            f"Hypervisor {self.NAME} cannot migrate instance {name} with its disks")

    def mirror_accept(self, name: str, address: str) -> dict[str, Any]:
        """Target: offer the incoming instance's disks for writing on ``address``.

        Returns what :meth:`mirror_start` on the source needs (JSON).
        """
        raise self._no_disk_mirror(name)

    def mirror_start(self, spec: InstanceSpec, target: dict[str, Any]) -> list[str]:
        """Source: start copying every disk to ``target``; the devices copied."""
        raise self._no_disk_mirror(spec.name)

    def mirror_status(self, name: str) -> dict[str, Any]:
        """Source: ``{"status": "active"|"ready"|"failed", "info", "disks": [...]}``.

        ``disks`` entries as in the migration status (``device``, ``cur``,
        ``end``, ``ready``, ``speed``).
        """
        raise self._no_disk_mirror(name)

    def mirror_finish(self, name: str, success: bool) -> None:
        """Source: end the copy: consistently (success, guest stopped) or abort it."""
        raise self._no_disk_mirror(name)

    def mirror_release(self, name: str) -> None:
        """Target: stop offering the disks (before the guest resumes there)."""
        raise self._no_disk_mirror(name)
