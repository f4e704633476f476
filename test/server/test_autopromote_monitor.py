"""The node daemon's autopromotion timer (ganeti/server/autopromote.py) on local files:
what it reads, and when it forks its worker (no sockets, a fake clock)."""

from __future__ import annotations

import json
import os

from ganeti.backend.fencing import CONTACT_FILE_NAME
from ganeti.pathutils import Paths
import logging

import pytest

from ganeti.server import autopromote
from ganeti.server.autopromote import PromotionMonitor
from test.fakes.clock import FakeClock

ME = "node2.example.com"


def _config(paths: Paths, *, enabled: bool, candidate: bool = True, master: str = "u1",
            epoch: int = 0) -> None:
    os.makedirs(os.path.dirname(paths.config_file), exist_ok=True)
    data = {"cluster": {"auto_promote": enabled, "master_node": master, "master_epoch": epoch},
            "nodes": {"u1": {"name": "node1.example.com", "master_candidate": True},
                      "u2": {"name": ME, "master_candidate": candidate}}}
    with open(paths.config_file, "w") as fh:
        json.dump(data, fh)
    os.utime(paths.config_file, ns=(epoch + 1, epoch + 1 + enabled * 7 + candidate * 3))


def _contact(paths: Paths, at: float) -> None:
    os.makedirs(paths.data_dir, exist_ok=True)
    with open(os.path.join(paths.data_dir, CONTACT_FILE_NAME), "w") as fh:
        json.dump({"master": "node1.example.com", "epoch": 0, "at": at}, fh)


def _monitor(tmp_path, clock: FakeClock) -> tuple[PromotionMonitor, Paths, list[str]]:
    paths = Paths(root=str(tmp_path / "root"))
    forks: list[str] = []
    mon = PromotionMonitor(paths, ME, masterd_args=["--lease-duration", "6"], clock=clock)
    return mon, paths, forks


def _fork(forks: list[str]):
    def fork(fn) -> int:
        forks.append("worker")
        return 0x7FFFFFF0   # no such process: reaped at the next look
    return fork


def test_off_it_never_forks(tmp_path) -> None:
    clock = FakeClock()
    mon, paths, forks = _monitor(tmp_path, clock)
    _config(paths, enabled=False)
    for _ in range(30):
        mon.tick(_fork(forks))
        clock.advance(1.0)
    assert forks == [] and mon.local_view(clock()).enabled is False


def test_a_silent_master_makes_a_candidate_ask_after_the_timeout(tmp_path) -> None:
    import time
    clock = FakeClock(now=time.monotonic())   # the contact file holds monotonic time
    mon, paths, forks = _monitor(tmp_path, clock)
    _config(paths, enabled=True)
    _contact(paths, clock())
    view = mon.local_view(clock())
    assert (view.enabled, view.candidate, view.master) == (True, True, False)
    mon.tick(_fork(forks))
    for _ in range(8):             # 9 s for a 6 s lease
        clock.advance(1.0)
        mon.tick(_fork(forks))
    assert forks == []
    clock.advance(1.5)
    mon.tick(_fork(forks))
    assert forks == ["worker"]
    assert mon.deadline() == clock() + 1.0


def test_the_master_itself_and_non_candidates_never_ask(tmp_path) -> None:
    clock = FakeClock()
    mon, paths, forks = _monitor(tmp_path, clock)
    for kwargs in ({"master": "u2"}, {"candidate": False}):
        _config(paths, enabled=True, **kwargs)
        for _ in range(20):
            mon.tick(_fork(forks))
            clock.advance(1.0)
    assert forks == []


@pytest.mark.parametrize("what", ["master autopromotion", "self-fence"])
def test_a_failed_worker_is_named_in_the_log(tmp_path, what) -> None:
    log = tmp_path / "worker.log"

    def setup() -> None:                    # in the child: its log goes to the file
        handler = logging.FileHandler(log)
        logging.getLogger(autopromote.__name__).addHandler(handler)

    def fail() -> int:
        raise RuntimeError("boom")

    pid = autopromote.run_worker(setup, fail, what)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
    text = log.read_text()
    assert f"The {what} worker failed" in text and "boom" in text
