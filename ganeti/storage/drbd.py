"""The DRBD device (``drbd``): a local volume mirrored to a second node.

A ``drbd`` disk is a tree (doc/storage.md, "DRBD"): the DRBD device on top
and two ``plain`` children on each of its two nodes, the data volume (the
disk's size) and the metadata volume (:data:`META_SIZE` MiB).  Its
``logical_id`` is Ganeti's::

    [node_a_uuid, node_b_uuid, port, minor_a, minor_b, secret]

(node A is the primary when the disk is made; a failover changes the
instance's primary node, not the id).  The master adds, to the disk dict
of every node procedure, never to the config, the names and replication
addresses of both nodes::

    "dynamic_params": {"drbd_nodes": [[name_a, ip_a], [name_b, ip_b]],
                       "resync_rate": KiB/s,
                       "resync_control": {"c-plan-ahead": "0", ...}}

and the device finds its own side by the node's name (:func:`local_side`).
The ``secret`` (the HMAC key of the peers' handshake) goes only to
``drbdsetup``'s command line; no message, log line or result of this
module contains it.

The device speaks to the kernel through a :class:`DrbdBackend`, the
command lines of one DRBD generation.  :class:`Drbd84` is DRBD 8.4 (the
kernel's own module), used through ``drbdsetup-84`` and ``drbdmeta``; its
status comes from ``/proc/drbd`` (:func:`parse_proc_drbd`, pure).  A DRBD 9
backend would be another subclass (doc/storage.md says what it changes).

Commands (DRBD 8.4; resource ``resource<minor>``, volume 0):

* create: ``drbdmeta --force /dev/drbd<m> v08 <meta> 0 create-md``, then
  the device is set up as in assemble; on the primary (``on_primary``) it
  is made primary with ``--force`` after the attach and before the
  connect, so the first handshake starts the initial full sync towards
  the peer;
* assemble: ``new-resource``, ``new-minor``, ``drbdmeta /dev/drbd<m> v08
  <meta> 0 apply-al`` (replays the activity log a device taken down while
  primary leaves), ``attach <m> <data> <meta> 0 --on-io-error=detach
  --resync-rate=<KiB>k``, ``connect resource<m>
  ipv4:<local>:<port> ipv4:<peer>:<port> --protocol=C
  --cram-hmac-alg=md5 --shared-secret=<secret> --after-sb-0pri=...``
  (each step only when the device is not that far yet);
* open (the instance's primary): ``primary <m>``; close: ``secondary <m>``;
* shutdown and remove: ``down resource<m>`` (idempotent);
* grow: the data volume grows first (the tree), then ``resize <m>``;
* disconnect: ``disconnect ipv4:<local>:<port> ipv4:<peer>:<port>``; a
  live migration connects again with ``--allow-two-primaries=yes
  --ping-timeout=50 --socket-check-timeout=5``
  (:data:`DUAL_PRIMARY_PING_TIMEOUT`, :data:`SOCKET_CHECK_TIMEOUT`);
* replace the local volumes: ``detach <m>``, then (new volumes renamed in)
  ``create-md`` and attach as above: the peer copies everything over.
"""

from __future__ import annotations

import abc
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ganeti import constants, drbdopts, errors, pathutils
from ganeti.storage import base, drbd_show
from ganeti.storage.runner import CommandRunner, run_checked, system_runner

__all__ = ["DrbdStatus", "DrbdSide", "DrbdBackend", "Drbd84", "DrbdDevice", "parse_proc_drbd",
           "local_side", "dual_primary_timeouts", "META_SIZE", "PROC_DRBD", "DEFAULT_RESYNC_RATE",
           "DYNAMIC_KEY",
           "read_proc_drbd", "device_path", "DRBD_MAJOR", "HELPER_PARAM",
           "DUAL_PRIMARY_PING_TIMEOUT", "SOCKET_CHECK_TIMEOUT", "custom_options"]

