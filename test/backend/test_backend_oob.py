"""Node procedure ``run_oob``: the out-of-band program runs below the node's root."""

from __future__ import annotations

import os

import pytest

from ganeti import errors
from ganeti.backend import node

PROGRAM = "/usr/lib/ganeti/oob"


def _program(ctx, body: str, mode: int = 0o700) -> str:
    local = ctx.local_path(PROGRAM)
    os.makedirs(os.path.dirname(local), exist_ok=True)
    with open(local, "w", encoding="utf-8") as fh:
        fh.write("#!/bin/sh\n" + body)
    os.chmod(local, mode)
    return local


def test_run_oob_passes_command_and_node_and_returns_stdout(ctx) -> None:
    _program(ctx, 'echo "{\\"powered\\": true, \\"args\\": \\"$*\\"}"\n')
    out = node.run_oob(ctx, PROGRAM, "power-status", "node2.example.com", 5)
    assert out.strip() == '{"powered": true, "args": "power-status node2.example.com"}'


def test_run_oob_failure_carries_status_and_stderr(ctx) -> None:
    _program(ctx, "echo 'board unreachable' >&2\nexit 1\n")
    with pytest.raises(errors.OpExecError, match=r"'/usr/lib/ganeti/oob power-on n2' failed"
                                                 r" \(exit status 1\); output: board unreachable"):
        node.run_oob(ctx, PROGRAM, "power-on", "n2", 5)


def test_run_oob_kills_the_program_after_its_timeout(ctx) -> None:
    _program(ctx, "sleep 30\n")
    with pytest.raises(errors.OpExecError, match="killed after its timeout of 1s"):
        node.run_oob(ctx, PROGRAM, "health", "n2", 1)


@pytest.mark.parametrize("mode, command, problem", [
    (0o600, "health", "is not executable"),
    (None, "health", "does not exist"),
    (0o700, "power-up", "Unknown out-of-band command"),
], ids=["not-executable", "missing", "unknown-command"])
def test_run_oob_refuses_what_cannot_run(ctx, mode, command, problem) -> None:
    if mode is not None:
        _program(ctx, "exit 0\n", mode)
    with pytest.raises(errors.OpExecError, match=problem):
        node.run_oob(ctx, PROGRAM, command, "n2", 5)
