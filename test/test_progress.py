"""ganeti.progress: entries, rate and eta, throttling, the final entry, text."""

from __future__ import annotations

import json

import pytest

from ganeti import progress
from test.fakes.clock import FakeClock

MiB = 1024 * 1024


def test_entry_has_the_contract_keys_and_is_json() -> None:
    msg = progress.entry("migration", 10, 100, rate=2.0, eta=45.04)
    assert msg == {"op": "migration", "cur": 10, "end": 100, "unit": "bytes", "rate": 2.0,
                   "eta": 45.0, "done": False, "error": None}
    assert json.loads(json.dumps(msg)) == msg
    assert progress.is_entry(msg)


def test_final_entry_has_no_eta_and_keeps_the_error() -> None:
    msg = progress.entry("wipe", 5, 10, eta=3.0, done=True, error="disk gone")
    assert msg["eta"] is None and msg["done"] and msg["error"] == "disk gone"


@pytest.mark.parametrize("cur,end", [(-1, 10), (1, -1), ("1", 10), (True, 10)],
                         ids=["neg-cur", "neg-end", "str", "bool"])
def test_entry_refuses_bad_figures(cur: object, end: object) -> None:
    with pytest.raises(ValueError):
        progress.entry("x", cur, end)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, "text", {"op": "x"}, {"cur": 1}], ids=str)
def test_is_entry_refuses_other_messages(value: object) -> None:
    assert not progress.is_entry(value)


def test_rate_needs_two_samples() -> None:
    clock = FakeClock(0.0)
    meter = progress.RateMeter(clock)
    meter.add(0)
    assert meter.rate() == 0.0 and meter.eta(100) is None
    clock.advance(2)
    meter.add(20 * MiB)
    assert meter.rate() == 10 * MiB
    assert meter.eta(100 * MiB) == pytest.approx(8.0)


def test_rate_uses_a_sliding_window() -> None:
    clock = FakeClock(0.0)
    meter = progress.RateMeter(clock, window=5.0)
    for step in range(10):          # 1 MiB/s for 10 s ...
        meter.add(step * MiB)
        clock.advance(1)
    for step in range(10, 16):      # ... then 3 MiB/s
        meter.add(9 * MiB + (step - 9) * 3 * MiB)
        clock.advance(1)
    assert meter.rate() == pytest.approx(3 * MiB)


def test_rate_restarts_when_the_counter_goes_back() -> None:
    clock = FakeClock(0.0)
    meter = progress.RateMeter(clock)
    meter.add(50)
    clock.advance(1)
    meter.add(10)
    assert meter.rate() == 0.0


def test_throttle_passes_first_then_per_second_and_percent() -> None:
    clock = FakeClock(0.0)
    throttle = progress.Throttle(clock)
    assert throttle.passes(0, 1000)
    clock.advance(0.5)
    assert not throttle.passes(500, 1000)          # too soon
    clock.advance(0.5)
    assert throttle.passes(500, 1000)
    clock.advance(5)
    assert not throttle.passes(505, 1000)          # under 1 %
    clock.advance(5)
    assert throttle.passes(505, 1000)              # heartbeat after 10 s
    assert throttle.passes(505, 2000)              # the total changed
    assert throttle.passes(505, 2000, final=True)


