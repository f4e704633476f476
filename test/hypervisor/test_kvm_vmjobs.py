"""ganeti.hypervisor.kvm.vmjobs: QMP query-migrate / query-block-jobs replies -> runtime jobs."""

from __future__ import annotations

import pytest

from ganeti.hypervisor.kvm import vmjobs

MiB = 1024 * 1024

# shaped like qemu 8's replies
MIGRATE_ACTIVE = {"status": "active", "setup-time": 3, "total-time": 2100,
                  "expected-downtime": 300,
                  "ram": {"transferred": 70 * MiB, "remaining": 192 * MiB, "total": 256 * MiB,
                          "duplicate": 100, "normal": 16000, "mbps": 268.435456,
                          "dirty-sync-count": 1, "page-size": 4096}}
MIRROR = {"type": "mirror", "device": "disk0", "len": 100 * MiB, "offset": 10 * MiB,
          "busy": True, "paused": False, "speed": 8 * MiB, "io-status": "ok",
          "ready": False, "status": "running"}


def test_an_active_migration() -> None:
    jobs, kept = vmjobs.runtime_jobs(MIGRATE_ACTIVE, [], now=5.0, bandwidth_mib=32)
    assert kept == {}
    assert jobs == [{"state": "normal", "info": {
        "jobType": "migration", "cur": 64 * MiB, "end": 256 * MiB, "bandwidth": 32,
        "rate": pytest.approx(268.435456e6 / 8), "eta": 6.0}}]


@pytest.mark.parametrize("reply", [{"status": "completed", "ram": {"total": 5}},
                                   {"status": "failed", "error-desc": "x"},
                                   {"status": "none"}, {}, None, "junk"],
                         ids=["completed", "failed", "none", "empty", "no-reply", "junk"])
def test_no_migration_job_unless_one_runs(reply: object) -> None:
    assert vmjobs.runtime_jobs(reply, None, now=0.0)[0] == []


def test_setup_without_figures_has_no_rate_nor_eta() -> None:
    jobs, _ = vmjobs.runtime_jobs({"status": "setup"}, [], now=0.0)
    assert jobs[0]["info"] == {"jobType": "migration", "cur": 0, "end": 0, "bandwidth": 0,
                               "rate": 0.0, "eta": None}


def test_a_block_job_needs_two_samples_for_its_rate() -> None:
    jobs, kept = vmjobs.runtime_jobs({"status": "none"}, [MIRROR], now=100.0)
    assert jobs == [{"state": "normal", "info": {
        "jobType": "block", "opType": "mirror", "device": "disk/0", "job": "disk0",
        "cur": 10 * MiB,
        "end": 100 * MiB, "bandwidth": 8, "rate": 0.0, "eta": None}}]
    assert kept == {"disk0": [100.0, float(10 * MiB)]}
    later = dict(MIRROR, offset=26 * MiB)
    jobs, kept = vmjobs.runtime_jobs(None, [later], now=102.0, samples=kept)
    assert jobs[0]["info"]["rate"] == 8 * MiB
    assert jobs[0]["info"]["eta"] == 9.2        # 74 MiB left at 8 MiB/s, one decimal
    assert kept == {"disk0": [102.0, float(26 * MiB)]}


def test_a_recent_sample_is_kept_so_the_interval_stays_useful() -> None:
    kept = {"disk0": [100.0, float(10 * MiB)]}
    jobs, kept2 = vmjobs.runtime_jobs(None, [dict(MIRROR, offset=11 * MiB)], now=100.5,
                                      samples=kept)
    assert jobs[0]["info"]["rate"] == 2 * MiB
    assert kept2 == kept


def test_samples_of_ended_jobs_and_restarted_counters() -> None:
    jobs, kept = vmjobs.runtime_jobs(None, [], now=5.0, samples={"disk0": [1.0, 5.0]})
    assert (jobs, kept) == ([], {})
    jobs, _ = vmjobs.runtime_jobs(None, [dict(MIRROR, offset=0)], now=5.0,
                                  samples={"disk0": [1.0, float(50 * MiB)]})
    assert jobs[0]["info"]["rate"] == 0.0


@pytest.mark.parametrize("qemu_type,op_type", [("mirror", "mirror"), ("stream", "rebase"),
                                               ("commit", "commit"), ("backup", "copy"),
                                               ("create", "copy")])
def test_block_job_types(qemu_type: str, op_type: str) -> None:
    jobs, _ = vmjobs.runtime_jobs(None, [dict(MIRROR, type=qemu_type)], now=0.0)
    assert jobs[0]["info"]["opType"] == op_type


def test_a_block_job_with_an_io_error_is_unknown_and_junk_is_skipped() -> None:
    jobs, kept = vmjobs.runtime_jobs(None, [dict(MIRROR, **{"io-status": "failed"}),
                                            {"type": "mirror"}, 7], now=0.0)
    assert [j["state"] for j in jobs] == ["unknown"]
    assert list(kept) == ["disk0"]


@pytest.mark.parametrize("job_device,disk", [
    ("ganeti-mirror-disk0", "disk/0"), ("ganeti-mirror-disk12", "disk/12"),
    ("disk1", "disk/1"), ("ganeti-mirror-hotdisk-ab", "ganeti-mirror-hotdisk-ab"),
    ("hotdisk-ab", "hotdisk-ab"), ("diskette", "diskette")],
    ids=["our-mirror", "index-12", "a-drive", "hotplugged-mirror", "hotplugged", "no-index"])
def test_a_block_job_shows_the_disk_and_keeps_qemus_job_name(job_device: str,
                                                             disk: str) -> None:
    jobs, kept = vmjobs.runtime_jobs(None, [dict(MIRROR, device=job_device)], now=0.0)
    assert (jobs[0]["info"]["device"], jobs[0]["info"]["job"]) == (disk, job_device)
    assert list(kept) == [job_device]      # samples stay per job


def test_migration_and_mirror_together() -> None:
    jobs, _ = vmjobs.runtime_jobs(MIGRATE_ACTIVE, [MIRROR], now=0.0)
    assert [j["info"]["jobType"] for j in jobs] == ["migration", "block"]
