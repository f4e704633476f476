"""The commands-table driven ``main`` of every ``gnt-*`` tool.

A tool is a dict ``verb -> (func, args_spec, options, usage, description)``;
``func(opts, args) -> int``.  :func:`generic_main` parses the verb's
options (:mod:`ganeti.cli.argparse_lite`), checks the positional arguments, runs the verb and
turns errors into Ganeti's messages and exit codes (:mod:`ganeti.cli.failure`).
"""

from __future__ import annotations

import os
import sys

from ganeti import constants, errors
from ganeti.cli import argparse_lite
from ganeti.cli.failure import EXIT_INTERRUPTED, EXIT_SUCCESS, EXIT_USAGE, format_error
from ganeti.cli.options import (COMMON_OPTS, PRINT_JOBID_OPT, SUBMIT_OPT, Arg, Option,
                                check_arguments)
from ganeti.cli.output import to_stderr, to_stdout

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

__all__ = ["generic_main", "Command", "usage_error"]

if TYPE_CHECKING:
    Command: TypeAlias = tuple[Callable[[Any, list[str]], int], list[Arg], list[Option], str,
                               str]
else:  # the name exists at run time too (``cli.Command``), without typing
    Command = tuple


def usage_error(command: str, msg: str) -> int:
    """Print a usage error for ``command`` (``"gnt-job info"``); returns :data:`EXIT_USAGE`."""
    to_stderr(f"{command}: error: {msg}")
    return EXIT_USAGE


def _tool_usage(prog: str, commands: dict[str, Command], aliases: dict[str, str]) -> str:
    lines = [f"Usage: {prog} {{command}} [options...] [argument...]",
             f"{prog} <command> --help to see details, or man {prog}", "", "Commands:"]
    width = max((len(v) for v in commands), default=0)
    for verb in sorted(commands):
        lines.append(f"  {verb.ljust(width)}  {commands[verb][4].splitlines()[0] if commands[verb][4] else ''}")
    if aliases:
        lines.append("")
        lines.append("Aliases: " + ", ".join(f"{a} = {t}" for a, t in sorted(aliases.items())))
    return "\n".join(lines)


def _terminal_width() -> int:
    try:
        return max(40, min(os.get_terminal_size(sys.stderr.fileno()).columns, 120))
    except (OSError, ValueError):
        return 80


def _usage_line(prog: str, verb: str, command: Command) -> str:
    usage = command[3]
    usage_args = " ".join(a.usage() for a in command[1])
    return f"{prog} {verb} {usage or '[options] ' + usage_args}".rstrip()


def _verb_options(command: Command) -> list[Option]:
    """The verb's options (several may share a ``dest``: ``--name-check`` and
    ``--no-name-check``), then those of :data:`COMMON_OPTS` whose ``dest`` the
    verb's do not set already.

    A verb that takes ``--submit`` also takes ``--print-jobid`` (Ganeti's
    ``SUBMIT_OPTS``): the job id on stdout.
    """
    result = list(dict.fromkeys(command[2]))
    seen = {opt.dest for opt in result}
    extra = [PRINT_JOBID_OPT] if SUBMIT_OPT in command[2] else []
    for opt in extra + COMMON_OPTS:
        if opt.dest in seen:
            continue
        seen.add(opt.dest)
        result.append(opt)
    return result


def _build_parser(prog: str, verb: str, command: Command) -> Any:
    """An argparse parser for the verb: used for ``--help`` (and exotic options) only."""
    import argparse

    def formatter(prog: str) -> argparse.HelpFormatter:
        # argparse's default asks shutil for the terminal size: an import
        # every command would pay for, help or not.
        return argparse.HelpFormatter(prog, width=_terminal_width())

    usage_args = " ".join(a.usage() for a in command[1])
    parser = argparse.ArgumentParser(prog=f"{prog} {verb}", usage=_usage_line(prog, verb, command),
                                     description=command[4], add_help=True,
                                     formatter_class=formatter)
    for opt in _verb_options(command):
        opt.add_to(parser)
    parser.add_argument("args", nargs="*", metavar=usage_args or "args",
                        help=argparse.SUPPRESS)
    return parser


