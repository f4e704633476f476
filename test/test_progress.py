"""ganeti.progress: entries, rate and eta, throttling, the final entry, text."""

from __future__ import annotations

import json
import time

import pytest

from ganeti import progress
from fakes.clock import FakeClock

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
    assert progress.render_line(progress.entry("migration", 0, 0, done=True)) == \
        "migration: done"
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


def test_migration_figures_from_the_status_contract() -> None:
    status = {"status": "active", "mbps": 80.0,
              "ram": {"transferred": 10, "remaining": 90, "total": 100},
              "disks": [{"device": "d0", "cur": 5, "end": 50, "ready": False, "speed": 2},
                        {"device": "d1", "cur": 1, "end": 10, "ready": True, "speed": 3}]}
    assert progress.migration_figures(status) == {"migration": (10, 100, 10e6),
                                                  "mirror": (6, 60, 5.0)}
    assert progress.migration_figures({"status": "setup"}) == {}
    # dirtied pages sent again: transferred passes total, remaining tells
    again = {"ram": {"transferred": 130, "remaining": 20, "total": 100}}
    assert progress.migration_figures(again) == {"migration": (80, 100, None)}
    assert progress.migration_figures({"ram": {"transferred": 30, "total": 100}}) == \
        {"migration": (30, 100, None)}


def test_migration_progress_finishes_every_op_it_saw() -> None:
    clock = FakeClock(0.0)
    out: list[dict] = []

    def make(op: str) -> progress.Reporter:
        return progress.Reporter(out.append, op, clock=clock)
    with pytest.raises(RuntimeError):
        with progress.MigrationProgress(make) as tracker:
            tracker.update({"ram": {"transferred": 1, "total": 4},
                            "disks": [{"cur": 2, "end": 8}]})
            raise RuntimeError("cancelled")
    finals = [m for m in out if m["done"]]
    assert sorted(m["op"] for m in finals) == ["migration", "mirror"]
    assert all(m["error"] == "cancelled" for m in finals)


def _printed(tty: bool, entries: list[list]) -> str:
    import io

    from ganeti import constants
    from ganeti.cli.jobs import LogPrinter
    out = io.StringIO()
    printer = LogPrinter(out, tty=tty, width=60)
    for serial, (kind, msg) in enumerate(entries):
        printer([serial, [0, 0], {"p": constants.ELOG_PROGRESS, "m": "message"}[kind], msg])
    printer.close()
    return out.getvalue()


_RUN = [("m", "* migrating"), ("p", progress.entry("migration", 25, 100)),
        ("m", "a warning"), ("p", progress.entry("migration", 50, 100)),
        ("p", progress.entry("migration", 100, 100, rate=50.0, done=True))]


def test_log_printer_without_a_terminal_prints_plain_lines() -> None:
    text = _printed(False, _RUN)
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 5 and all(line.startswith(time.ctime(0)) for line in lines)
    assert [line[len(time.ctime(0)) + 1:] for line in lines] == [
        "* migrating", "migration: 25.0% (25 B/100 B)", "a warning",
        "migration: 50.0% (50 B/100 B)", "migration: done, 100 B, 50 B/s"]


def test_log_printer_on_a_terminal_redraws_one_bar() -> None:
    text = _printed(True, _RUN)
    assert text.count("\n") == 3            # two messages and the final line
    bars = [part for part in text.split("\r") if part.startswith("migration [")]
    assert len(bars) == 3                    # 25 %, redrawn after the warning, 50 %
    assert all(len(bar) == 59 for bar in bars)
    assert "#" * 10 in bars[-1]
    assert text.endswith("migration: done, 100 B, 50 B/s\n")
    # the warning is printed on a cleared line, and the bar drawn again below it
    clear = "\r" + " " * 59 + "\r"
    assert f"{clear}{time.ctime(0)} a warning\n\rmigration [" in text


def test_log_printer_ends_a_dangling_bar() -> None:
    text = _printed(True, [("p", progress.entry("wipe", 1, 2))])
    assert text.startswith("\rwipe [") and text.endswith("\n")
