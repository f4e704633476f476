"""Copy-on-write publishing: what readers see is only ever committed config.

The writer's *working* tree (:mod:`ganeti.config.writer`) is where logical
units and mutators make their changes, in place.  Readers never look at it:
they get the *committed* tree, a separate :class:`ConfigData` that is
exactly the newest document on disk and that nobody changes once it is
published.

For every snapshot the writer builds a *published* tree with
:func:`publish`: the previous published tree, with every object that a
change saved since then (``changed``, the ``(store, uuid)`` pairs of
touched, added and removed objects) replaced by a deep copy of its
working version (or dropped), and the root's own fields copied.  Objects
nobody changed are shared between consecutive published trees, so a
snapshot costs copies of the changed objects plus one dict copy per
changed store.  That tree is what gets serialised and written: the bytes
on disk, the bytes replicated and the tree readers see are the same
thing.  In-place edits of a working object that its owner has not saved
(``cfg.update``) are in none of them.

:class:`Publications` tracks the trees: the committed one (and its bytes),
the newest queued one (what the next snapshot builds on), and the queued
ones not durable yet.  A queued tree is a :class:`Snapshot` without bytes:
it is serialised only when it is written (:meth:`Snapshot.encoded`), and
the group commit writes only the newest one queued meanwhile, so a burst
of N changes costs N cheap publications and one serialisation.  :meth:`Publications.durable` makes a queued tree
the committed one, only after its write succeeded;
:meth:`Publications.discard` forgets every queued tree after a failed
write (readers keep the committed one, which is still what is on disk).
"""

from __future__ import annotations

import copy
import dataclasses
import operator
from collections.abc import Mapping
from typing import Any

from ganeti.config.reader import ConfigReader
from ganeti.config.file import STORES
from ganeti.objects import ConfigData, NodeGroup

__all__ = ["Change", "Publications", "Snapshot", "changed_keys", "clone", "publish",
           "replaced_keys"]

#: ``(store, uuid)`` of a changed object; the store is a ``ConfigData``
#: field name (``"nodes"``, ...) or ``"cluster"``
Change = tuple[str, str]

_ROOT_FIELDS = tuple(f.name for f in dataclasses.fields(ConfigData)
                     if f.name != "cluster" and f.name not in STORES.values())


def _same(obj: Any) -> Any:
    return obj


def _copy_dict(obj: dict[Any, Any]) -> dict[Any, Any]:
    return {key: _COPIERS.get(type(value), _copier(value))(value) for key, value in obj.items()}


def _copy_list(obj: list[Any]) -> list[Any]:
    return [_COPIERS.get(type(value), _copier(value))(value) for value in obj]


def _copy_dataclass(obj: Any) -> Any:
    new = object.__new__(type(obj))
    new.__dict__.update(_copy_dict(obj.__dict__))
    return new


#: type -> its copy function; config dataclasses are added on first sight
_COPIERS: dict[type, Any] = {str: _same, int: _same, float: _same, bool: _same,
                             type(None): _same, bytes: _same,
                             dict: _copy_dict, list: _copy_list}


def _copier(obj: Any) -> Any:
    """The copy function for ``obj``'s type (registered for next time)."""
    kind = type(obj)
    if dataclasses.is_dataclass(kind) and not hasattr(kind, "__slots__"):
        _COPIERS[kind] = _copy_dataclass
        return _copy_dataclass
    return copy.deepcopy      # anything else (sets, private values, ...)


def clone(obj: Any) -> Any:
    """A deep copy of a config object: shares nothing mutable with ``obj``.

    Immutable values (strings, numbers) are shared, so a copy costs its
    containers only.  Config dataclasses, lists and dicts are copied field
    by field (about twice as fast as :func:`copy.deepcopy`, which is the
    fallback for anything else).
    """
    return _COPIERS.get(type(obj), _copier(obj))(obj)


def _members(nodes: dict[str, Any], groups: dict[str, NodeGroup]) -> dict[str, list[str]]:
    members: dict[str, list[str]] = {g: [] for g in groups}
    for node in sorted(nodes.values(), key=lambda n: n.name):
        if node.group in members:
            members[node.group].append(node.uuid)
    return members


def publish(base: ConfigData, working: ConfigData, changed: set[Change]) -> ConfigData:
    """The published tree of ``working``: ``base`` plus copies of the ``changed`` objects.

    ``base`` is the previous published tree and is not modified; the result
    shares its unchanged objects and store dicts.  Node group ``members``
    are recomputed from the published nodes whenever a node or a group
    changed.  The root's own fields (serial, times, filters) are copied
    from ``working``.
    """
    root: dict[str, Any] = {name: copy.deepcopy(getattr(working, name)) for name in _ROOT_FIELDS}
    by_store: dict[str, list[str]] = {}
    for kind, key in changed:
        by_store.setdefault(kind, []).append(key)
    root["cluster"] = clone(working.cluster) if "cluster" in by_store else base.cluster
    fresh: set[int] = set()
    for name in STORES.values():
        uuids = by_store.get(name)
        if not uuids:
            root[name] = getattr(base, name)
            continue
        current: dict[str, Any] = getattr(working, name)
        store: dict[str, Any] = dict(getattr(base, name))
        for uuid in uuids:
            obj = current.get(uuid)
            if obj is None:
                store.pop(uuid, None)
            else:
                store[uuid] = copied = clone(obj)
                fresh.add(id(copied))
        root[name] = store
    if "nodes" in by_store or "nodegroups" in by_store:
        groups: dict[str, NodeGroup] = root["nodegroups"]
        members = _members(root["nodes"], groups)
        for uuid, group in list(groups.items()):
            if group.members == members[uuid]:
                continue
            if id(group) not in fresh:
                if groups is base.nodegroups:
                    groups = root["nodegroups"] = dict(groups)
                group = groups[uuid] = clone(group)
            group.members = members[uuid]
    return ConfigData(**root)


