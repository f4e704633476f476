"""The watcher's start of the metadata daemon (ganeti/watcher/nodes.py, ensure_metad)."""

from __future__ import annotations

import os

from ganeti import constants, errors
from ganeti.pathutils import Paths
from ganeti.watcher import nodes


def _starter(calls: list[str], fail: bool = False):
    def start() -> None:
        calls.append("start")
        if fail:
            raise errors.OpExecError("Cannot start the metadata daemon (exit 1): no address")
    return start


def test_nothing_to_serve_starts_nothing(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    calls: list[str] = []
    assert nodes.ensure_metad(paths, {}, start=_starter(calls)) is None
    os.makedirs(paths.metadata_dir)
    assert nodes.ensure_metad(paths, {}, start=_starter(calls)) is None
    assert calls == []


def test_entries_start_it_and_a_failure_is_only_reported(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    os.makedirs(paths.metadata_dir)
    with open(paths.metadata_entry("web1"), "w", encoding="utf-8") as fh:
        fh.write("{}")
    calls: list[str] = []
    assert nodes.ensure_metad(paths, {}, start=_starter(calls)) == "started the metadata daemon"
    out = nodes.ensure_metad(paths, {}, start=_starter(calls, fail=True))
    assert out is not None and "no address" in out
    assert calls == ["start", "start"]


def test_a_running_daemon_is_left_alone(tmp_path) -> None:
    paths = Paths(root=str(tmp_path))
    os.makedirs(paths.metadata_dir)
    with open(paths.metadata_entry("web1"), "w", encoding="utf-8") as fh:
        fh.write("{}")
    os.makedirs(paths.run_dir)
    with open(paths.pid_file(constants.METAD), "w", encoding="ascii") as fh:
        fh.write(f"{os.getpid()}\n")        # a live process: "running"
    calls: list[str] = []
    assert nodes.ensure_metad(paths, {}, start=_starter(calls)) is None
    assert calls == []
