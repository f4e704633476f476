"""ConfigWriter: the owner of ``config.data`` (mutators, durability, rollback).

The rules it keeps are described in :mod:`ganeti.config`; the getters it
inherits are :class:`ganeti.config.reader.ConfigReader`'s.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import uuid as uuidlib
from typing import Any, Callable, Iterable, Iterator

from ganeti import constants, errors, serializer
from ganeti.config import file as configfile
from ganeti.config.commit import Change, Publications, Snapshot, clone, publish
from ganeti.config.netusers import (Holding, NetUsers, apply_to_pools, nic_holdings,
                                    pick_address)
from ganeti.config.reader import ConfigReader
from ganeti.config.file import load_config_data, sync_members as _sync_members
from ganeti.objects import NIC, Cluster, ConfigData, Disk, Instance, Network, Node, NodeGroup
from ganeti.utils.groupcommit import GroupCommitter

__all__ = ["ConfigWriter", "OnChange", "WriteFn", "load_config_data"]

#: past this many entries, touch records of durable changes are dropped
_TOUCHED_PRUNE = 4096

logger = logging.getLogger(__name__)

#: ``on_change(data, serial)``: the bytes just written and the config serial they hold
OnChange = Callable[[bytes, int], None]
#: ``write_fn(path, data)``: durably replace ``path`` (default: atomic write + fsync)
WriteFn = Callable[[str, bytes], None]


class ConfigWriter(ConfigReader):
    """Thread-safe owner of the cluster configuration; see :mod:`ganeti.config`."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.time,
                 on_change: OnChange | None = None,
                 rng: random.Random | None = None,
                 write_fn: WriteFn | None = None,
                 on_write: Callable[[float, int], None] | None = None) -> None:
        self._path = path
        self._on_write = on_write      # (seconds, bytes) of each durable write: metrics
        self._clock = clock
        self._on_change = on_change
        self._rng = rng or random.Random()
        self._write_fn: WriteFn = write_fn or configfile.write_config_file
        self._saved_by_thread = threading.local()
        raw, data = configfile.read_config(path)
        super().__init__(data, threading.RLock())
        # what readers see: a tree of its own, never the working one (copy on write)
        _sync_members(data)
        committed = clone(data)
        self._pubs = Publications(data.serial_no, raw, committed)
        # objects saved since the last snapshot: copied into the next published tree
        self._changed: set[Change] = set()
        # (store, uuid) -> serial of the change that last touched the object
        self._touched: dict[tuple[str, str], int] = {}
        self._broken: str | None = None
        # durable writes happen outside _lock (group commit, see the module docstring)
        self._committer = self._new_committer(self._data.serial_no)
        self._batch_depth = 0
        self._dirty = False
        self._reserved_macs: set[str] = set()
        self._reserved_uuids: set[str] = set()
        # DRBD ports and (node uuid, minor) pairs handed out but not yet in the config
        self._reserved_ports: set[int] = set()
        self._reserved_minors: set[tuple[str, int]] = set()
        # (network uuid, address) handed out by reserve_ip but not yet in the config
        self._reserved_ips: set[Holding] = set()
        # which instances hold which network addresses (rebuilt after a rollback)
        self._net_users = NetUsers(self._data.instances.values())
        # JSON of instances/disks reused while their serial_no/mtime are unchanged;
        # used by the committer's leader outside _lock, hence a lock of its own
        # (taken after _lock when both are held, never the other way round)
        self._fragments = serializer.FragmentCache(("instances", "disks"))
        self._encode_lock = threading.Lock()
        _sync_members(self._data)

    def committed(self) -> ConfigReader:
        """The committed configuration, for readers (queries, ssconf, events).

        A :class:`ConfigReader` over the tree of the newest config file on
        disk: changes in progress (an LU's in-place edits, a write not yet
        durable, a write that fails and is undone) are never in it.  Its
        objects are shared and must not be changed.  Lock-free; keep the
        reader for the whole of one answer to see one consistent serial.
        During ``on_change(data, serial)`` it is exactly the tree of
        ``serial``.
        """
        return self._pubs.committed()

    # ------------------------------------------------------------------
    # creation

    @classmethod
    def initialize(cls, path: str, data: ConfigData, *,
                   clock: Callable[[], float] = time.time,
                   on_change: OnChange | None = None,
                   rng: random.Random | None = None,
                   write_fn: WriteFn | None = None) -> ConfigWriter:
        """Write a fresh ``config.data`` from ``data`` and open it.

        Refuses (:class:`errors.ConfigurationError`) when ``path`` exists.
        Zero ``ctime``/``mtime``/``serial_no`` fields are filled in.
        """
        now = clock()
        if data.serial_no <= 0:
            data.serial_no = 1
        objs: list[Any] = [data, data.cluster, *data.nodes.values(), *data.nodegroups.values(),
                           *data.instances.values(), *data.disks.values(), *data.networks.values()]
        for obj in objs:
            if not obj.ctime:
                obj.ctime = now
            if not obj.mtime:
                obj.mtime = now
            if obj is not data and obj.serial_no <= 0:
                obj.serial_no = 1
        _sync_members(data)
        configfile.create_config_file(path, serializer.dumps_bytes(data))
        return cls(path, clock=clock, on_change=on_change, rng=rng, write_fn=write_fn)

    # ------------------------------------------------------------------
    # internals

    def _save(self) -> None:
        """Bump the serial and queue a snapshot (or defer to the end of the batch)."""
        self._data.serial_no += 1
        self._data.mtime = self._clock()
        if self._batch_depth:
            self._dirty = True
            return
        self._snapshot()

    def _new_committer(self, durable_serial: int) -> GroupCommitter[Snapshot]:
        return GroupCommitter(self._durable_write, after_write=self._notify,
                              durable_serial=durable_serial)

    def _snapshot(self) -> None:
        """Publish the saved objects (config lock held) and queue the tree for the committer.

        Publishing copies only the objects saved since the previous
        snapshot; the tree is serialised later, by the thread that writes
        it, and only if it is still the newest queued one then (so N
        changes within one group commit cost one serialisation).  The
        calling thread remembers the committer and the serial;
        :meth:`_mutation` waits for it to become durable once the config
        lock is released.  If the tree cannot be published, memory goes
        back to the last queued snapshot and the error is raised.
        """
        self._dirty = False
        try:
            _sync_members(self._data)
            tree = publish(self._pubs.base, self._data, self._changed)
        except (errors.GanetiError, TypeError) as exc:
            logger.error("Configuration serial %s cannot be published (%s); the change"
                         " is undone", self._data.serial_no, exc)
            queued = self._pubs.queued
            self._rollback(queued.serial, queued.raw or serializer.dumps_bytes(queued.data))
            raise errors.ConfigurationError(
                f"The configuration change cannot be saved and was undone: {exc}") from exc
        serial = self._data.serial_no
        self._committer.queue(serial, self._pubs.queue(serial, tree))
        self._changed = set()
        self._saved_by_thread.pending = (self._committer, serial)
        if len(self._touched) > _TOUCHED_PRUNE:
            durable = self._pubs.durable_document[0]
            self._touched = {k: v for k, v in self._touched.items() if v > durable}

    def _encode(self, data: ConfigData) -> bytes:
        """The bytes of a published tree (any thread; the fragment cache has its own lock)."""
        with self._encode_lock:
            return self._fragments.dumps_bytes(data)

    def _check_writable(self) -> None:
        if self._broken is not None:
            raise errors.ConfigurationError(
                f"Configuration writer is unusable after a failed write of {self._path}"
                f" ({self._broken}); memory and disk may differ, restart the master daemon"
                " to reload the configuration")

    @contextlib.contextmanager
    def _mutation(self) -> Iterator[None]:
        """Config lock for a mutator; the outermost exit waits for durability."""
        tls = self._saved_by_thread
        depth = getattr(tls, "depth", 0)
        try:
            with self._lock:
                if depth == 0:
                    self._check_writable()
                tls.depth = depth + 1
                try:
                    yield
                finally:
                    tls.depth = depth
        finally:
            pending = getattr(tls, "pending", None) if depth == 0 else None
            if pending is not None:
                tls.pending = None
                committer, serial = pending
                committer.wait(serial)
                tls.serial = serial

    def _durable_write(self, serial: int, tree: Snapshot) -> None:
        """GroupCommitter ``write``: runs in one leader thread, config lock not held.

        Serialises the snapshot (the newest queued: every older one is
        carried by it and never serialised) and writes it.  On failure of
        either, rolls memory back to the last durable document (under the
        config lock) and starts a fresh committer, so that this one's
        waiters (every change not on disk) fail and later changes work.
        """
        started = time.monotonic()
        raw = b""
        try:
            tree.raw = raw = self._encode(tree.data)
            started = time.monotonic()
            self._write_fn(self._path, raw)
        except Exception as exc:
            what = "Writing" if tree.raw is not None else "Serialising"
            with self._lock:
                durable_serial, durable_raw = self._pubs.durable_document
                logger.critical("%s configuration serial %s to %s failed: %s; the"
                                " change is undone in memory, which stays at serial %s"
                                " as on disk", what, serial, self._path, exc, durable_serial)
                self._committer = self._new_committer(durable_serial)
                self._pubs.discard()
                self._rollback(durable_serial, durable_raw)
            cause = (f"Cannot write the configuration file {self._path}: {exc}"
                     if tree.raw is not None else f"The change cannot be serialised: {exc}")
            raise errors.ConfigurationError(
                f"{cause}; the change was not saved and has been undone (the"
                f" configuration stays at serial {durable_serial})") from exc
        except BaseException as exc:
            with self._lock:
                self._broken = str(exc) or type(exc).__name__
            logger.critical("Writing configuration serial %s to %s was interrupted: %r;"
                            " further changes are refused until the master daemon"
                            " reloads the configuration", serial, self._path, exc)
            raise
        if self._on_write is not None:
            self._on_write(time.monotonic() - started, len(raw))

    def _rollback(self, serial: int, raw: bytes) -> None:
        """Put the tree back to the document ``raw`` of ``serial`` (config lock held).

        Objects touched by a later change get their fields back in place
        (holders of the working objects keep valid references), objects added
        later are dropped and removed ones restored.  If this fails the
        writer is broken (see the module docstring).
        """
        old = None
        try:
            old = configfile.decode_config(raw)
            self._touched = configfile.restore_tree(self._data, old, self._touched, serial)
        except Exception as exc:
            self._broken = f"rollback to serial {serial} failed: {exc}"
            logger.critical("Cannot roll the configuration back to serial %s: %s; every"
                            " further change is refused until the master daemon is"
                            " restarted", serial, exc)
            raise
        finally:
            self._dirty = False
            self._changed = set()
            self._invalidate()
            # from the document, as the pools are: unsaved edits of working instances
            # reach the pools with their own update()
            self._net_users = NetUsers((old or self._data).instances.values())
            with self._encode_lock:
                self._fragments.clear()

    def _notify(self, serial: int, tree: Snapshot) -> None:
        """GroupCommitter ``after_write``: publish ``serial``, then ``on_change``.

        Both under the config lock, so that ``on_change`` sees
        :meth:`committed` at exactly ``serial``.
        """
        with self._lock:
            self._pubs.durable(serial)
            if self._on_change is not None:
                self._on_change(tree.encoded(), serial)

    def last_saved_serial(self) -> int:
        """The serial of the newest durable save made by the *calling thread* (0: none).

        Set when the mutator returns (its write is durable then).  Lock-free; the job processor compares it before and after ``Exec``
        to learn whether (and which serial) an opcode wrote.
        """
        return getattr(self._saved_by_thread, "serial", 0)

    def flush(self) -> int:
        """Write the committed objects again as a new serial (``on_change`` then
        replicates it as any write); returns the serial once it is durable."""
        with self._mutation():
            self._check_writable()
            self._save()
        return self.last_saved_serial()

    def _touch(self, obj: Any, *, new: bool = False) -> None:
        key = (configfile.store_of(obj), obj.uuid)
        self._touched[key] = self._data.serial_no + 1
        self._changed.add(key)
        now = self._clock()
        if new:
            obj.ctime = obj.ctime or now
            obj.serial_no = max(obj.serial_no, 0)
        obj.serial_no += 1
        obj.mtime = now

    def _forget(self, store: str, uuid: str) -> None:
        """Remove ``uuid`` from the working ``store`` (if there) and record the change."""
        getattr(self._data, store).pop(uuid, None)
        self._changed.add((store, uuid))

    def _check_name_free(self, name: str, kind: str, own_uuid: str = "") -> None:
        if not name:
            raise errors.ConfigurationError(f"A {kind} needs a name")
        for other_kind, index in self._names().items():
            if other_kind == "network" and kind != "network":
                continue
            if other_kind != "network" and kind == "network":
                continue
            owner = index.get(name)
            if owner is not None and owner != own_uuid:
                raise errors.ConfigurationError(
                    f"Name '{name}' is already used by {other_kind} {owner}; names of"
                    " nodes, instances and node groups must be unique")

    def _uuid_in_use(self, uuid: str, *, check_nics: bool) -> bool:
        d = self._data
        if (uuid == d.cluster.uuid or uuid in d.nodes or uuid in d.instances
                or uuid in d.disks or uuid in d.nodegroups or uuid in d.networks
                or uuid in self._reserved_uuids):
            return True
        return check_nics and any(nic.uuid == uuid for inst in d.instances.values()
                                  for nic in inst.nics)

    def _new_uuid(self, obj: Any) -> None:
        if not obj.uuid:
            obj.uuid = self._generate_uuid()
        elif self._uuid_in_use(obj.uuid, check_nics=True):
            raise errors.ConfigurationError(f"UUID {obj.uuid} is already in use")

    def _generate_uuid(self) -> str:
        # 122 random bits: checking NIC UUIDs (an O(n) scan) is not worth it;
        # every UUID we hand out is remembered in _reserved_uuids
        for _ in range(100):
            new = str(uuidlib.UUID(int=self._rng.getrandbits(128), version=4))
            if not self._uuid_in_use(new, check_nics=False):
                self._reserved_uuids.add(new)
                return new
        raise errors.ConfigurationError("Cannot generate a unique UUID")

    # ------------------------------------------------------------------
    # generators

    def generate_uuid(self) -> str:
        """A new UUID, unique among the config's objects and earlier results."""
        with self._lock:
            return self._generate_uuid()

    def generate_mac(self, prefix: str | None = None) -> str:
        """A new MAC ``prefix:xx:xx:xx``, unique in the config and this session.

        ``prefix`` defaults to the cluster's ``mac_prefix``.  Raises
        :class:`errors.ConfigurationError` when no free MAC is found.
        """
        with self._lock:
            prefix = (prefix or self._data.cluster.mac_prefix).lower()
            used = self._all_macs()
            for _ in range(1000):
                tail = self._rng.getrandbits(24)
                mac = f"{prefix}:{tail >> 16:02x}:{(tail >> 8) & 0xff:02x}:{tail & 0xff:02x}"
                if mac not in used and mac not in self._reserved_macs:
                    self._reserved_macs.add(mac)
                    return mac
            raise errors.ConfigurationError(f"No free MAC address with prefix {prefix}")

    def release_macs(self, macs: Iterable[str]) -> None:
        """Drop the reservations :meth:`generate_mac` made for ``macs``.

        For the logical unit that asked, once it ended: a MAC its instance
        now uses is taken by the config itself; one of a failed job is free
        again (without this the reservations would only grow).
        """
        with self._lock:
            self._reserved_macs.difference_update(mac.lower() for mac in macs)

    def reserve_ip(self, net_uuid: str, address: str | None = None, *,
                   check: bool = True) -> str:
        """Hand out an address of network ``net_uuid`` to a logical unit until it ends.

        ``address`` None: the lowest address neither reserved in the pool
        nor handed out; else that address, refused (``OpPrereqError``) when an
        instance holds it or a job was given it, or when it is reserved
        externally unless ``check`` is False (Ganeti's ``--no-conflicts-check``).
        The pool itself changes only with the instance
        (:mod:`ganeti.config.netusers`); :meth:`release_ips` drops what was
        handed out.
        """
        with self._lock:
            net = self._data.networks.get(net_uuid)
            if net is None:
                raise errors.OpPrereqError(f"Network {net_uuid} not found", errors.ECODE_NOENT)
            address = pick_address(net, {a for n, a in self._reserved_ips if n == net_uuid},
                                   address, check=check)
            self._reserved_ips.add((net_uuid, address))
            return address

    def release_ips(self, holdings: Iterable[Holding]) -> None:
        """Drop what :meth:`reserve_ip` handed out (held by an instance by now, or free)."""
        with self._lock:
            self._reserved_ips.difference_update(holdings)

    def _sync_networks(self, inst_uuid: str, nics: list[NIC]) -> None:
        """Make the pools say what ``inst_uuid``'s NICs now hold (config lock held)."""
        before = self._net_users.held_by(inst_uuid)
        changed = self._net_users.replace(inst_uuid, nic_holdings(nics))
        if not changed:
            return
        try:
            touched = apply_to_pools(self._data.networks, changed)
        except errors.GanetiError:
            self._net_users.replace(inst_uuid, before)
            raise
        for net in touched:
            self._touch(net)

    def _drbd_in_use(self) -> tuple[set[int], set[tuple[str, int]]]:
        ports: set[int] = set(self._reserved_ports)
        minors: set[tuple[str, int]] = set(self._reserved_minors)
        for disk in self._data.disks.values():
            if disk.dev_type == constants.DT_DRBD8 and len(disk.logical_id) >= 5:
                lid = disk.logical_id
                ports.add(lid[2])
                minors.update([(lid[0], lid[3]), (lid[1], lid[4])])
        return ports, minors

    def allocate_drbd(self, node_a: str, node_b: str) -> tuple[int, int, int]:
        """``(port, minor_a, minor_b)`` for a new DRBD disk between the nodes of
        UUIDs ``node_a`` and ``node_b``: a TCP port no DRBD disk of the cluster
        uses (``constants.FIRST_DRBD_PORT``..``LAST_DRBD_PORT``) and the lowest
        minor free on each node.  They stay reserved for this session until
        :meth:`release_drbd`, so concurrent creations never share one.  Raises
        :class:`errors.ConfigurationError` when none is free.
        """
        with self._lock:
            ports, minors = self._drbd_in_use()
            port = next((p for p in range(constants.FIRST_DRBD_PORT,
                                          constants.LAST_DRBD_PORT + 1) if p not in ports), None)
            if port is None:
                raise errors.ConfigurationError("No free DRBD port left in the cluster")
            found = []
            for node in (node_a, node_b):
                minor = next((m for m in range(constants.MAX_DRBD_MINOR + 1)
                              if (node, m) not in minors), None)
                if minor is None:
                    raise errors.ConfigurationError(f"No free DRBD minor left on node {node}")
                minors.add((node, minor))
                found.append(minor)
            self._reserved_ports.add(port)
            self._reserved_minors.update([(node_a, found[0]), (node_b, found[1])])
            return port, found[0], found[1]

    def allocate_drbd_minor(self, node: str) -> int:
        """The lowest DRBD minor free on the node of UUID ``node`` (a new secondary of
        an existing disk), reserved like :meth:`allocate_drbd`'s until
        :meth:`release_drbd_minor`."""
        with self._lock:
            _, minors = self._drbd_in_use()
            minor = next((m for m in range(constants.MAX_DRBD_MINOR + 1)
                          if (node, m) not in minors), None)
            if minor is None:
                raise errors.ConfigurationError(f"No free DRBD minor left on node {node}")
            self._reserved_minors.add((node, minor))
            return minor

    def release_drbd_minor(self, node: str, minor: int) -> None:
        """Drop a reservation of :meth:`allocate_drbd_minor`."""
        with self._lock:
            self._reserved_minors.discard((node, minor))

    def release_drbd(self, reservations: Iterable[tuple[str, str, int, int, int]]) -> None:
        """Drop reservations of :meth:`allocate_drbd`: ``(node_a, node_b, port, minor_a,
        minor_b)`` each (used by now, or free again: the logical unit ended)."""
        with self._lock:
            for node_a, node_b, port, minor_a, minor_b in reservations:
                self._reserved_ports.discard(port)
                self._reserved_minors.discard((node_a, minor_a))
                self._reserved_minors.discard((node_b, minor_b))

    # ------------------------------------------------------------------
    # whole-config access

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group changes: one write and one ``on_change`` at the end.

        Holds the config lock for the whole block.  If the block raises, the
        changes made so far are still written (they are already applied in
        memory).
        """
        with self._mutation():
            self._batch_depth += 1
            try:
                yield
            finally:
                self._batch_depth -= 1
                if self._batch_depth == 0 and self._dirty:
                    self._snapshot()

    def dump(self) -> bytes:
        """The config serialised exactly as it is (or will be) saved."""
        with self._lock:
            _sync_members(self._data)
            return self._encode(publish(self._pubs.base, self._data, self._changed))

    # ------------------------------------------------------------------
    # nodes

    def add_node(self, node: Node) -> None:
        """Add ``node`` (uuid generated if empty; group defaults to the default group).

        Raises :class:`errors.ConfigurationError` on a name or UUID clash or
        an unknown group.
        """
        with self._mutation():
            self._check_name_free(node.name, "node")
            if not node.group:
                node.group = self.get_default_nodegroup()
            if node.group not in self._data.nodegroups:
                raise errors.ConfigurationError(
                    f"Node {node.name}: unknown node group {node.group}")
            self._new_uuid(node)
            self._touch(node, new=True)
            self._data.nodes[node.uuid] = node
            self._index_add("node", node.name, node.uuid)
            self._save()

    def remove_node(self, uuid: str) -> None:
        """Remove a node; raises :class:`errors.ConfigurationError` if unknown."""
        with self._mutation():
            if uuid not in self._data.nodes:
                raise errors.ConfigurationError(f"Unknown node {uuid}")
            self._forget("nodes", uuid)
            self._invalidate()
            self._save()

    # ------------------------------------------------------------------
    # node groups

    def add_nodegroup(self, group: NodeGroup) -> None:
        """Add a node group; raises :class:`errors.ConfigurationError` on clashes."""
        with self._mutation():
            self._check_name_free(group.name, "node group")
            self._new_uuid(group)
            group.members = []
            self._touch(group, new=True)
            self._data.nodegroups[group.uuid] = group
            self._index_add("nodegroup", group.name, group.uuid)
            self._save()

    def remove_nodegroup(self, uuid: str) -> None:
        """Remove an empty node group.

        Raises :class:`errors.ConfigurationError` if unknown or still in use.
        """
        with self._mutation():
            group = self._data.nodegroups.get(uuid)
            if group is None:
                raise errors.ConfigurationError(f"Unknown node group {uuid}")
            members = [n.name for n in self._data.nodes.values() if n.group == uuid]
            if members:
                raise errors.ConfigurationError(
                    f"Node group {group.name} still has nodes: {', '.join(sorted(members))}")
            self._forget("nodegroups", uuid)
            self._invalidate()
            self._save()

    # ------------------------------------------------------------------
    # networks (doc/networks.md)

    def add_network(self, network: Network) -> None:
        """Add a network; raises :class:`errors.ConfigurationError` on clashes."""
        with self._mutation():
            self._check_name_free(network.name, "network")
            self._new_uuid(network)
            self._touch(network, new=True)
            self._data.networks[network.uuid] = network
            self._index_add("network", network.name, network.uuid)
            self._save()

    def remove_network(self, uuid: str) -> None:
        """Remove a network no node group is connected to.

        Raises :class:`errors.ConfigurationError` if unknown or still connected.
        """
        with self._mutation():
            network = self._data.networks.get(uuid)
            if network is None:
                raise errors.ConfigurationError(f"Unknown network {uuid}")
            groups = [g.name for g in self._data.nodegroups.values() if uuid in g.networks]
            if groups:
                raise errors.ConfigurationError(
                    f"Network {network.name} is still connected to node group(s)"
                    f" {', '.join(sorted(groups))}")
            users = [i.name for i in self._data.instances.values()
                     if any(nic.network == uuid for nic in i.nics)]
            if users:
                raise errors.ConfigurationError(
                    f"Network {network.name} is used by instance(s) {', '.join(sorted(users))}")
            self._forget("networks", uuid)
            self._invalidate()
            self._save()

    # ------------------------------------------------------------------
    # instances and disks

    def _check_disk(self, disk: Disk) -> None:
        self._new_uuid(disk)
        for node in disk.nodes:
            if node not in self._data.nodes:
                raise errors.ConfigurationError(f"Disk {disk.uuid}: unknown node {node}")

    def add_instance(self, instance: Instance, disks: list[Disk]) -> None:
        """Add an instance together with its disks.

        ``instance.disks`` is set to the UUIDs of ``disks``.  NIC UUIDs are
        generated when empty.  Raises :class:`errors.ConfigurationError` on
        a name/UUID/MAC clash or an unknown primary node.
        """
        with self._mutation():
            self._check_name_free(instance.name, "instance")
            if instance.primary_node not in self._data.nodes:
                raise errors.ConfigurationError(
                    f"Instance {instance.name}: unknown primary node {instance.primary_node}")
            macs = self._all_macs()
            new_macs: set[str] = set()
            for nic in instance.nics:
                mac = nic.mac.lower()
                if mac and (mac in macs or mac in new_macs):
                    raise errors.ConfigurationError(
                        f"Instance {instance.name}: MAC {nic.mac} is already in use")
                if mac:
                    new_macs.add(mac)
                if nic.network and nic.network not in self._data.networks:
                    raise errors.ConfigurationError(
                        f"Instance {instance.name}: unknown network {nic.network}")
            self._new_uuid(instance)
            for nic in instance.nics:
                if not nic.uuid:
                    nic.uuid = self._generate_uuid()
            for disk in disks:
                self._check_disk(disk)
            self._sync_networks(instance.uuid, instance.nics)   # may refuse: nothing added yet
            for disk in disks:
                self._touch(disk, new=True)
                self._data.disks[disk.uuid] = disk
            instance.disks = [d.uuid for d in disks]
            self._touch(instance, new=True)
            self._data.instances[instance.uuid] = instance
            macs.update(new_macs)
            self._index_add("instance", instance.name, instance.uuid)
            self._save()

    def remove_instance(self, uuid: str) -> None:
        """Remove an instance and its disks."""
        with self._mutation():
            inst = self._get_instance(uuid)
            self._sync_networks(uuid, [])
            for disk in inst.disks:
                self._forget("disks", disk)
            self._forget("instances", uuid)
            self._invalidate()
            self._save()

    def rename_instance(self, uuid: str, new_name: str) -> None:
        """Rename an instance; raises :class:`errors.ConfigurationError` on a clash."""
        with self._mutation():
            inst = self._get_instance(uuid)
            self._check_name_free(new_name, "instance", own_uuid=uuid)
            inst.name = new_name
            self._invalidate()
            self._touch(inst)
            self._save()

    def add_instance_disk(self, inst_uuid: str, disk: Disk, idx: int | None = None) -> None:
        """Attach a new disk to an instance at ``idx`` (default: at the end)."""
        with self._mutation():
            inst = self._get_instance(inst_uuid)
            self._check_disk(disk)
            self._touch(disk, new=True)
            self._data.disks[disk.uuid] = disk
            if idx is None:
                inst.disks.append(disk.uuid)
            else:
                inst.disks.insert(idx, disk.uuid)
            self._touch(inst)
            self._save()

    def remove_instance_disk(self, inst_uuid: str, disk_uuid: str) -> None:
        """Detach and forget a disk of an instance."""
        with self._mutation():
            inst = self._get_instance(inst_uuid)
            if disk_uuid not in inst.disks:
                raise errors.ConfigurationError(
                    f"Disk {disk_uuid} does not belong to instance {inst.name}")
            inst.disks.remove(disk_uuid)
            self._forget("disks", disk_uuid)
            self._touch(inst)
            self._save()

    def set_instance_admin_state(self, uuid: str, state: str,
                                 source: str = constants.ADMIN_SOURCE) -> None:
        """Set the administrative state (``up``/``down``/``offline``) of an instance."""
        if state not in constants.ADMINST_ALL:
            raise errors.ConfigurationError(f"Invalid admin state {state!r}")
        with self._mutation():
            inst = self._get_instance(uuid)
            if inst.admin_state == state and inst.admin_state_source == source:
                return
            inst.admin_state = state
            inst.admin_state_source = source
            self._touch(inst)
            self._save()

    def set_instance_disks_active(self, uuid: str, active: bool) -> None:
        """Record whether the instance's disks are assembled."""
        with self._mutation():
            inst = self._get_instance(uuid)
            if inst.disks_active == active:
                return
            inst.disks_active = active
            self._touch(inst)
            self._save()

    # ------------------------------------------------------------------
    # job filter rules (doc/jobfilters.md)

    def set_filter(self, rule: dict[str, Any]) -> None:
        """Add or replace the job filter rule ``rule`` (keyed by its ``uuid``)."""
        with self._mutation():
            self._data.filters = {**self._data.filters, rule["uuid"]: dict(rule)}
            self._save()

    def remove_filter(self, uuid: str) -> None:
        """Remove job filter rule ``uuid``; :class:`errors.OpPrereqError` if unknown."""
        with self._mutation():
            if uuid not in self._data.filters:
                raise errors.OpPrereqError(f"Filter rule with UUID {uuid} does not exist",
                                           errors.ECODE_NOENT)
            self._data.filters = {u: r for u, r in self._data.filters.items() if u != uuid}
            self._save()

    # ------------------------------------------------------------------
    # generic update

    def update(self, obj: Cluster | Node | NodeGroup | Instance | Disk | Network) -> None:
        """Save changes made to a working object returned by a getter.

        Raises :class:`errors.ConfigurationError` if ``obj`` is not the
        stored object (e.g. a copy) or its new name clashes.
        """
        with self._mutation():
            d = self._data
            stores: dict[type, tuple[dict[str, Any], str]] = {
                Node: (d.nodes, "node"), NodeGroup: (d.nodegroups, "node group"),
                Instance: (d.instances, "instance"), Disk: (d.disks, "disk"),
                Network: (d.networks, "network"),
            }
            if isinstance(obj, Cluster):
                if obj is not d.cluster:
                    raise errors.ConfigurationError("update() got a Cluster that is not the stored one")
            elif type(obj) in stores:
                store, kind = stores[type(obj)]
                if store.get(obj.uuid) is not obj:
                    raise errors.ConfigurationError(
                        f"update() got a {kind} ({obj.uuid}) that is not in the configuration")
                if not isinstance(obj, Disk):
                    self._invalidate()
                    self._check_name_free(obj.name, kind, own_uuid=obj.uuid)
                if isinstance(obj, Node) and obj.group not in d.nodegroups:
                    raise errors.ConfigurationError(
                        f"Node {obj.name}: unknown node group {obj.group}")
                if isinstance(obj, Instance):
                    self._sync_networks(obj.uuid, obj.nics)
            else:
                raise errors.ConfigurationError(
                    f"update() cannot store a {type(obj).__name__}")
            self._touch(obj)
            self._save()
