"""Tests for ganeti.storage.tree: the walks over a disk tree and their rollback."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from ganeti import errors, pathutils
from ganeti.storage import base, tree


class JournalDevice(base.BaseStorage):
    """An in-memory device that writes every call into a shared journal."""

    TEMPLATE = "journal"

    def __init__(self, journal: list[tuple[str, str]], fail: set[tuple[str, str]]) -> None:
        super().__init__(pathutils.Paths(root="/"))
        self.journal, self.fail, self.volumes = journal, fail, set[str]()

    def _do(self, op: str, disk: base.DiskSpec) -> None:
        if (op, disk.uuid) in self.fail:
            raise errors.StorageError(f"{op} of {disk.uuid} failed")
        self.journal.append((op, disk.uuid))

    def create(self, disk: base.DiskSpec) -> str:
        self._do("create", disk)
        self.volumes.add(disk.uuid)
        return "/dev/" + disk.uuid

    def remove(self, disk: base.DiskSpec) -> None:
        self._do("remove", disk)
        self.volumes.discard(disk.uuid)

    def assemble(self, disk: base.DiskSpec) -> str:
        self._do("assemble", disk)
        return "/dev/" + disk.uuid

    def shutdown(self, disk: base.DiskSpec) -> None:
        self._do("shutdown", disk)

    def grow(self, disk: base.DiskSpec, amount: int) -> int:
        return disk.size + amount

    def rename(self, disk: base.DiskSpec, new_logical_id: tuple[Any, ...]) -> tuple[Any, ...]:
        return new_logical_id

    def get_size(self, disk: base.DiskSpec) -> int:
        return disk.size

    def get_path(self, disk: base.DiskSpec) -> str:
        return "/dev/" + disk.uuid

    def export_stream(self, disk: base.DiskSpec, chunk_size: int = 1) -> Iterator[bytes]:
        return iter(())

    def import_stream(self, disk: base.DiskSpec, chunks: Iterable[bytes]) -> int:
        return 0

    def verify(self) -> list[str]:
        return []


def spec(uuid: str, *children: base.DiskSpec) -> base.DiskSpec:
    return base.DiskSpec(uuid=uuid, size=1, dev_type="journal", children=children)


# top "t" built on "a" (itself on "a1", "a2") and "b"
TREE = spec("t", spec("a", spec("a1"), spec("a2")), spec("b"))


def setup(fail: Iterable[tuple[str, str]] = ()) -> tuple[list[tuple[str, str]], JournalDevice]:
    journal: list[tuple[str, str]] = []
    dev = JournalDevice(journal, set(fail))
    return journal, dev


def test_walk_orders():
    assert [d.uuid for d in tree.children_first(TREE)] == ["a1", "a2", "a", "b", "t"]
    assert [d.uuid for d in tree.parents_first(TREE)] == ["t", "a", "a1", "a2", "b"]


def test_create_and_assemble_go_children_first():
    journal, dev = setup()
    assert tree.create_tree(lambda _t: dev, TREE) == "/dev/t"
    assert tree.assemble_tree(lambda _t: dev, TREE) == "/dev/t"
    order = ["a1", "a2", "a", "b", "t"]
    assert journal == [("create", u) for u in order] + [("assemble", u) for u in order]


def test_shutdown_and_remove_go_parents_first():
    journal, dev = setup()
    tree.shutdown_tree(lambda _t: dev, TREE)
    tree.remove_tree(lambda _t: dev, TREE)
    order = ["t", "a", "a1", "a2", "b"]
    assert journal == [("shutdown", u) for u in order] + [("remove", u) for u in order]


def test_failed_create_removes_what_it_made_in_reverse():
    journal, dev = setup(fail={("create", "b")})
    with pytest.raises(errors.StorageError, match="create of b failed"):
        tree.create_tree(lambda _t: dev, TREE)
    assert journal[3:] == [("remove", "a"), ("remove", "a2"), ("remove", "a1")]
    assert dev.volumes == set()


def test_failed_multi_disk_create_removes_earlier_disks():
    journal, dev = setup(fail={("create", "d2")})
    with pytest.raises(errors.StorageError):
        tree.create_disks(lambda _t: dev, [spec("d0"), spec("d1"), spec("d2")])
    assert dev.volumes == set()
    assert journal[-2:] == [("remove", "d1"), ("remove", "d0")]


def test_failed_rollback_is_reported():
    journal, dev = setup(fail={("create", "b"), ("remove", "a1")})
    with pytest.raises(errors.StorageError, match="removing what was created failed too"):
        tree.create_tree(lambda _t: dev, TREE)


def test_remove_carries_on_past_a_failure():
    journal, dev = setup(fail={("remove", "a")})
    with pytest.raises(errors.StorageError, match="remove of a failed"):
        tree.remove_tree(lambda _t: dev, TREE)
    assert [u for op, u in journal] == ["t", "a1", "a2", "b"]


def test_factory_dispatches_by_dev_type():
    journal, dev = setup()
    seen: list[str] = []

    def factory(dev_type: str) -> base.BaseStorage:
        seen.append(dev_type)
        return dev
    tree.create_tree(factory, base.DiskSpec(uuid="x", size=1, dev_type="journal",
                                            children=(base.DiskSpec(uuid="y", size=1,
                                                                    dev_type="other"),)))
    assert seen == ["other", "journal"]