#: size of the metadata volume of every DRBD disk (MiB), as Ganeti's
META_SIZE = constants.DRBD_META_SIZE
PROC_DRBD = "/proc/drbd"
#: where the kernel module keeps its usermode helper (Ganeti's drbd_usermode_helper)
HELPER_PARAM = "/sys/module/drbd/parameters/usermode_helper"
#: the block device major number of DRBD devices
DRBD_MAJOR = 147
#: KiB/s a resync may use unless the disk parameters say otherwise (Ganeti's resync-rate)
DEFAULT_RESYNC_RATE = 61440
#: the key of the master's per-call annotation in a disk dict
DYNAMIC_KEY = "dynamic_params"
#: how long (tenths of a second) a side of a dual-primary connection (a live
#: migration's) waits for the answer to its keep-alive ping before it drops the
#: connection (``connect --ping-timeout``; DRBD's own default is 5, half a second).
#: A node that stalls for longer than that (a loaded virtual machine) made its peer
#: drop a healthy connection, and with two primaries both sides then start new data
#: generations and DRBD refuses to connect them again (split brain: doc/storage.md,
#: "DRBD figures").  Single-primary connections keep DRBD's default: there such a
#: drop is a moment's bitmap resync.
DUAL_PRIMARY_PING_TIMEOUT = 50
#: how long (tenths of a second) DRBD waits, once both sockets of a new connection
#: are up, before it checks them and uses the connection (``connect
#: --socket-check-timeout``).  DRBD's 0 means "one ping timeout", which made every
#: dual-primary connection 4.5 s slower than a single-primary one; a dual-primary
#: connection sets it to DRBD's default ping timeout, the wait every single-primary
#: connection makes (doc/storage.md, "DRBD figures").
SOCKET_CHECK_TIMEOUT = 5

#: the resync controller options the master may send (``resync_control``)
RESYNC_CONTROL_KEYS = frozenset(["c-plan-ahead", "c-fill-target", "c-delay-target",
                                 "c-max-rate", "c-min-rate"])
#: connection states of a running resync
_SYNC_STATES = frozenset(["SyncSource", "SyncTarget", "PausedSyncS", "PausedSyncT"])
_MINOR_RE = re.compile(r"^\s*(\d+):\s+cs:(\S+)(?:\s+ro:(\S+)/(\S+)\s+ds:(\S+)/(\S+))?")
_SYNC_RE = re.compile(r"sync'ed:\s*([\d.]+)%")
_FINISH_RE = re.compile(r"finish:\s*(\d+):(\d+):(\d+)")
_OOS_RE = re.compile(r"\boos:(\d+)")
_SPEED_RE = re.compile(r"speed:\s*([\d,]+)")


@dataclass(frozen=True)
class DrbdStatus:
    """One minor as ``/proc/drbd`` shows it.

    ``cstate`` is the connection state (``Connected``, ``WFConnection``,
    ``StandAlone``, ``SyncSource``..., ``Unconfigured``); ``role`` and
    ``peer_role`` ``Primary``/``Secondary``/``Unknown``; ``disk`` and
    ``peer_disk`` the disk states (``UpToDate``, ``Inconsistent``,
    ``Diskless``, ``DUnknown``...); ``sync_percent``, ``est_time``
    (seconds) and ``speed`` (KiB/s) only during a resync; ``out_of_sync``
    KiB still to copy.
    """

    minor: int
    cstate: str
    role: str = ""
    peer_role: str = ""
    disk: str = ""
    peer_disk: str = ""
    sync_percent: float | None = None
    est_time: int | None = None
    out_of_sync: int = 0
    #: KiB/s of the running resync (None outside one)
    speed: int | None = None

    @property
    def configured(self) -> bool:
        return self.cstate != "Unconfigured"

    @property
    def connected(self) -> bool:
        """Talking to the peer (also while a resync runs)."""
        return self.cstate == "Connected" or self.cstate in _SYNC_STATES

    @property
    def in_resync(self) -> bool:
        return self.cstate in _SYNC_STATES

    @property
    def is_degraded(self) -> bool:
        """Not a full mirror now: peer gone, a resync running, or a side not up to date."""
        return (self.cstate != "Connected" or self.disk != "UpToDate"
                or self.peer_disk != "UpToDate")

    @property
    def ldisk_status(self) -> str:
        """Ganeti's local disk status: ``ok``, ``faulty`` (no usable local disk) or
        ``unknown`` (there, but not up to date yet)."""
        if self.disk == "UpToDate":
            return constants.LDS_OKAY
        if self.disk in ("Diskless", "Failed", ""):
            return constants.LDS_FAULTY
        return constants.LDS_UNKNOWN


