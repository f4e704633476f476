"""ganeti.pathutils.Paths: immutable, compared and hashed by root, copyable."""

import copy
import pickle

import pytest

from ganeti.pathutils import Paths, get_paths


def test_equal_by_root_and_hashable() -> None:
    assert Paths("/a") == Paths(root="/a")
    assert Paths("/a") != Paths("/b")
    assert len({Paths("/a"), Paths("/a"), Paths("/b")}) == 2
    assert Paths() == Paths("/")


def test_immutable() -> None:
    paths = Paths("/a")
    with pytest.raises(AttributeError):
        paths.root = "/b"     # type: ignore[misc]
    with pytest.raises(AttributeError):
        del paths.root
    assert paths.root == "/a"


def test_copy_and_pickle_keep_the_root() -> None:
    paths = Paths("/a")
    for other in (copy.copy(paths), copy.deepcopy(paths), pickle.loads(pickle.dumps(paths))):
        assert other == paths and other.data_dir == "/a/var/lib/ganeti"


def test_get_paths_reuses_one_object_per_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GANETI_ROOTDIR", "/srv/x")
    assert get_paths() is get_paths("/srv/x")
    assert repr(get_paths()) == "Paths(root='/srv/x')"
