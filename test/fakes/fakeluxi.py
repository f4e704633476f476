"""FakeLuxi: a LUXI client answering in-process, shaped by the LUXI table.

It *is* a :class:`ganeti.luxi.Client` (whose methods are generated from
:data:`ganeti.luxi.METHODS`) with the one seam, :meth:`call`, replaced: a
front end under test calls the same typed methods with the same argument
conversion (opcode objects become dicts) and the same argument check as
against the real master, and what reaches the fake is the request's
``(method, args)`` as it would go on the wire.  A method without a row is
refused as the master refuses it, a call whose arguments do not fit its row
raises the master's :class:`errors.ParameterError`.

Answers come from ``answers``: per method name, a value, or a callable
taking the wire arguments.  Submissions have default answers (consecutive
job ids from ``first_job_id``) unless given.  Everything sent is kept in
:attr:`calls`; :attr:`submitted` lists the submitted jobs' opcodes.

    fake = FakeLuxi({"Query": {"fields": [], "data": []}})
    gnt_job.main(..., client_factory=lambda: fake)
    assert fake.calls == [("Query", ["job", ["id", "status"], None])]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ganeti import errors, luxi

__all__ = ["FakeLuxi", "NoAnswer"]

_SUBMIT_ONE = ("SubmitJob", "SubmitJobToDrainedQueue")


class NoAnswer(AssertionError):
    """The test gave no answer for a method the code under test called."""


class FakeLuxi(luxi.Client):
    """A :class:`ganeti.luxi.Client` whose :meth:`call` answers from ``answers``."""

    def __init__(self, answers: Mapping[str, Any] | None = None, *,
                 first_job_id: int = 1) -> None:
        super().__init__("(fake LUXI)")
        unknown = sorted(set(answers or {}) - set(luxi.METHODS))
        if unknown:
            raise errors.ProgrammerError(f"FakeLuxi: no LUXI method {unknown}"
                                         f" (see luxi.METHODS)")
        self.answers: dict[str, Any] = dict(answers or {})
        self.calls: list[tuple[str, list[Any]]] = []
        self.next_job_id = first_job_id

    def call(self, method: str, args: list[Any], *, timeout: float | None = None) -> Any:
        """Check the request against the table, record it and answer it."""
        if method not in luxi.METHODS:
            raise errors.ProtocolError(f"Unknown or unsupported LUXI method '{method}'")
        args = list(args)
        luxi.check_args(method, args)
        self.calls.append((method, args))
        if method in self.answers:
            answer = self.answers[method]
            return answer(*args) if callable(answer) else answer
        if method in _SUBMIT_ONE:
            return self._new_job_id()
        if method == "SubmitManyJobs":
            return [[True, self._new_job_id()] for _ in args[0]]
        raise NoAnswer(f"FakeLuxi: no answer for {method}{tuple(args)!r}")

    def _new_job_id(self) -> int:
        job_id = self.next_job_id
        self.next_job_id += 1
        return job_id

    def args_of(self, method: str) -> list[list[Any]]:
        """The arguments of every call of ``method``, in order."""
        return [args for name, args in self.calls if name == method]

    @property
    def submitted(self) -> list[list[dict[str, Any]]]:
        """The opcodes of every job submitted, in order (one list per job)."""
        jobs: list[list[dict[str, Any]]] = []
        for name, args in self.calls:
            if name in _SUBMIT_ONE:
                jobs.append(args[0])
            elif name == "SubmitManyJobs":
                jobs.extend(args[0])
        return jobs

    def answer_with(self, **answers: Any) -> FakeLuxi:
        """Add or replace answers (method name = value or callable); returns the fake."""
        unknown = sorted(set(answers) - set(luxi.METHODS))
        if unknown:
            raise errors.ProgrammerError(f"FakeLuxi: no LUXI method {unknown}")
        self.answers.update(answers)
        return self
