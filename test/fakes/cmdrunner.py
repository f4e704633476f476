"""RecordingRunner: a command runner (ganeti.storage.runner) that records every
argv and answers from a script instead of running anything.

    runner = RecordingRunner()
    runner.on("vgs", stdout="  xenvg 1024.00 512.00\\n")   # every vgs call
    runner.on("lvcreate", rc=5, stderr="boom", times=1)     # the next lvcreate only
    lv = LogicalVolume(runner=runner)
    ...
    assert runner.commands("lvcreate") == [["lvcreate", ...]]

A rule matches when the argv starts with its prefix; the most recently added
matching rule that still has uses left answers.  A command no rule matches
answers rc 0 and empty output (so tests script only what they look at).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ganeti.utils.process import RunResult

__all__ = ["RecordingRunner"]


@dataclass
class _Rule:
    prefix: tuple[str, ...]
    stdout: str
    stderr: str
    rc: int
    times: int | None   # None: unlimited


class RecordingRunner:
    """Records argv lists; answers from rules added with :meth:`on`."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._rules: list[_Rule] = []

    def on(self, *prefix: str, stdout: str = "", stderr: str = "", rc: int = 0,
           times: int | None = None) -> RecordingRunner:
        """Answer commands starting with ``prefix`` (``times`` uses; None: always)."""
        self._rules.append(_Rule(tuple(prefix), stdout, stderr, rc, times))
        return self

    def __call__(self, argv: Sequence[str]) -> RunResult:
        argv = list(argv)
        self.calls.append(argv)
        for rule in reversed(self._rules):
            if tuple(argv[:len(rule.prefix)]) == rule.prefix and rule.times != 0:
                if rule.times is not None:
                    rule.times -= 1
                return RunResult(tuple(argv), rule.rc, None, rule.stdout, rule.stderr)
        return RunResult(tuple(argv), 0, None, "", "")

    def commands(self, program: str | None = None) -> list[list[str]]:
        """The recorded argv lists (only those of ``program`` if given)."""
        return [c for c in self.calls if program is None or c[0] == program]

    def programs(self) -> list[str]:
        """The program of every recorded call, in order."""
        return [c[0] for c in self.calls]