def test_reporter_bounds_the_entries_of_a_long_copy() -> None:
    clock = FakeClock(0.0)
    out: list[dict] = []
    with progress.Reporter(out.append, "disk-copy", clock=clock, end=1000 * MiB) as rep:
        for step in range(1, 10001):              # 10,000 updates over 1000 s
            clock.advance(0.1)
            rep.update(step * MiB // 10)
    assert 90 <= len(out) <= 102
    assert [m for m in out if m["done"]] == [out[-1]]
    assert out[-1]["error"] is None and out[-1]["cur"] == 1000 * MiB
    assert out[-1]["rate"] == pytest.approx(MiB)
    assert out[1]["rate"] == pytest.approx(MiB) and out[1]["eta"] is not None


def test_reporter_writes_the_error_as_final_entry_and_reraises() -> None:
    clock = FakeClock(0.0)
    out: list[dict] = []
    with pytest.raises(RuntimeError):
        with progress.Reporter(out.append, "migration", clock=clock, end=100) as rep:
            rep.update(40)
            raise RuntimeError("target died")
    assert out[-1] == progress.entry("migration", 40, 100, done=True, error="target died")
    assert sum(m["done"] for m in out) == 1


def test_reporter_finish_is_written_once() -> None:
    out: list[dict] = []
    with progress.Reporter(out.append, "wipe", clock=FakeClock(0.0), end=10) as rep:
        rep.finish("stopped", cur=3)
        assert not rep.update(5)
    assert len(out) == 1 and out[0]["error"] == "stopped" and out[0]["cur"] == 3


def test_reporter_prefers_the_sources_rate_and_eta() -> None:
    out: list[dict] = []
    rep = progress.Reporter(out.append, "migration", clock=FakeClock(0.0), end=100)
    rep.update(1, rate=7.0, eta=3.0)
    assert out[0]["rate"] == 7.0 and out[0]["eta"] == 3.0


def test_runtime_job_shapes() -> None:
    block = progress.runtime_job("block", 5, 10, op_type="mirror", device="disk/0",
                                 bandwidth=8, rate=1.5, eta=3.33)
    assert block == {"state": "normal", "info": {
        "jobType": "block", "opType": "mirror", "device": "disk/0", "cur": 5, "end": 10,
        "bandwidth": 8, "rate": 1.5, "eta": 3.3}}
    mig = progress.runtime_job("migration", 1, 2)
    assert "opType" not in mig["info"] and mig["info"]["eta"] is None
    assert progress.is_runtime_job(block) and progress.is_runtime_job(mig)
    assert not progress.is_runtime_job({"state": "normal"})


@pytest.mark.parametrize("count,text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"),
                                        (10 * MiB, "10.0 MiB"), (3 * 1024 * MiB, "3.0 GiB")])
def test_format_bytes(count: int, text: str) -> None:
    assert progress.format_bytes(count) == text


@pytest.mark.parametrize("secs,text", [(4.4, "4s"), (185, "3m05s"), (7620, "2h07m")])
def test_format_duration(secs: float, text: str) -> None:
    assert progress.format_duration(secs) == text


def test_render_line_running_done_and_failed() -> None:
    running = progress.entry("migration", 64 * MiB, 256 * MiB, rate=32 * MiB, eta=6)
    assert progress.render_line(running) == \
        "migration: 25.0% (64.0 MiB/256.0 MiB, 32.0 MiB/s, eta 6s)"
    done = progress.entry("migration", 256 * MiB, 256 * MiB, rate=16 * MiB, done=True)
    assert progress.render_line(done) == "migration: done, 256.0 MiB, 16.0 MiB/s"
    failed = progress.entry("export", 10, 40, done=True, error="no space")
    assert progress.render_line(failed) == "export: failed at 25.0%: no space"
    unknown_end = progress.entry("wipe", 2048, 0)
    assert progress.render_line(unknown_end) == "wipe: ?% (2.0 KiB)"


def test_render_bar_fits_the_width() -> None:
    msg = progress.entry("disk-copy", 50, 100, rate=10.0, eta=5)
    bar = progress.render_bar(msg, width=60)
    assert len(bar) == 60 and bar.startswith("disk-copy [")
    inside = bar[bar.index("[") + 1:bar.index("]")]
    assert inside.count("#") == len(inside) // 2
    assert progress.render_bar(msg, width=20) == progress.render_line(msg)[:20]


def test_render_runtime_job() -> None:
    job = progress.runtime_job("block", MiB, 4 * MiB, op_type="copy", device="disk/1",
                               bandwidth=10, rate=MiB, eta=3)
    assert progress.render_runtime_job(job) == \
        "block copy disk/1: 25.0% (1.0 MiB/4.0 MiB, 1.0 MiB/s, eta 3s), limit 10 MiB/s"
    unknown = progress.runtime_job("migration", 0, 0, state="unknown")
    assert progress.render_runtime_job(unknown) == "migration (unknown): ?% (0 B)"


def test_cli_formats_progress_entries_as_plain_lines() -> None:
    from ganeti import constants
    from ganeti.cli import format_log_message
    msg = progress.entry("wipe", 1, 4, done=True, error="stopped")
    assert format_log_message(constants.ELOG_PROGRESS, msg) == "wipe: failed at 25.0%: stopped"
    # a malformed message of that type is still printable
    assert format_log_message(constants.ELOG_PROGRESS, {"x": 1}) == "{'x': 1}"
