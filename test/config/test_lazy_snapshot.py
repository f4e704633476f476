"""The config writer serialises once per group commit, at write time (issue 33, point 5)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ganeti import errors, serializer
from ganeti.config import ConfigWriter
from fakes.fakeconfig import one_node_data
from ganeti.config.commit import Publications
from ganeti.objects import ConfigData, Node

pytestmark = pytest.mark.timeout(60)


def _initial() -> ConfigData:
    return one_node_data()


class GatedWrite:
    """A ``write_fn`` that holds its first write until ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.serials: list[int] = []

    def __call__(self, path: str, raw: bytes) -> None:
        self.entered.set()
        if not self.serials:
            assert self.gate.wait(30), "gate never opened"
        from ganeti.utils import io
        io.write_file_atomic(path, raw, mode=0o640)
        self.serials.append(serializer.loads(raw)["serial_no"])


class CountingEncodes:
    """Counts the config writer's serialisations (``FragmentCache.dumps_bytes``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.serials: list[int] = []
        real = serializer.FragmentCache.dumps_bytes

        def counting(cache: serializer.FragmentCache, root: Any) -> bytes:
            self.serials.append(root.serial_no)
            return real(cache, root)

        monkeypatch.setattr(serializer.FragmentCache, "dumps_bytes", counting)


def _wait_serial(cfg: ConfigWriter, serial: int) -> None:
    for _ in range(4000):
        if cfg.get_serial_no() >= serial:
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"serial {serial} never reached")


def _add_node(cfg: ConfigWriter, name: str, ip: str) -> None:
    cfg.add_node(Node(name=name, primary_ip=ip))


def test_changes_queued_during_a_write_are_serialised_once(tmp_path: Any, monkeypatch) -> None:
    path = str(tmp_path / "config.data")
    writer = GatedWrite()
    seen: list[tuple[int, bytes]] = []
    cfg = ConfigWriter.initialize(path, _initial(), write_fn=writer,
                                  on_change=lambda raw, serial: seen.append((serial, raw)))
    encodes = CountingEncodes(monkeypatch)
    start = cfg.get_serial_no()
    failures: list[BaseException] = []

    def change(name: str, ip: str) -> None:
        try:
            _add_node(cfg, name, ip)
        except BaseException as exc:   # pragma: no cover - asserted below
            failures.append(exc)

    lead = threading.Thread(target=change, args=("lead.example.com", "127.0.2.1"))
    lead.start()
    others: list[threading.Thread] = []
    try:
        assert writer.entered.wait(30)          # write #1 in progress, held
        for i in range(6):
            others.append(threading.Thread(target=change,
                                           args=(f"n{i}.example.com", f"127.0.3.{i}")))
            others[-1].start()
        _wait_serial(cfg, start + 7)            # six more changes queued meanwhile
        assert encodes.serials == [start + 1]   # ... none of them serialised yet
    finally:
        writer.gate.set()
    for t in [lead, *others]:
        t.join(30)
        assert not t.is_alive()
    assert not failures
    # two writes, and one serialisation each: the six queued changes cost one
    assert writer.serials == [start + 1, start + 7]
    assert encodes.serials == [start + 1, start + 7]
    # on_change got exactly the bytes on disk, and readers see the newest write
    assert [s for s, _ in seen] == writer.serials
    with open(path, "rb") as f:
        assert seen[-1][1] == f.read()
    assert cfg.committed().get_serial_no() == start + 7
    assert ConfigWriter(path).dump() == cfg.dump()


def test_one_change_at_a_time_is_serialised_once_each(tmp_path: Any, monkeypatch) -> None:
    cfg = ConfigWriter.initialize(str(tmp_path / "config.data"), _initial())
    encodes = CountingEncodes(monkeypatch)
    start = cfg.get_serial_no()
    for i in range(3):
        _add_node(cfg, f"n{i}.example.com", f"127.0.3.{i}")
    with cfg.batch():
        for i in range(3, 6):
            _add_node(cfg, f"n{i}.example.com", f"127.0.3.{i}")
    assert encodes.serials == [start + 1, start + 2, start + 3, start + 6]


def test_a_change_that_cannot_be_serialised_fails_its_write_and_is_undone(
        tmp_path: Any) -> None:
    path = str(tmp_path / "config.data")
    cfg = ConfigWriter.initialize(path, _initial())
    start = cfg.get_serial_no()
    node = cfg.get_node_info("n1")
    assert node is not None
    node.ndparams = {"bad": object()}           # not JSON
    with pytest.raises(errors.ConfigurationError, match="cannot be serialised"):
        cfg.update(node)
    assert cfg.get_serial_no() == start         # memory went back to the disk
    assert cfg.get_node_info("n1").ndparams == {}
    with open(path, "rb") as f:
        assert cfg.dump() == f.read()
    _add_node(cfg, "after.example.com", "127.0.4.1")   # the writer carries on
    assert ConfigWriter(path).get_node_info_by_name("after.example.com") is not None


def test_publications_queue_trees_without_bytes_until_written() -> None:
    first = _initial()
    pubs = Publications(1, b"one", first)
    second = ConfigData(cluster=first.cluster, serial_no=2)
    third = ConfigData(cluster=first.cluster, serial_no=3)
    snap2 = pubs.queue(2, second)
    snap3 = pubs.queue(3, third)
    assert snap2.raw is None and snap3.raw is None
    assert pubs.base is third and pubs.queued is snap3
    with pytest.raises(ValueError):
        pubs.durable(3)                         # never serialised: cannot be committed
    assert pubs.committed().get_config_data() is first
    snap3.raw = b"three"
    pubs.durable(3)
    assert pubs.durable_document == (3, b"three")
    assert pubs.committed().get_config_data() is third
    pubs.durable(2)                             # carried by 3: nothing changes
    assert pubs.durable_document == (3, b"three")