def _parse_verb_args(prog: str, verb: str, command: Command,
                     argv: list[str]) -> tuple[Any, int | None]:
    """Parse a verb's options and arguments: ``(opts, None)`` or ``(None, exit_code)``.

    The hot path uses :mod:`ganeti.cli.argparse_lite`; argparse is imported
    only to print ``--help`` or for options the light parser does not know.
    """
    options = _verb_options(command)
    if not argparse_lite.supports(options):
        parser = _build_parser(prog, verb, command)
        try:
            return parser.parse_intermixed_args(argv), None
        except SystemExit as exc:  # argparse: 0 after --help, 2 after a usage error
            return None, exc.code if isinstance(exc.code, int) else EXIT_USAGE
    result = argparse_lite.parse(argparse_lite.OptionTable(options), argv)
    if result.help:
        to_stdout(_build_parser(prog, verb, command).format_help().rstrip("\n"))
        return None, EXIT_SUCCESS
    if result.error is not None:
        to_stderr(f"usage: {_usage_line(prog, verb, command)}")
        to_stderr(f"{prog} {verb}: error: {result.error}")
        return None, EXIT_USAGE
    return result.values, None


def _setup_logging(debug: int) -> None:
    import logging
    logging.basicConfig(level=logging.DEBUG if debug > 1 else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)


def generic_main(commands: dict[str, Command], argv: list[str] | None = None,
                 prog: str | None = None, *, aliases: dict[str, str] | None = None,
                 client_factory: Callable[[], Any] | None = None) -> int:
    """Run one ``gnt-*`` command line; returns the exit code (see module doc).

    ``argv`` excludes the program name (default ``sys.argv[1:]``).
    ``client_factory`` replaces the LUXI client (tests).
    """
    if argv is None:
        argv = sys.argv[1:]
    if prog is None:
        prog = os.path.basename(sys.argv[0]) or "gnt"
    aliases = aliases or {}
    if not argv:
        to_stderr(_tool_usage(prog, commands, aliases))
        return EXIT_USAGE
    first = argv[0]
    if first in ("-h", "--help", "help"):
        to_stdout(_tool_usage(prog, commands, aliases))
        return EXIT_SUCCESS
    if first == "--version":
        to_stdout(constants.VERSION_LINE % {"prog": prog})
        return EXIT_SUCCESS
    verb = aliases.get(first, first)
    if verb not in commands:
        to_stderr(f"Error: unknown command '{first}' for {prog}")
        to_stderr(_tool_usage(prog, commands, aliases))
        return EXIT_USAGE
    command = commands[verb]
    opts, code = _parse_verb_args(prog, verb, command, argv[1:])
    if opts is None:
        return EXIT_USAGE if code is None else code
    args: list[str] = opts.args
    problem = check_arguments(command[1], args)
    if problem:
        to_stderr(f"usage: {_usage_line(prog, verb, command)}")
        to_stderr(f"{prog} {verb}: error: {problem}")
        return EXIT_USAGE
    opts.command = f"{prog} {verb}"
    opts.client_factory = client_factory
    debug = getattr(opts, "debug", 0)
    if debug:
        _setup_logging(debug)
    try:
        result = command[0](opts, args)
    except KeyboardInterrupt:
        to_stderr("Aborted. Note that if the operation created any jobs, they might"
                  " have been submitted and will continue to run in the background.")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (e.g. "| head"): stop quietly, like other tools
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_SUCCESS
    except Exception as exc:  # every error becomes a message and an exit code
        code, msg = format_error(exc)
        if debug or not isinstance(exc, errors.GanetiError):
            import traceback
            traceback.print_exc()
        to_stderr(msg)
        return code
    return EXIT_SUCCESS if result is None else int(result)
