"""The node's part of node loss recovery (ganeti/backend/ha.py)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.clock import FakeClock  # noqa: E402

from ganeti import constants, crypto, errors, hypervisor, serializer  # noqa: E402
from ganeti.backend import fencing, ha  # noqa: E402
from ganeti.hypervisor import base  # noqa: E402
from ganeti.rpc.results import RpcResult, RpcResults  # noqa: E402
from ganeti.server import parenttimer  # noqa: E402
from ganeti.server.selffence import SelfFenceMonitor  # noqa: E402
from ganeti.utils import io as uio  # noqa: E402


def test_a_node_daemon_nobody_listens_for_is_not_reached(ctx, monkeypatch) -> None:
    key, cert = crypto.generate_self_signed_cert()
    os.makedirs(os.path.dirname(ctx.paths.server_pem), exist_ok=True)
    with open(ctx.paths.server_pem, "wb") as fh:
        fh.write(key + cert)
    with socket.socket() as sock:           # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("GANETI_NODED_PORT", str(port))
    answer = ha.ha_node_reachable(ctx, "node9", "127.0.0.1", 2.0)
    assert answer["reachable"] is False
    assert answer["error"]


def _accept_master(ctx, master: str, epoch: int, named: str | None = None) -> None:
    """This node accepted ``master``'s ``epoch``; its ssconf names ``named`` (the same)."""
    fencing.check_epoch(ctx, "master_lease", epoch, master)
    path = ctx.paths.ssconf_file("master_node")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    uio.write_file_atomic(path, ((named or master) + "\n").encode())


def _closed_port(ctx, monkeypatch) -> None:
    key, cert = crypto.generate_self_signed_cert()
    os.makedirs(os.path.dirname(ctx.paths.server_pem), exist_ok=True)
    with open(ctx.paths.server_pem, "wb") as fh:
        fh.write(key + cert)
    with socket.socket() as sock:           # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("GANETI_NODED_PORT", str(port))


@pytest.mark.parametrize("accepted, named", [
    ("node2", None),             # another master's epoch accepted here
    ("node1", "node2"),          # this node's ssconf names another master
], ids=["other-epoch-master", "other-ssconf-master"])
def test_a_lease_relay_is_refused_for_any_but_the_accepted_master(ctx, monkeypatch,
                                                                  accepted, named) -> None:
    _closed_port(ctx, monkeypatch)
    _accept_master(ctx, accepted, 65537, named)
    with pytest.raises(errors.NotMasterError, match="ha_lease_relay for node1 refused"):
        ha.ha_lease_relay(ctx, "node9", "127.0.0.1", "node1", 30.0, [A], 2.0)


def test_a_lease_relay_for_the_master_is_forwarded_with_its_epoch(ctx, monkeypatch) -> None:
    """The checks pass; the forward is made (here to a port nobody listens on: it fails),
    carrying the accepted epoch and the lease less the time spent."""
    _closed_port(ctx, monkeypatch)
    _accept_master(ctx, "node1", 65537)
    with pytest.raises(errors.OpExecError, match="node9 did not confirm"):
        ha.ha_lease_relay(ctx, "node9", "127.0.0.1", "node1", 30.0, [A], 2.0)
    sent: list[tuple[str, float, tuple[int, str]]] = []

    class Recording(ha.RpcRunner):
        def _rpc(self, procedure, node_or_nodes, args, rpc_timeout):  # type: ignore[no-untyped-def]
            assert self.fence is not None
            sent.append((procedure, args[0], self.fence()))
            return RpcResults(procedure, [(n, RpcResult(n, {"lease": args[0], "fenced": None},
                                                        None, False, procedure))
                                          for n in node_or_nodes])

    monkeypatch.setattr(ha, "RpcRunner", Recording)
    answer = ha.ha_lease_relay(ctx, "node9", "127.0.0.1", "node1", 30.0, [A], 2.0)
    ((procedure, lease, fence),) = sent
    assert procedure == "ha_lease" and fence == (65537, "node1")
    assert 29.0 < lease <= 30.0 and answer["lease"] == lease


