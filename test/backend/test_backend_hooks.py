"""Tests for ganeti.backend.hooks and backend.test."""

from __future__ import annotations

import os

import pytest

from ganeti import constants, errors
from ganeti.backend import hooks
from ganeti.backend import test as backend_test


def _script(directory: str, name: str, body: str, executable: bool = True) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755 if executable else 0o644)


def test_runs_in_sorted_order_with_env(ctx, tmp_path) -> None:
    d = ctx.paths.hooks_dir("node-add", "pre")
    log = tmp_path / "order"
    _script(d, "20-second", f'echo second >> {log}; echo "$GANETI_NODE_NAME $GANETI_HOOKS_PATH"')
    _script(d, "10-first", f"echo first >> {log}; echo phase=$GANETI_HOOKS_PHASE")
    _script(d, "30-fail", "echo bad >&2; exit 3")
    _script(d, "40-skip.sh", "echo never")
    _script(d, "50-noexec", "echo never", executable=False)
    os.makedirs(os.path.join(d, "60-dir"))
    res = hooks.hooks_runner(ctx, "node-add", "pre", {"GANETI_NODE_NAME": "n9"})
    assert log.read_text() == "first\nsecond\n"
    assert res[0] == ["10-first", constants.HKR_SUCCESS, "phase=pre\n"]
    assert res[1] == ["20-second", constants.HKR_SUCCESS, "n9 node-add\n"]
    assert res[2][0:2] == ["30-fail", constants.HKR_FAIL] and "bad" in res[2][2]
    assert "status 3" in res[2][2]
    assert [r[:2] for r in res[3:]] == [["40-skip.sh", constants.HKR_SKIP],
                                        ["50-noexec", constants.HKR_SKIP],
                                        ["60-dir", constants.HKR_SKIP]]


def test_env_is_clean(ctx, monkeypatch) -> None:
    monkeypatch.setenv("SECRET_FROM_DAEMON", "leak")
    _script(ctx.paths.hooks_dir("x", "post"), "a", 'echo "[$SECRET_FROM_DAEMON]"')
    assert hooks.hooks_runner(ctx, "x", "post", {})[0][2] == "[]\n"


def test_timeout_fails_script(ctx) -> None:
    ctx.hooks_timeout = 0.3
    _script(ctx.paths.hooks_dir("x", "pre"), "slow", "sleep 30")
    res = hooks.hooks_runner(ctx, "x", "pre", {})
    assert res[0][1] == constants.HKR_FAIL and "timed out" in res[0][2]


def test_missing_directory_is_empty(ctx) -> None:
    assert hooks.hooks_runner(ctx, "node-add", "post", {}) == []


@pytest.mark.parametrize("hpath, phase", [("../x", "pre"), ("node-add", "middle")])
def test_bad_hpath_or_phase(ctx, hpath: str, phase: str) -> None:
    with pytest.raises(errors.OpExecError):
        hooks.hooks_runner(ctx, hpath, phase, {})


def test_test_delay(ctx) -> None:
    slept = []
    ctx.sleep = slept.append
    backend_test.test_delay(ctx, 1.5)
    assert slept == [1.5]
    with pytest.raises(errors.OpExecError):
        backend_test.test_delay(ctx, -1)