def replaced_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str] | None:
    """Keys of ``new`` whose value is not the very object it is in ``old``.

    For two stores of committed trees (:func:`publish`): their objects are
    never changed once published, so an entry holding the same object is
    the same entry, and a store nobody changed is the same dict.  Returns
    None when the keys differ (an object added or removed, or another
    order): the caller then compares every entry.  The comparisons run
    in C (about 0.3 ms for 10,000 instances, against milliseconds for a
    Python loop over the entries, doc/scale.md).
    """
    if old is new:
        return []
    keys = list(new)
    if keys != list(old):
        return None
    same = list(map(operator.is_, old.values(), new.values()))
    replaced: list[str] = []
    pos = -1
    while True:
        try:
            pos = same.index(False, pos + 1)
        except ValueError:
            return replaced
        replaced.append(keys[pos])


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(changed, removed)`` between two stores of committed trees.

    ``changed``: the keys of ``new`` whose value is not the very object it
    is in ``old``, added keys included, in ``new``'s order; ``removed``:
    the keys of ``old`` not in ``new``, in ``old``'s order.  Like
    :func:`replaced_keys`, but also cheap when entries were added: a
    store that only grew (:func:`publish` appends new objects) is compared
    in C over its old prefix, so a create costs its new entries, not a
    pass over every entry in Python.  Other key changes (removals) compare
    every entry by identity.
    """
    replaced = replaced_keys(old, new)
    if replaced is not None:
        return replaced, []
    keys = list(new)
    count = len(old)
    if len(keys) >= count and keys[:count] == list(old):
        same = list(map(operator.is_, old.values(), new.values()))   # the old prefix
        changed = [keys[pos] for pos, kept in enumerate(same) if not kept]
        return changed + keys[count:], []
    gone = old.keys() - new.keys()
    removed = [key for key in old if key in gone] if gone else []
    missing = object()
    return [key for key in keys if old.get(key, missing) is not new[key]], removed


@dataclasses.dataclass
class Snapshot:
    """A published tree of one serial, and its bytes once it has been serialised.

    Queued trees get their bytes when they are written (the group
    commit's leader serialises only the newest one); the committed tree
    always has them (it is on disk).
    """

    serial: int
    data: ConfigData
    raw: bytes | None = None

    def encoded(self) -> bytes:
        """The bytes, which must have been set (by the write that made the tree durable)."""
        if self.raw is None:
            raise ValueError(f"configuration serial {self.serial} was never serialised")
        return self.raw


class Publications:
    """The committed tree, the newest queued one and those still being written.

    Not thread-safe on its own: the writer calls every method with its
    config lock held, except :meth:`committed`, which is one attribute
    read (readers never wait for the config lock).
    """

    def __init__(self, serial: int, raw: bytes, data: ConfigData) -> None:
        tree = Snapshot(serial, data, raw)
        self._durable = tree
        self._queued = tree
        self._pending: dict[int, Snapshot] = {}
        self._reader = ConfigReader(data)

    def committed(self) -> ConfigReader:
        """A reader over the committed tree (exactly the newest file on disk)."""
        return self._reader

    @property
    def durable_document(self) -> tuple[int, bytes]:
        """Serial and bytes of the newest document on disk."""
        return self._durable.serial, self._durable.encoded()

    @property
    def queued(self) -> Snapshot:
        """The newest snapshot handed to the committer (the durable one if none is pending)."""
        return self._queued

    @property
    def base(self) -> ConfigData:
        """The newest queued tree: what the next :func:`publish` builds on."""
        return self._queued.data

    def queue(self, serial: int, data: ConfigData) -> Snapshot:
        """Remember the published tree ``data`` of ``serial``; its snapshot, not serialised yet."""
        self._queued = self._pending[serial] = Snapshot(serial, data)
        return self._queued

    def durable(self, serial: int) -> None:
        """``serial`` is on disk: its tree becomes the committed one.

        Its snapshot must carry the bytes written.  Older queued trees are
        dropped (the write of ``serial`` carried them).  A serial not
        queued here (e.g. queued before a :meth:`discard`) changes nothing.
        """
        tree = self._pending.get(serial)
        if tree is None:
            return
        tree.encoded()
        self._pending = {s: t for s, t in self._pending.items() if s > serial}
        self._durable = tree
        self._reader = ConfigReader(tree.data)

    def discard(self) -> None:
        """A write failed: forget every queued tree; the next snapshot builds on the committed one."""
        self._pending.clear()
        self._queued = self._durable
