"""ganeti/hypervisor/kvm/mirror.py without qemu: command builders, job parsing, and the
talking functions against a scripted QMP client (the real thing:
test/integration/test_kvm_mirror_qemu.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fakes.fakeqmp import FakeQmp, Replies
from ganeti import errors
from ganeti.hypervisor.kvm import mirror, qmp

MIB = 1024 * 1024

QUERY_BLOCK = [
    {"device": "disk1", "inserted": {"node-name": "#block300",
                                     "image": {"virtual-size": 16 * MIB}}},
    {"device": "disk0", "inserted": {"node-name": "#block104",
                                     "image": {"virtual-size": 64 * MIB}}},
    {"device": "cdrom0", "inserted": {"node-name": "#block9", "image": {"virtual-size": 1}}},
    {"device": "disk2"},                       # no medium
]


def _job(device: str, offset: int, length: int, status: str = "running",
         ready: bool = False, **extra: Any) -> dict[str, Any]:
    return {"device": mirror.job_id(device), "offset": offset, "len": length,
            "status": status, "ready": ready, "speed": 0, "type": "mirror", **extra}


def _answers(jobs: list[list[dict[str, Any]]] | None,
             refuse: dict[str, str]) -> dict[str, Any]:
    """The peer's script: ``query-block``, ``query-block-jobs`` from ``jobs``, refusals.

    A refusal is keyed by the command, or by ``command:port`` for the port of
    an ``nbd-server-start``.
    """
    def answer(command: str) -> Callable[..., Any]:
        def reply(**arguments: Any) -> Any:
            key = f"{command}:{arguments.get('addr', {}).get('data', {}).get('port', '')}"
            for name in (key, command):
                if name in refuse:
                    raise qmp.QmpCommandError(command, "GenericError", refuse[name])
            return {}
        return reply

    script: dict[str, Any] = {name.split(":")[0]: answer(name.split(":")[0]) for name in refuse}
    script["query-block"] = QUERY_BLOCK
    script["query-block-jobs"] = Replies(*(jobs or [[]]))
    return script


@pytest.fixture
def scripted(qmp_peer) -> Callable[..., tuple[FakeQmp, qmp.QmpClient]]:
    """Makes a scripted QMP peer (``_answers``) and a client connected to it."""
    def make(jobs: list[list[dict[str, Any]]] | None = None,
             refuse: dict[str, str] | None = None) -> tuple[FakeQmp, qmp.QmpClient]:
        fake = qmp_peer(_answers(jobs, dict(refuse or {})))
        return fake, fake.client()
    return make


def test_disks_are_found_by_drive_id_in_index_order():
    assert mirror.disk_nodes(QUERY_BLOCK) == {"disk0": "#block104", "disk1": "#block300"}
    assert mirror.disk_sizes(QUERY_BLOCK) == {"disk0": 64 * MIB, "disk1": 16 * MIB}
    assert mirror.disk_nodes("garbage") == {}


@pytest.mark.parametrize("host,uri", [("192.0.2.1", "nbd://192.0.2.1:10809/disk0"),
                                      ("2001:db8::1", "nbd://[2001:db8::1]:10809/disk0")],
                         ids=["ipv4", "ipv6"])
def test_mirror_arguments(host, uri):
    args = mirror.mirror_args("disk0", host, 10809, 32 * MIB)
    assert args == {"device": "disk0", "job-id": "ganeti-mirror-disk0", "target": uri,
                    "format": "raw", "sync": "full", "mode": "existing", "speed": 32 * MIB,
                    "auto-dismiss": False}


def test_export_and_server_arguments():
    assert mirror.export_args("disk1", "#block300") == {
        "type": "nbd", "id": "ganeti-export-disk1", "node-name": "#block300",
        "name": "disk1", "writable": True}
    assert mirror.nbd_server_args("192.0.2.1", 10810) == {
        "addr": {"type": "inet", "data": {"host": "192.0.2.1", "port": "10810"}}}


@pytest.mark.parametrize("exports,match", [
    ([{"device": "disk0", "size": 64 * MIB}], "exports disks"),
    ([{"device": "disk0", "size": 64 * MIB}, {"device": "disk1", "size": 8 * MIB}],
     "16777216 bytes on the source but 8388608"),
], ids=["missing-disk", "other-size"])
def test_check_exports_refuses_a_different_target(exports, match):
    with pytest.raises(errors.HypervisorError, match=match):
        mirror.check_exports(mirror.disk_sizes(QUERY_BLOCK), {"exports": exports})


def test_parse_jobs_keeps_ours_only():
    jobs = [_job("disk1", 5, 10), {"device": "someone-else", "offset": 1, "len": 2},
            _job("disk0", 3, 4, status="concluded", error="Input/output error")]
    assert mirror.parse_jobs(jobs) == [
        {"device": "disk0", "cur": 3, "end": 4, "ready": False, "speed": 0,
         "status": "concluded", "error": "Input/output error"},
        {"device": "disk1", "cur": 5, "end": 10, "ready": False, "speed": 0,
         "status": "running"}]


@pytest.mark.parametrize("jobs,status,info", [
    ([_job("disk0", 4, 8), _job("disk1", 8, 8, status="ready", ready=True)],
     "active", "12/16 bytes"),
    ([_job("disk0", 8, 8, status="ready", ready=True),
      _job("disk1", 8, 8, status="ready", ready=True)], "ready", "in sync"),
    ([_job("disk0", 4, 8, status="concluded", error="Input/output error"),
      _job("disk1", 8, 8, status="ready", ready=True)], "failed", "Input/output error"),
    ([_job("disk0", 4, 8, status="concluded")], "failed", "ended at 4/8"),
    ([_job("disk0", 8, 8, status="ready", ready=True)], "failed", "disk1 is gone"),
], ids=["copying", "ready", "error", "ended-early", "missing"])
def test_summarize(jobs, status, info):
    got = mirror.summarize(mirror.parse_jobs(jobs), ["disk0", "disk1"])
    assert got[0] == status
    assert info in got[1]


def test_start_exports_takes_the_first_free_port(scripted):
    fake, client = scripted(refuse={"nbd-server-start:10809": "Address already in use",
                                 "nbd-server-stop": "NBD server not running"})
    target = mirror.start_exports(client, "192.0.2.7", ports=range(10809, 10812))
    assert target == {"host": "192.0.2.7", "port": 10810,
                      "exports": [{"device": "disk0", "size": 64 * MIB},
                                  {"device": "disk1", "size": 16 * MIB}]}
    assert fake.names() == ["query-block", "nbd-server-stop", "nbd-server-start",
                              "nbd-server-start", "block-export-add", "block-export-add"]
    assert fake.calls[-1][1]["node-name"] == "#block300"


def test_start_exports_without_a_free_port(scripted):
    fake, client = scripted(refuse={"nbd-server-start": "Address already in use"})
    with pytest.raises(errors.HypervisorError, match="Address already in use"):
        mirror.start_exports(client, "192.0.2.7", ports=range(10809, 10811))


def test_a_failed_export_stops_the_server(scripted):
    fake, client = scripted(refuse={"block-export-add": "boom"})
    with pytest.raises(qmp.QmpCommandError):
        mirror.start_exports(client, "192.0.2.7", ports=[10809])
    assert fake.names()[-1] == "nbd-server-stop"


def test_start_mirrors_one_job_per_disk(scripted):
    fake, client = scripted()
    target = {"host": "192.0.2.7", "port": 10810,
              "exports": [{"device": "disk0", "size": 64 * MIB},
                          {"device": "disk1", "size": 16 * MIB}]}
    assert mirror.start_mirrors(client, target, 8 * MIB) == ["disk0", "disk1"]
    mirrors = [a for c, a in fake.calls if c == "drive-mirror"]
    assert [m["target"] for m in mirrors] == ["nbd://192.0.2.7:10810/disk0",
                                              "nbd://192.0.2.7:10810/disk1"]
    assert {m["speed"] for m in mirrors} == {8 * MIB}


def test_start_mirrors_cancels_what_it_started_on_failure(scripted):
    fake, client = scripted(jobs=[[], [_job("disk0", 0, 8)], [_job("disk0", 0, 8, "concluded")]],
                         refuse={"drive-mirror": "boom"})
    target = {"host": "h", "port": 1, "exports": [{"device": "disk0", "size": 64 * MIB},
                                                  {"device": "disk1", "size": 16 * MIB}]}
    with pytest.raises(qmp.QmpCommandError):
        mirror.start_mirrors(client, target, 0)
    assert "drive-mirror" in fake.names()


def test_complete_cancels_ready_jobs_and_dismisses_them(scripted):
    ready = [_job("disk0", 8, 8, "ready", True), _job("disk1", 8, 8, "ready", True)]
    done = [_job("disk0", 9, 9, "concluded"), _job("disk1", 8, 8, "concluded")]
    fake, client = scripted(jobs=[ready, done])
    final = mirror.complete_mirrors(client, clock=lambda: 0.0, sleep=lambda s: None)
    assert [j["cur"] for j in final] == [9, 8]
    assert [a for c, a in fake.calls if c == "block-job-cancel"] == [
        {"device": "ganeti-mirror-disk0"}, {"device": "ganeti-mirror-disk1"}]  # not forced
    assert [a["id"] for c, a in fake.calls if c == "job-dismiss"] == [
        "ganeti-mirror-disk0", "ganeti-mirror-disk1"]


def test_complete_refuses_a_mirror_that_does_not_get_ready(scripted):
    behind = [_job("disk0", 8, 8, "ready", True), _job("disk1", 1, 8)]
    ticks = iter(range(1000))
    fake, client = scripted(jobs=[behind] * 6 + [
        behind, [_job("disk0", 8, 8, "concluded"),
                 _job("disk1", 1, 8, "concluded", error="Operation canceled")]])
    with pytest.raises(errors.HypervisorError, match="Cannot complete.*9/16 bytes"):
        mirror.complete_mirrors(client, timeout=5, clock=lambda: float(next(ticks)),
                                sleep=lambda s: None)
    assert {a.get("force") for c, a in fake.calls if c == "block-job-cancel"} == {True}


def test_complete_waits_for_a_mirror_paused_while_the_guest_stopped(scripted):
    # qemu pauses block jobs while it stops the guest: one may not be ready yet
    paused = [_job("disk0", 8, 8, "ready", True), _job("disk1", 7, 8, "paused")]
    ready = [_job("disk0", 8, 8, "ready", True), _job("disk1", 8, 8, "ready", True)]
    done = [_job("disk0", 8, 8, "concluded"), _job("disk1", 8, 8, "concluded")]
    fake, client = scripted(jobs=[paused, paused, ready, done])
    final = mirror.complete_mirrors(client, clock=lambda: 0.0, sleep=lambda s: None)
    assert [j["status"] for j in final] == ["concluded", "concluded"]
    assert [a for c, a in fake.calls if c == "block-job-cancel"] == [
        {"device": "ganeti-mirror-disk0"}, {"device": "ganeti-mirror-disk1"}]  # not forced


def test_complete_reports_an_error_at_the_end(scripted):
    ready = [_job("disk0", 8, 8, "ready", True), _job("disk1", 8, 8, "ready", True)]
    done = [_job("disk0", 8, 8, "concluded"),
            _job("disk1", 8, 8, "concluded", error="Input/output error")]
    fake, client = scripted(jobs=[ready, done])
    with pytest.raises(errors.HypervisorError, match="disk1: Input/output error"):
        mirror.complete_mirrors(client, clock=lambda: 0.0, sleep=lambda s: None)


def test_waiting_for_the_end_is_bounded(scripted):
    ticks = iter(range(1000))
    fake, client = scripted(jobs=[[_job("disk0", 1, 8)]])
    with pytest.raises(errors.HypervisorError, match="did not end within 5s"):
        mirror.abort_mirrors(client, timeout=5, clock=lambda: float(next(ticks)),
                             sleep=lambda s: None)


def test_stop_exports_tells_whether_a_server_ran(scripted):
    assert mirror.stop_exports(scripted()[1]) is True
    assert mirror.stop_exports(scripted(refuse={"nbd-server-stop": "not running"})[1]) is False


def test_status_disks_has_the_contract_keys_only():
    jobs = [_job("disk0", 3, 8, status="ready", ready=True), {"device": "other", "len": 1}]
    assert mirror.status_disks(jobs) == [
        {"device": "disk0", "cur": 3, "end": 8, "ready": True, "speed": 0}]
    assert mirror.status_disks([]) == []


def test_the_hypervisor_refuses_mirrors_of_an_instance_it_does_not_run(tmp_path):
    from ganeti import pathutils
    from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor
    hv = KvmHypervisor(pathutils.Paths(root=str(tmp_path)))
    for call in (lambda: hv.mirror_accept("inst1", "192.0.2.1"),
                 lambda: hv.mirror_status("inst1"),
                 lambda: hv.mirror_finish("inst1", False)):
        with pytest.raises(errors.HypervisorError, match="inst1 is not running here"):
            call()
    hv.mirror_release("inst1")            # the target's qemu is gone: nothing to stop


def test_other_hypervisors_cannot_mirror(tmp_path):
    from ganeti import pathutils
    from ganeti.hypervisor.fake import FakeHypervisor
    hv = FakeHypervisor(pathutils.Paths(root=str(tmp_path)))
    with pytest.raises(errors.HypervisorError, match="cannot migrate instance inst1 with its"):
        hv.mirror_accept("inst1", "192.0.2.1")


def test_hotplugged_disks_are_named_by_their_node():
    blocks = QUERY_BLOCK + [
        {"device": "", "qdev": "/machine/peripheral/hotvd-ab/virtio-backend",
         "inserted": {"node-name": "hotdisk-ab", "ro": False,
                      "image": {"virtual-size": 8 * MIB}}},
        {"device": "", "inserted": {"node-name": "#block5", "ro": True,
                                    "image": {"virtual-size": 1}}}]        # read-only
    assert list(mirror.disk_nodes(blocks)) == ["disk0", "disk1", "hotdisk-ab"]
    assert mirror.disk_sizes(blocks)["hotdisk-ab"] == 8 * MIB
    assert mirror.mirror_args("hotdisk-ab", "h", 1, 0)["device"] == "hotdisk-ab"
    assert mirror.export_args("hotdisk-ab", "hotdisk-ab")["name"] == "hotdisk-ab"
    jobs = [_job("hotdisk-ab", 1, 2), _job("disk1", 1, 2), _job("disk0", 1, 2)]
    assert [j["device"] for j in mirror.parse_jobs(jobs)] == ["disk0", "disk1", "hotdisk-ab"]
