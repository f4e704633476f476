"""The QMP side of kvm migration (ganeti/hypervisor/kvm/migration.py), without qemu."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fakes.fakeqmp import FakeQmp, Replies
from ganeti import errors
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import migration, qmp


@pytest.fixture
def qemu(qmp_peer) -> Callable[[dict[str, Any]], tuple[FakeQmp, qmp.QmpClient]]:
    """Makes a scripted QMP peer and a client connected to it.

    A list answers ``query-migrate`` and ``query-status`` one item per call
    (the last repeating).
    """
    def make(answers: dict[str, Any]) -> tuple[FakeQmp, qmp.QmpClient]:
        fake = qmp_peer({name: Replies(*answer) if isinstance(answer, list) and answer
                         and name in ("query-migrate", "query-status") else answer
                         for name, answer in answers.items()})
        return fake, fake.client()
    return make


@pytest.mark.parametrize("address,port,uri", [
    ("192.0.2.7", 8102, "tcp:192.0.2.7:8102"),
    ("2001:db8::7", 8103, "tcp:[2001:db8::7]:8103"),
], ids=["ipv4", "ipv6"])
def test_incoming_uri(address, port, uri):
    assert migration.incoming_uri(address, port) == uri


def test_incoming_uri_needs_an_address():
    with pytest.raises(errors.HypervisorError, match="address"):
        migration.incoming_uri("", 8102)


def test_candidate_ports_stay_below_65536():
    assert migration.candidate_ports(8102, 3) == [8102, 8103, 8104]
    assert migration.candidate_ports(65534, 5) == [65534, 65535]
    assert len(migration.candidate_ports(8102)) == migration.PORT_RANGE
    with pytest.raises(errors.HypervisorError, match="migration_port"):
        migration.candidate_ports(0)


@pytest.mark.parametrize("live,stop", [(True, False), (False, True)], ids=["live", "non-live"])
def test_outgoing_commands(live, stop):
    cmds = migration.outgoing_commands({"migration_bandwidth": 5, "migration_downtime": 100},
                                       "tcp:192.0.2.7:8102", live)
    assert cmds[0] == ("migrate-set-capabilities",
                       {"capabilities": [{"capability": "events", "state": True}]})
    assert cmds[1] == ("migrate-set-parameters",
                       {"max-bandwidth": 5 * 1024 * 1024, "downtime-limit": 100})
    assert [c for c, _ in cmds[2:]] == (["stop"] if stop else []) + ["migrate"]
    assert cmds[-1] == ("migrate", {"uri": "tcp:192.0.2.7:8102"})


def test_copies_paused_under_tcg_or_when_not_live():
    assert migration.copies_paused(False, "kvm") and migration.copies_paused(False, "tcg")
    assert migration.copies_paused(True, "tcg")
    assert not migration.copies_paused(True, "kvm")


def test_run_commands_stops_at_the_first_refusal(qemu):
    fake, client = qemu({"stop": qmp.QmpCommandError("stop", "GenericError", "no")})
    with pytest.raises(qmp.QmpCommandError):
        migration.run_commands(client.execute, [("cont", {}), ("stop", {}),
                                                ("migrate", {"uri": "tcp:192.0.2.7:8102"})])
    assert fake.names() == ["cont", "stop"]


def _busy(uri: str) -> Any:
    if not uri.endswith(":8104"):
        raise qmp.QmpCommandError("migrate-incoming", "GenericError",
                                  "Failed to find an available port: Address already in use")
    return {}


def test_listen_incoming_skips_ports_in_use(qemu):
    fake, client = qemu({"migrate-incoming": _busy})
    assert migration.listen_incoming(client.execute, "192.0.2.7", [8102, 8103, 8104, 8105]) == 8104
    assert fake.calls[0][0] == "migrate-set-capabilities"
    assert [a["uri"] for c, a in fake.calls[1:]] == [
        "tcp:192.0.2.7:8102", "tcp:192.0.2.7:8103", "tcp:192.0.2.7:8104"]


def test_listen_incoming_refuses_a_full_range_naming_it(qemu):
    fake, client = qemu({"migrate-incoming": _busy})
    with pytest.raises(errors.HypervisorError, match="192.0.2.7: ports 8102-8103 are all in use"):
        migration.listen_incoming(client.execute, "192.0.2.7", [8102, 8103])


def test_listen_incoming_passes_other_errors_on(qemu):
    fake, client = qemu({"migrate-incoming": qmp.QmpCommandError(
        "migrate-incoming", "GenericError", "Cannot assign requested address")})
    with pytest.raises(qmp.QmpCommandError, match="Cannot assign"):
        migration.listen_incoming(client.execute, "192.0.2.99", [8102, 8103])
    assert len(fake.calls) == 2


ACTIVE = {"status": "active", "total-time": 501, "expected-downtime": 30,
          "ram": {"total": 268967936, "remaining": 47632384, "transferred": 625583,
                  "mbps": 8.39016, "normal": 34}}
COMPLETED = {"status": "completed", "downtime": 2, "total-time": 1005,
             "ram": {"total": 268967936, "remaining": 0, "transferred": 1082601,
                     "mbps": 9.88}}


def test_parse_status_active():
    assert migration.parse_status(ACTIVE) == {
        "status": "active", "info": "active", "total_time_ms": 501, "mbps": 8.39016,
        "ram": {"total": 268967936, "remaining": 47632384, "transferred": 625583}}


def test_parse_status_completed_has_the_downtime():
    status = migration.parse_status(COMPLETED)
    assert status["status"] == base.MIGRATION_STATUS_COMPLETED
    assert (status["downtime_ms"], status["total_time_ms"]) == (2, 1005)
    assert status["ram"]["remaining"] == 0


@pytest.mark.parametrize("reply,status,info", [
    ({"status": "failed", "error-desc": "Unable to write to socket: Connection reset"},
     "failed", "Unable to write to socket: Connection reset"),
    ({"status": "failed"}, "failed", "qemu reported a failed migration"),
    ({"status": "cancelled"}, "cancelled", "The migration was cancelled"),
    ({}, "failed", "No migration was started"),
    ({"status": "setup"}, "setup", "setup"),
    ({"status": "device"}, "device", "device"),
    ("garbage", "failed", "Unexpected query-migrate reply 'garbage'"),
], ids=["failed", "failed-no-desc", "cancelled", "none", "setup", "device", "garbage"])
def test_parse_status_states(reply, status, info):
    out = migration.parse_status(reply)
    assert (out["status"], out["info"]) == (status, info)
    assert "ram" not in out


def test_parse_status_ignores_odd_figures():
    out = migration.parse_status({"status": "active", "downtime": True,
                                  "ram": {"total": "12", "transferred": 5, "mbps": None}})
    assert out == {"status": "active", "info": "active", "ram": {"transferred": 5}}


def test_abort_cancels_a_running_transfer_and_resumes(qemu):
    fake, client = qemu({"query-migrate": [ACTIVE, {"status": "cancelling"},
                                           {"status": "cancelled"}],
                         "query-status": [{"status": "paused"}, {"status": "running"}]})
    slept: list[float] = []
    assert migration.abort_outgoing(client.execute, True, slept.append) == "running"
    assert fake.names() == ["query-migrate", "migrate_cancel", "query-migrate",
                            "query-migrate", "query-status", "cont", "query-status"]
    assert slept == [0.1]


def test_abort_after_a_failed_live_transfer_has_nothing_to_do(qemu):
    fake, client = qemu({"query-migrate": {"status": "failed"},
                         "query-status": {"status": "running"}})
    assert migration.abort_outgoing(client.execute, True, lambda s: None) == "running"
    assert fake.names() == ["query-migrate", "query-status"]


def test_abort_leaves_an_admin_paused_guest_paused(qemu):
    fake, client = qemu({"query-migrate": {"status": "failed"},
                         "query-status": {"status": "paused"}})
    assert migration.abort_outgoing(client.execute, False, lambda s: None) == "paused"
    assert "cont" not in fake.names()


def test_abort_resumes_a_fully_sent_guest(qemu):
    fake, client = qemu({"query-migrate": COMPLETED,
                         "query-status": [{"status": "postmigrate"}, {"status": "running"}]})
    assert migration.abort_outgoing(client.execute, True, lambda s: None) == "running"
    assert "cont" in fake.names()


def test_abort_gives_up_on_a_transfer_that_does_not_stop(qemu):
    fake, client = qemu({"query-migrate": ACTIVE})
    with pytest.raises(errors.HypervisorError, match="did not stop"):
        migration.abort_outgoing(client.execute, True, lambda s: None, attempts=3)


@pytest.mark.parametrize("before,run,calls,after", [
    ("paused", True, ["query-status", "cont", "query-status"], "running"),
    ("paused", False, ["query-status"], "paused"),
    ("running", True, ["query-status"], "running"),
], ids=["resume", "stay-paused", "already-running"])
def test_resume(before, run, calls, after, qemu):
    fake, client = qemu({"query-status": [{"status": before}, {"status": "running"}]})
    assert migration.resume(client.execute, run) == after
    assert fake.names() == calls


def test_resume_refuses_an_incomplete_incoming_migration(qemu):
    fake, client = qemu({"query-status": {"status": "inmigrate"}})
    slept: list[float] = []
    with pytest.raises(errors.HypervisorError, match="not completed"):
        migration.resume(client.execute, True, slept.append, attempts=4)
    assert "cont" not in fake.names()
    assert fake.names() == ["query-status"] * 4 and slept == [0.2] * 3


def test_resume_waits_for_the_target_to_load_the_device_state(qemu):
    fake, client = qemu({"query-status": [{"status": "inmigrate"}, {"status": "inmigrate"},
                                          {"status": "paused"}, {"status": "running"}]})
    slept: list[float] = []
    assert migration.resume(client.execute, True, slept.append, attempts=10) == "running"
    assert fake.names() == ["query-status"] * 3 + ["cont", "query-status"]
    assert slept == [0.2, 0.2]


@pytest.mark.parametrize("status,stopped", [
    ("paused", True), ("postmigrate", True), ("finish-migrate", True), ("running", False),
    ("inmigrate", False),
])
def test_source_stopped(status, stopped):
    assert migration.source_stopped(status) is stopped
