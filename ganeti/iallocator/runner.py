"""Running an allocator on an input document (doc/protocols/iallocator.md, "Running").

An external allocator is a program found by name in the search path
(upstream's ``/usr/local/lib/ganeti/iallocators`` and
``/usr/lib/ganeti/iallocators``, then the project's
``/etc/ganeti/iallocators``, all below the node root).  It is run as
``<path> FILE [--key=value ...]``: FILE is a temporary file holding the
document, the options come from the cluster's ``default_iallocator_params``.
Exit status 0 and a well-formed answer on stdout are required; anything
else raises :class:`errors.OpPrereqError` quoting the program's output,
and the caller changes nothing.

The built-in allocator (:mod:`ganeti.iallocator.builtin`) runs in
process: for its own name (``ganeti-iallocator``), for ``hail`` when no
program of that name is installed, and when no name is given at all (the
cluster has no ``default_iallocator``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from ganeti import errors, serializer
from ganeti.iallocator import answer as answer_mod
from ganeti.iallocator import builtin
from ganeti.utils import process

__all__ = ["find_allocator", "run_allocator", "resolve", "BUILTIN_FALLBACKS",
           "DEFAULT_TIMEOUT", "allocator_argv"]

#: Names that mean the built-in allocator when no program of that name exists.
BUILTIN_FALLBACKS = frozenset(["hail", builtin.NAME])
#: Seconds an external allocator may run.
DEFAULT_TIMEOUT = 300.0

Runner = Callable[..., process.RunResult]


def find_allocator(name: str, search_path: list[str]) -> str | None:
    """The path of the executable ``name`` in ``search_path``, or None.

    ``name`` must be a plain file name (OpPrereqError ECODE_INVAL otherwise).
    """
    if not name or "/" in name or name in (".", ".."):
        raise errors.OpPrereqError(f"Invalid iallocator name {name!r} (a file name in the"
                                   " iallocator search path)", errors.ECODE_INVAL)
    for directory in search_path:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def resolve(name: str | None, search_path: list[str]) -> str | None:
    """The program to run for ``name``; None means the built-in allocator.

    Raises OpPrereqError (ECODE_NOENT) for a name found nowhere.
    """
    if not name or name == builtin.NAME:
        return None
    path = find_allocator(name, search_path)
    if path is None:
        if name in BUILTIN_FALLBACKS:
            return None
        raise errors.OpPrereqError(f"iallocator '{name}' not found in the search path"
                                   f" ({', '.join(search_path)})", errors.ECODE_NOENT)
    return path


def allocator_argv(path: str, input_file: str, params: Mapping[str, Any]) -> list[str]:
    """``[path, input_file, --key=value ...]`` (``True`` gives a bare ``--key``)."""
    argv = [path, input_file]
    for key, value in sorted(params.items()):
        if value is True or value is None:
            argv.append(f"--{key}")
        elif value is not False:
            argv.append(f"--{key}={value}")
    return argv


def _builtin_options(params: Mapping[str, Any]) -> dict[str, bool]:
    return {"capacity_checks": not params.get("no-capacity-checks", False),
            "ignore_soft_errors": bool(params.get("ignore-soft-errors", False))}


def run_allocator(name: str | None, document: dict[str, Any], *, search_path: list[str],
                  params: Mapping[str, Any] | None = None, timeout: float = DEFAULT_TIMEOUT,
                  run: Runner = process.run_command,
                  tmpdir: str | None = None) -> answer_mod.Answer:
    """Run allocator ``name`` on ``document``; returns the checked answer.

    The answer may say ``success: false`` (see
    :meth:`~ganeti.iallocator.answer.Answer.require_success`).  Raises
    :class:`errors.OpPrereqError` when the program is missing, fails, or
    prints something that is not a well-formed answer.
    """
    params = dict(params or {})
    request = document["request"]
    path = resolve(name, search_path)
    if path is None:
        data = builtin.allocate(document, **_builtin_options(params))
        return answer_mod.parse_data(data, request)
    fd, input_file = tempfile.mkstemp(prefix="ganeti-iallocator-", suffix=".json", dir=tmpdir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(serializer.dumps(document))
        try:
            result = run(allocator_argv(path, input_file, params), timeout=timeout)
        except errors.CommandError as exc:
            raise errors.OpPrereqError(f"Cannot run iallocator '{name}': {exc}",
                                       errors.ECODE_ENVIRON) from None
    finally:
        try:
            os.unlink(input_file)
        except OSError:
            pass
    if result.failed:
        output = result.output.strip()
        if len(output) > answer_mod.MAX_SHOWN_OUTPUT:
            output = output[:answer_mod.MAX_SHOWN_OUTPUT] + "..."
        raise errors.OpPrereqError(f"iallocator '{name}' failed ({result.fail_reason});"
                                   f" its output:\n{output or '(none)'}",
                                   errors.ECODE_ENVIRON)
    return answer_mod.parse_answer(result.stdout, request)