def parse_proc_drbd(text: str) -> dict[int, DrbdStatus]:
    """Every minor of a ``/proc/drbd`` (DRBD 8.4 format). Pure."""
    found: dict[int, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        match = _MINOR_RE.match(line)
        if match:
            minor = int(match.group(1))
            current = {"minor": minor, "cstate": match.group(2),
                       "role": match.group(3) or "", "peer_role": match.group(4) or "",
                       "disk": match.group(5) or "", "peer_disk": match.group(6) or ""}
            found[minor] = current
            continue
        if current is None:
            continue
        if (sync := _SYNC_RE.search(line)) is not None:
            current["sync_percent"] = float(sync.group(1))
        if (finish := _FINISH_RE.search(line)) is not None:
            h, m, s = (int(g) for g in finish.groups())
            current["est_time"] = h * 3600 + m * 60 + s
        if (oos := _OOS_RE.search(line)) is not None:
            current["out_of_sync"] = int(oos.group(1))
        if (speed := _SPEED_RE.search(line)) is not None:
            current["speed"] = int(speed.group(1).replace(",", ""))
    result = {}
    for minor, fields in found.items():
        if fields["cstate"] not in _SYNC_STATES:
            fields.pop("sync_percent", None)
            fields.pop("est_time", None)
            fields.pop("speed", None)
        result[minor] = DrbdStatus(**fields)
    return result


def read_proc_drbd() -> str:
    """The text of ``/proc/drbd`` ("" when the module is not loaded)."""
    try:
        with open(PROC_DRBD, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def device_path(minor: int) -> str:
    return f"/dev/drbd{minor}"


@dataclass(frozen=True)
class DrbdSide:
    """One node's view of a DRBD disk: its minor and address, and the peer's."""

    minor: int
    address: str
    peer_minor: int
    peer_address: str
    port: int
    secret: str
    #: the disk parameters' net-custom options (checked: :mod:`ganeti.drbdopts`)
    net_options: tuple[str, ...] = ()

    def __repr__(self) -> str:   # never show the secret
        return (f"DrbdSide(minor={self.minor}, {self.address}:{self.port} <->"
                f" {self.peer_address}:{self.port})")


def _check_int(value: Any, what: str, uuid: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise errors.StorageError(f"Disk {uuid}: invalid DRBD {what}")
    return value


def local_side(disk: base.DiskSpec, hostname: str) -> DrbdSide:
    """This node's :class:`DrbdSide` of ``disk`` (found by ``hostname`` among the
    master's ``drbd_nodes``); :class:`errors.StorageError` when the disk dict
    lacks them or this node is neither end.  Pure."""
    lid = disk.logical_id
    if len(lid) != 6:
        raise errors.StorageError(f"Disk {disk.uuid}: a DRBD logical id has 6 fields,"
                                  f" not {len(lid)}")
    port = _check_int(lid[2], "port", disk.uuid)
    minors = (_check_int(lid[3], "minor", disk.uuid), _check_int(lid[4], "minor", disk.uuid))
    secret = lid[5]
    if not isinstance(secret, str) or not secret:
        raise errors.StorageError(f"Disk {disk.uuid}: no DRBD shared secret")
    nodes = disk.dynamic.get("drbd_nodes") if disk.dynamic else None
    if (not isinstance(nodes, (list, tuple)) or len(nodes) != 2
            or not all(isinstance(n, (list, tuple)) and len(n) == 2
                       and all(isinstance(x, str) and x for x in n) for n in nodes)):
        raise errors.StorageError(f"Disk {disk.uuid}: the master did not send the DRBD"
                                  " nodes' addresses")
    names = [n[0] for n in nodes]
    if hostname not in names:
        raise errors.StorageError(f"Disk {disk.uuid}: node {hostname} is not one of its"
                                  f" DRBD nodes ({', '.join(names)})")
    me = names.index(hostname)
    peer = 1 - me
    return DrbdSide(minor=minors[me], address=nodes[me][1], peer_minor=minors[peer],
                    peer_address=nodes[peer][1], port=port, secret=secret,
                    net_options=tuple(custom_options(disk, "net_custom", drbdopts.NET_OWNED)))


def custom_options(disk: base.DiskSpec, key: str, owned: frozenset[str]) -> list[str]:
    """The operator's custom options the master sent with ``disk`` (``key``:
    ``net_custom`` or ``disk_custom``), checked again here; :class:`errors.StorageError`
    when they are not options or change one the device class sets.  Pure."""
    words = disk.dynamic.get(key) if disk.dynamic else None
    if not words:
        return []
    if not isinstance(words, list):
        raise errors.StorageError(f"Disk {disk.uuid}: invalid DRBD {key}")
    try:
        return drbdopts.checked(words, owned)
    except ValueError as exc:
        raise errors.StorageError(f"Disk {disk.uuid}: DRBD {key}: {exc}") from None


def dual_primary_timeouts(net_options: Sequence[str]) -> list[str]:
    """The timeouts a dual-primary ``connect`` adds to the operator's ``net_options``:
    a ping timeout of :data:`DUAL_PRIMARY_PING_TIMEOUT` (a stalled peer does not
    cost the connection) and a socket check of :data:`SOCKET_CHECK_TIMEOUT` (the new
    connection is not held back one such ping timeout).  An operator's own
    ``--ping-timeout`` wins, and with it DRBD's socket check (the operator's too, if
    given).  Pure."""
    given = drbdopts.names(net_options)
    if "ping-timeout" in given:
        return []
    extra = [f"--ping-timeout={DUAL_PRIMARY_PING_TIMEOUT}"]
    if "socket-check-timeout" not in given:
        extra.append(f"--socket-check-timeout={SOCKET_CHECK_TIMEOUT}")
    return extra


class DrbdBackend(abc.ABC):
    """The command lines of one DRBD generation (pure: argv lists only)."""

    @abc.abstractmethod
    def disconnect_from(self, local: str, remote: str) -> list[str]:
        """Disconnect the connection between ``local`` and ``remote`` (``address:port``)."""

    @abc.abstractmethod
    def show(self, minor: int) -> list[str]:
        """The command printing the device's setup (:mod:`ganeti.storage.drbd_show`)."""

    @abc.abstractmethod
    def create_md(self, minor: int, meta: str) -> list[str]:
        """Write fresh metadata on ``meta`` for ``minor``."""

    @abc.abstractmethod
    def setup(self, side: DrbdSide, data: str, meta: str, resync_rate: int,
              status: DrbdStatus | None, resync_options: Sequence[str] = (),
              force_primary: bool = False) -> list[list[str]]:
        """The commands that take ``side`` from ``status`` (None: unconfigured) to
        attached and connecting to its peer; ``resync_options`` are the resync
        controller's attach options (``--c-plan-ahead=0`` ...).  ``force_primary``
        (a new mirror's primary): the side is made primary with force before it
        connects, so the first handshake starts the full sync (after, when it is
        connected already)."""

    @abc.abstractmethod
    def connect(self, side: DrbdSide, dual_primary: bool = False) -> list[str]:
        """Connect to the peer (with ``dual_primary``: both may be primary)."""

    @abc.abstractmethod
    def disconnect(self, side: DrbdSide) -> list[str]:
        """Stop talking to the peer (the local disk stays attached)."""

    @abc.abstractmethod
    def primary(self, minor: int, force: bool = False) -> list[str]:
        """Make ``minor`` primary (``force``: even with data not up to date)."""

    @abc.abstractmethod
    def secondary(self, minor: int) -> list[str]:
        """Make ``minor`` secondary."""

    @abc.abstractmethod
    def down(self, minor: int) -> list[str]:
        """Take ``minor`` down completely (no error when it is not configured)."""

    @abc.abstractmethod
    def resize(self, minor: int) -> list[str]:
        """Take up the grown size of the backing volume."""

    @abc.abstractmethod
    def detach(self, minor: int) -> list[str]:
        """Let go of the local disk (the device stays, diskless: I/O goes to the peer)."""


class Drbd84(DrbdBackend):
    """DRBD 8.4 through ``drbdsetup-84`` and ``drbdmeta`` (module docstring)."""

    def __init__(self, drbdsetup: str = "/lib/drbd/drbdsetup-84",
                 drbdmeta: str = "drbdmeta") -> None:
        self.drbdsetup = drbdsetup
        self.drbdmeta = drbdmeta

    @staticmethod
    def resource(minor: int) -> str:
        return f"resource{minor}"

    def show(self, minor: int) -> list[str]:
        return [self.drbdsetup, "show", str(minor)]

    def create_md(self, minor: int, meta: str) -> list[str]:
        return [self.drbdmeta, "--force", device_path(minor), "v08", meta, "0", "create-md"]

    def setup(self, side: DrbdSide, data: str, meta: str, resync_rate: int,
              status: DrbdStatus | None, resync_options: Sequence[str] = (),
              force_primary: bool = False) -> list[list[str]]:
        cmds = []
        res, m = self.resource(side.minor), str(side.minor)
        if status is None or not status.configured:
            cmds += [[self.drbdsetup, "new-resource", res],
                     [self.drbdsetup, "new-minor", res, m, "0"]]
        if status is None or status.disk in ("", "Diskless"):
            # a device taken down while primary leaves its activity log to replay
            cmds.append([self.drbdmeta, device_path(side.minor), "v08", meta, "0", "apply-al"])
            cmds.append([self.drbdsetup, "attach", m, data, meta, "0", "--on-io-error=detach",
                         f"--resync-rate={resync_rate}k", *resync_options])
        if force_primary:
            cmds.append(self.primary(side.minor, force=True))
        if status is None or status.cstate in ("Unconfigured", "StandAlone"):
            cmds.append(self.connect(side))
        return cmds

    def connect(self, side: DrbdSide, dual_primary: bool = False) -> list[str]:
        argv = [self.drbdsetup, "connect", self.resource(side.minor),
                f"ipv4:{side.address}:{side.port}", f"ipv4:{side.peer_address}:{side.port}",
                "--protocol=C", "--cram-hmac-alg=md5", f"--shared-secret={side.secret}",
                "--after-sb-0pri=discard-zero-changes", "--after-sb-1pri=consensus",
                "--after-sb-2pri=disconnect"]
        argv += side.net_options
        if dual_primary:
            argv.append("--allow-two-primaries=yes")
            argv += dual_primary_timeouts(side.net_options)
        return argv

    def disconnect(self, side: DrbdSide) -> list[str]:
        return self.disconnect_from(f"{side.address}:{side.port}",
                                    f"{side.peer_address}:{side.port}")

    def disconnect_from(self, local: str, remote: str) -> list[str]:
        return [self.drbdsetup, "disconnect", f"ipv4:{local}", f"ipv4:{remote}"]

    def primary(self, minor: int, force: bool = False) -> list[str]:
        return [self.drbdsetup, "primary", str(minor)] + (["--force"] if force else [])

    def secondary(self, minor: int) -> list[str]:
        return [self.drbdsetup, "secondary", str(minor)]

    def down(self, minor: int) -> list[str]:
        return [self.drbdsetup, "down", self.resource(minor)]

    def resize(self, minor: int) -> list[str]:
        return [self.drbdsetup, "resize", str(minor)]

    def detach(self, minor: int) -> list[str]:
        return [self.drbdsetup, "detach", str(minor)]


def _lv_path(child: base.DiskSpec) -> str:
    lid = child.logical_id
    if child.dev_type != constants.DT_PLAIN or len(lid) != 2 \
            or not all(isinstance(x, str) and x for x in lid):
        raise errors.StorageError(f"Disk {child.uuid}: a DRBD disk is built on two plain"
                                  " volumes")
    return f"/dev/{lid[0]}/{lid[1]}"


class DrbdDevice(base.BaseStorage):
    """A DRBD disk on this node: ``hostname`` picks the side (module docstring)."""

    TEMPLATE = constants.DT_DRBD8

    def __init__(self, paths: pathutils.Paths, *, hostname: str = "",
                 runner: CommandRunner = system_runner, backend: DrbdBackend | None = None,
                 read_status: Callable[[], str] = read_proc_drbd) -> None:
        super().__init__(paths)
        self.hostname = hostname
        self.runner = runner
        self.backend = backend or Drbd84()
        self.read_status = read_status

    # --- helpers -------------------------------------------------------------

    def side(self, disk: base.DiskSpec) -> DrbdSide:
        return local_side(disk, self.hostname)

    def minor_status(self, minor: int) -> DrbdStatus | None:
        """The minor's status; None when DRBD does not know it (not configured)."""
        found = parse_proc_drbd(self.read_status()).get(minor)
        return found if found is not None and found.configured else None

    def _backing(self, disk: base.DiskSpec) -> tuple[str, str]:
        if len(disk.children) != 2:
            raise errors.StorageError(f"Disk {disk.uuid}: a DRBD disk has a data and a"
                                      " metadata volume")
        return _lv_path(disk.children[0]), _lv_path(disk.children[1])

    def _run(self, argv: Sequence[str], what: str) -> str:
        return run_checked(self.runner, argv, what)

    def shown(self, minor: int) -> drbd_show.DrbdShow | None:
        """The device's setup (``drbdsetup show``); None when it cannot be read."""
        try:
            return drbd_show.parse_show(self._run(self.backend.show(minor),
                                                  f"Cannot read the setup of DRBD minor {minor}"))
        except errors.StorageError:
            return None

    def setup_mismatch(self, disk: base.DiskSpec) -> str | None:
        """How this side's device is set up otherwise than ``disk`` wants (a wrong
        peer, other volumes), or None; None too when it is not set up."""
        side = self.side(disk)
        status = self.minor_status(side.minor)
        if status is None or not status.configured:
            return None
        return self._compare_setup(disk, side)[1]

    def _compare_setup(self, disk: base.DiskSpec, side: DrbdSide
                       ) -> tuple[drbd_show.DrbdShow | None, str | None]:
        """The device's setup as shown and how it differs from ``disk`` (None: not)."""
        shown = self.shown(side.minor)
        if shown is None:
            return None, None
        data, meta = self._backing(disk)
        return shown, drbd_show.mismatch(shown, local=f"{side.address}:{side.port}",
                                         remote=f"{side.peer_address}:{side.port}",
                                         disk=data, meta=meta)

    def _setup(self, disk: base.DiskSpec, side: DrbdSide, force_primary: bool = False) -> None:
        """Bring this side as far as it is not yet (:meth:`DrbdBackend.setup`)."""
        data, meta = self._backing(disk)
        status = self.minor_status(side.minor)
        if status is not None and status.configured:
            self._fix_setup(disk, side, status)
            status = self.minor_status(side.minor)
        rate = disk.dynamic.get("resync_rate") if disk.dynamic else None
        if not isinstance(rate, int) or isinstance(rate, bool) or rate < 1:
            rate = DEFAULT_RESYNC_RATE
        control = disk.dynamic.get("resync_control") if disk.dynamic else None
        options = [f"--{k}={v}" for k, v in sorted(control.items())
                   if k in RESYNC_CONTROL_KEYS and re.fullmatch(r"\d+[ks]?", str(v))] \
            if isinstance(control, dict) else []
        options += custom_options(disk, "disk_custom", drbdopts.DISK_OWNED)
        for argv in self.backend.setup(side, data, meta, rate, status, options,
                                       force_primary=force_primary):
            self._run(argv, f"Cannot set up DRBD minor {side.minor} of disk {disk.uuid}"
                            f" ({argv[1]})")

    def _fix_setup(self, disk: base.DiskSpec, side: DrbdSide, status: DrbdStatus) -> None:
        """A device talking to the wrong peer is disconnected (to be connected to the
        right one); one on other volumes is someone else's: refused."""
        shown, wrong = self._compare_setup(disk, side)
        if shown is None or wrong is None:
            return
        data, meta = self._backing(disk)
        if shown.disk not in (None, data) or shown.meta not in (None, meta):
            raise errors.StorageError(f"Disk {disk.uuid}: DRBD minor {side.minor} {wrong};"
                                      " it is not this disk's device")
        if status.cstate != "StandAlone" and shown.local and shown.remote:
            self._run(self.backend.disconnect_from(shown.local, shown.remote),
                      f"Cannot disconnect DRBD minor {side.minor} from its wrong peer")

    # --- the device interface ------------------------------------------------

    def create(self, disk: base.DiskSpec) -> str:
        side = self.side(disk)
        if self.minor_status(side.minor) is not None:
            raise errors.StorageError(f"Disk {disk.uuid}: DRBD minor {side.minor} is already"
                                      " in use on this node")
        _, meta = self._backing(disk)
        self._run(self.backend.create_md(side.minor, meta),
                  f"Cannot write DRBD metadata of disk {disk.uuid}")
        return device_path(side.minor)

    def activate_new(self, disk: base.DiskSpec, on_primary: bool) -> None:
        """Set the new disk up and connect it; on the primary it is made primary
        with force (its data the one to keep) before it connects, so the first
        handshake already finds one side up to date and the other just created:
        the initial full sync starts with the connection.  Forced once the
        connection was up, the new data generation could cross the sides'
        handshake and leave them Connected with no resync (doc/storage.md,
        "Node evacuation")."""
        self._setup(disk, self.side(disk), force_primary=on_primary)

    def remove(self, disk: base.DiskSpec) -> None:
        self.shutdown(disk)

    def assemble(self, disk: base.DiskSpec) -> str:
        side = self.side(disk)
        self._setup(disk, side)
        return device_path(side.minor)

    def open(self, disk: base.DiskSpec, force: bool = False) -> None:
        """Make this side primary (the instance runs here)."""
        side = self.side(disk)
        self._run(self.backend.primary(side.minor, force=force),
                  f"Cannot make DRBD minor {side.minor} of disk {disk.uuid} primary")

    def close(self, disk: base.DiskSpec) -> None:
        """Make this side secondary."""
        side = self.side(disk)
        if self.minor_status(side.minor) is not None:
            self._run(self.backend.secondary(side.minor),
                      f"Cannot make DRBD minor {side.minor} of disk {disk.uuid} secondary")

    def shutdown(self, disk: base.DiskSpec) -> None:
        side = self.side(disk)
        if self.minor_status(side.minor) is None:
            return
        self._run(self.backend.down(side.minor),
                  f"Cannot shut down DRBD minor {side.minor} of disk {disk.uuid}")

    def grow(self, disk: base.DiskSpec, amount: int) -> int:
        side = self.side(disk)
        if self.minor_status(side.minor) is not None:
            self._run(self.backend.resize(side.minor),
                      f"Cannot resize DRBD minor {side.minor} of disk {disk.uuid}")
        return disk.size + amount

    def rename(self, disk: base.DiskSpec, new_logical_id: tuple[Any, ...]) -> tuple[Any, ...]:
        raise errors.StorageError(f"Disk {disk.uuid}: a DRBD disk cannot be renamed")

    def get_size(self, disk: base.DiskSpec) -> int:
        """The device's size when it is set up (from sysfs: a secondary cannot be
        opened), else its data volume's."""
        side = self.side(disk)
        if self.minor_status(side.minor) is not None:
            sectors = _sysfs_sectors(side.minor)
            if sectors:
                return sectors * 512 // base.MIB
        return _block_size(self._backing(disk)[0], disk.uuid) // base.MIB

    def get_path(self, disk: base.DiskSpec) -> str:
        return device_path(self.side(disk).minor)

    def exists(self, disk: base.DiskSpec) -> bool:
        try:
            _block_size(self._backing(disk)[1], disk.uuid)
        except errors.StorageError:
            return False
        return True

    def status(self, disk: base.DiskSpec) -> base.DeviceStatus | None:
        if not self.exists(disk):
            return None
        side = self.side(disk)
        # usable as a mirror: set up and talking to the peer (a side cut off from
        # its peer counts as not active, so that verify-disks and the watcher
        # activate the disks again, which reconnects them)
        mirror = self.minor_status(side.minor)
        active = mirror is not None and mirror.connected
        try:
            size = self.get_size(disk)
        except errors.StorageError:
            return None
        return base.DeviceStatus(path=device_path(side.minor), size=size, active=active)

    def mirror_status(self, disk: base.DiskSpec) -> DrbdStatus | None:
        """The DRBD state of this side; None when the minor is not set up."""
        return self.minor_status(self.side(disk).minor)

    def detach_local(self, disk: base.DiskSpec) -> None:
        """Let go of the local volumes (replace-disks on this node): the device stays,
        diskless, serving I/O from the peer."""
        side = self.side(disk)
        status = self.minor_status(side.minor)
        if status is not None and status.disk not in ("Diskless", ""):
            self._run(self.backend.detach(side.minor),
                      f"Cannot detach the local disk of DRBD minor {side.minor} of disk"
                      f" {disk.uuid}")

    def attach_local(self, disk: base.DiskSpec, new_metadata: bool) -> None:
        """Attach the local volumes (again); with ``new_metadata`` fresh metadata is
        written first: the peer then copies everything over (a full resync)."""
        side = self.side(disk)
        if new_metadata:
            _, meta = self._backing(disk)
            self._run(self.backend.create_md(side.minor, meta),
                      f"Cannot write DRBD metadata of disk {disk.uuid}")
        self._setup(disk, side)

    def disconnect(self, disk: base.DiskSpec) -> None:
        side = self.side(disk)
        status = self.minor_status(side.minor)
        if status is not None and status.cstate not in ("StandAlone",):
            self._run(self.backend.disconnect(side),
                      f"Cannot disconnect DRBD minor {side.minor} of disk {disk.uuid}")

    def connect(self, disk: base.DiskSpec, dual_primary: bool = False) -> None:
        side = self.side(disk)
        self._run(self.backend.connect(side, dual_primary),
                  f"Cannot connect DRBD minor {side.minor} of disk {disk.uuid}")

    def export_stream(self, disk: base.DiskSpec,
                      chunk_size: int = base.DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        return base.read_chunks(self.get_path(disk), chunk_size, disk)

    def import_stream(self, disk: base.DiskSpec, chunks: Iterable[bytes]) -> int:
        limit = self.get_size(disk) * base.MIB
        return base.write_chunks(self.get_path(disk), chunks, limit, disk)

    def verify(self) -> list[str]:
        if not os.path.exists(PROC_DRBD):
            return ["the DRBD kernel module is not loaded (no /proc/drbd)"]
        return []


def _sysfs_sectors(minor: int) -> int:
    """512-byte sectors of ``/dev/drbd<minor>`` as the kernel says (0: unknown)."""
    try:
        with open(f"/sys/block/drbd{minor}/size", encoding="ascii") as fh:
            return int(fh.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _block_size(path: str, uuid: str) -> int:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise errors.StorageError(f"Disk {uuid}: cannot open {path}: {exc.strerror}") from exc
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