def _start(ctx, name: str) -> None:
    hv = hypervisor.get_hypervisor(constants.HT_FAKE, ctx.paths)
    hv.start_instance(base.InstanceSpec(name=name, uuid=f"uuid-{name}", memory=128, vcpus=1,
                                        hvparams={}, beparams={"maxmem": 128}, nics=()), [])


def _running(ctx) -> list[str]:
    hv = hypervisor.get_hypervisor(constants.HT_FAKE, ctx.paths)
    return sorted(n for n, info in hv.get_all_instances_info().items()
                  if info.get("state") == "running")


A = {"name": "a", "hypervisor": "fake"}
B = {"name": "b", "hypervisor": "fake"}


def test_a_lease_is_recorded_and_released(ctx) -> None:
    assert ha.ha_lease(ctx, 30.0, [A]) == {"lease": 30.0, "fenced": None}
    record = ha.read_lease(ctx.paths)
    assert record is not None and record["lease"] == 30.0 and record["instances"] == [A]
    assert ha.ha_lease(ctx, 0.0, []) == {"lease": 0.0, "fenced": None}
    assert ha.read_lease(ctx.paths) is None


@pytest.mark.parametrize("entry, error", [
    ({"name": "a", "hypervisor": "vmware"}, errors.HypervisorError),
    ({"name": "a"}, errors.ProgrammerError),
    ("a", errors.ProgrammerError),
], ids=["unknown-hypervisor", "no-hypervisor", "not-a-dict"])
def test_a_bad_instance_entry_is_refused(ctx, entry, error) -> None:
    with pytest.raises(error):
        ha.ha_lease(ctx, 30.0, [entry])
    assert ha.read_lease(ctx.paths) is None


def test_the_self_fence_stops_the_covered_instances_only_and_is_reported(ctx) -> None:
    _start(ctx, "a")
    _start(ctx, "b")
    _start(ctx, "untagged")
    assert _running(ctx) == ["a", "b", "untagged"]
    ha.ha_lease(ctx, 30.0, [A, B, {"name": "gone", "hypervisor": "fake"}])
    stopped = ha.self_fence(ctx.paths, ha.lease_instances(ha.read_lease(ctx.paths)["instances"]))
    assert sorted(stopped) == ["a", "b"]                  # "gone" does not run here
    assert _running(ctx) == ["untagged"]
    assert ha.ha_lease(ctx, 30.0, [A])["fenced"] is not None


def test_the_node_daemon_fences_once_just_before_the_lease_ends(ctx, monkeypatch) -> None:
    clock = FakeClock(now=100.0)
    _start(ctx, "a")
    _start(ctx, "untagged")                                # not in the lease
    uio.write_file_atomic(ha.lease_file(ctx.paths), serializer.dumps(
        {"at": 100.0, "lease": 30.0, "instances": [A]}))
    monitor = SelfFenceMonitor(ctx.paths, clock=clock)
    forks: list[int] = []

    def fork(fn) -> int:  # type: ignore[no-untyped-def]
        forks.append(fn())
        return 4242

    # the worker "ran" inline: the parent finds it reaped at once
    monkeypatch.setattr(parenttimer.spare, "reaped", lambda pid: pid == 4242)
    for _ in range(27):
        clock.advance(1.0)
        monitor.tick(fork)
    assert forks == [] and _running(ctx) == ["a", "untagged"]   # 127 s: 3 s left
    clock.advance(1.0)
    monitor.tick(fork)                                     # 128 s: 2 s ahead of the end
    assert forks == [0] and _running(ctx) == ["untagged"]
    for _ in range(5):
        clock.advance(1.0)
        monitor.tick(fork)
    assert forks == [0]                                    # once per lease record
