"""ganeti.cli.argparse_lite: each feature and each error, and agreement with argparse."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
from typing import Any

import pytest

from ganeti import cli
from ganeti.cli import argparse_lite as lite
from ganeti.cli import main as climain
from ganeti.client import gnt_cluster, gnt_debug, gnt_instance, gnt_job, gnt_node, gnt_os

OPTS = [
    cli.Option("-o", "--output", dest="output", default=None, metavar="FIELDS"),
    cli.Option("-v", "--verbose", dest="verbose", action="count", default=0),
    cli.Option("-f", "--force", dest="force", action="store_true", default=False),
    cli.Option("--no-master", dest="on_master", action="store_false", default=True),
    cli.Option("-n", "--node", dest="nodes", action="append", default=[]),
    cli.Option("-r", "--repeat", dest="repeat", type=int, default=0),
    cli.Option("--timeout", dest="timeout", type=float, default=None),
    cli.Option("--units", dest="units", choices=["h", "m"], default=None),
    cli.Option("--priority", dest="priority", type=cli.options._priority_type, default=None),
    cli.Option("--offline", dest="offline", action="store_const", const=True, default=None),
    cli.Option("--tag", dest="tags", action="append_const", const="t"),
    cli.Option("--size", dest="size", type=int, default="7"),
    cli.Option("--submit", dest="submit_only", action="store_true", default=False),
    cli.Option("--submit-all", dest="submit_all", action="store_true", default=False),
]


def _parse(argv: list[str], opts: list[cli.Option] | None = None) -> lite.ParseResult:
    return lite.parse(lite.OptionTable(OPTS if opts is None else opts), argv)


def _ok(argv: list[str]) -> lite.Namespace:
    result = _parse(argv)
    assert result.error is None and not result.help, result.error
    assert result.values is not None
    return result.values


def _error(argv: list[str], opts: list[cli.Option] | None = None) -> str:
    result = _parse(argv, opts)
    assert result.values is None and result.error
    return result.error


def test_defaults() -> None:
    ns = _ok([])
    assert (ns.output, ns.verbose, ns.force, ns.on_master, ns.nodes, ns.repeat) == \
        (None, 0, False, True, [], 0)
    assert ns.offline is None and ns.tags is None and ns.args == []
    assert ns.size == 7  # a string default goes through the type, like argparse


def test_long_options_both_spellings() -> None:
    assert _ok(["--output", "a,b"]).output == "a,b"
    assert _ok(["--output=a,b"]).output == "a,b"
    assert _ok(["--output="]).output == ""
    assert _ok(["--output=x=y"]).output == "x=y"


def test_short_options_all_spellings() -> None:
    assert _ok(["-o", "a"]).output == "a"
    assert _ok(["-oa"]).output == "a"
    assert _ok(["-o=a"]).output == "a"


def test_bundled_short_flags() -> None:
    ns = _ok(["-vvf"])
    assert ns.verbose == 2 and ns.force is True
    ns = _ok(["-vfo", "x"])
    assert ns.verbose == 1 and ns.force and ns.output == "x"
    assert _ok(["-vox"]).output == "x"


def test_unique_prefix_of_a_long_option() -> None:
    assert _ok(["--out", "x"]).output == "x"
    assert _ok(["--prio=high"]).priority == -10
    assert _ok(["--submit"]).submit_only is True  # an exact match beats longer flags


def test_ambiguous_prefix_is_an_error() -> None:
    msg = _error(["--sub"])
    assert msg.startswith("ambiguous option: --sub could match") and "--submit-all" in msg


def test_double_dash_ends_options() -> None:
    # (argparse's parse_intermixed_args still takes "-v" after "--" as an option)
    ns = _ok(["-f", "--", "-v", "--output", "x"])
    assert ns.force and ns.verbose == 0 and ns.args == ["-v", "--output", "x"]


def test_intermixed_options_and_arguments() -> None:
    ns = _ok(["a", "-f", "b", "--output", "x", "c"])
    assert ns.args == ["a", "b", "c"] and ns.force and ns.output == "x"


def test_dash_and_negative_numbers_are_arguments() -> None:
    assert _ok(["-", "-1", "-2.5", "-.5"]).args == ["-", "-1", "-2.5", "-.5"]
    assert _ok(["--repeat", "-3"]).repeat == -3
    assert _ok(["-r", "-3"]).repeat == -3


def test_argument_with_space_is_not_an_option() -> None:
    assert _ok(["-x y"]).args == ["-x y"]


def test_actions() -> None:
    ns = _ok(["--no-master", "-n", "a", "--node=b", "--offline", "--tag", "--tag", "-vvv"])
    assert ns.on_master is False and ns.nodes == ["a", "b"] and ns.offline is True
    assert ns.tags == ["t", "t"] and ns.verbose == 3
    assert _ok(["-f", "-f"]).force is True


def test_append_does_not_touch_the_default_list() -> None:
    default = OPTS[4].kwargs["default"]
    assert _ok(["-n", "a"]).nodes == ["a"]
    assert _ok(["-n", "b"]).nodes == ["b"]
    assert default == []


def test_store_last_wins() -> None:
    assert _ok(["-o", "a", "-o", "b"]).output == "b"


def test_types() -> None:
    ns = _ok(["-r", "3", "--timeout", "1.5", "--priority", "low", "--size", "9"])
    assert ns.repeat == 3 and ns.timeout == 1.5 and ns.priority == 10 and ns.size == 9


def test_choices() -> None:
    assert _ok(["--units", "m"]).units == "m"
    assert _error(["--units", "x"]) == \
        "argument --units: invalid choice: 'x' (choose from 'h', 'm')"


def test_dest_defaults_to_the_longest_flag() -> None:
    opts = [cli.Option("-x", "--extra-thing", action="store_true")]
    assert _parse(["-x"], opts).values.extra_thing is True  # type: ignore[union-attr]


@pytest.mark.parametrize("argv,msg", [
    (["--output"], "argument -o/--output: expected one argument"),
    (["-o"], "argument -o/--output: expected one argument"),
    (["-o", "-f"], "argument -o/--output: expected one argument"),
    (["-o", "--"], "argument -o/--output: expected one argument"),
    (["-r", "x"], "argument -r/--repeat: invalid int value: 'x'"),
    (["--timeout=soon"], "argument --timeout: invalid float value: 'soon'"),
    (["--priority", "urgent"],
     "argument --priority: invalid priority 'urgent' (use low, normal or high)"),
    (["--force=yes"], "argument -f/--force: ignored explicit argument 'yes'"),
    (["-fz"], "argument -f/--force: ignored explicit argument 'z'"),
    (["--help=x"], "argument -h/--help: ignored explicit argument 'x'"),
    (["a", "--bogus", "-z"], "unrecognized arguments: --bogus -z"),
], ids=["long-no-value", "short-no-value", "option-as-value", "dashdash-as-value", "bad-int",
        "bad-float", "bad-converter", "flag-with-value", "bad-bundle", "help-with-value",
        "unknown"])
def test_errors(argv: list[str], msg: str) -> None:
    assert _error(argv) == msg


def test_required_option() -> None:
    opts = [cli.Option("-t", "--template", dest="template", required=True)]
    assert _error([], opts) == "the following arguments are required: -t/--template"
    assert _parse(["-t", "plain"], opts).values.template == "plain"  # type: ignore[union-attr]


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["--he"], ["-f", "--help", "--bogus"],
                                  ["-fh"]])
def test_help_is_reported(argv: list[str]) -> None:
    result = _parse(argv)
    assert result.help and result.values is None and result.error is None


def test_error_before_help_wins() -> None:
    assert _error(["-r", "x", "--help"]).startswith("argument -r/--repeat")


def test_namespace() -> None:
    ns = lite.Namespace(a=1, b=[2])
    assert ns == lite.Namespace(a=1, b=[2]) and ns != lite.Namespace(a=2, b=[2])
    assert "a" in ns and "c" not in ns and vars(ns) == {"a": 1, "b": [2]}
    assert repr(ns) == "Namespace(a=1, b=[2])"


def test_supports() -> None:
    assert lite.supports(OPTS)
    assert not lite.supports([cli.Option("--x", nargs=2)])
    assert not lite.supports([cli.Option("--x", action=argparse._StoreAction)])
    assert not lite.supports([cli.Option("--x", action="extend")])
    assert not lite.supports([cli.Option("-xy")])
    assert not lite.supports([cli.Option("-h")])
    assert not lite.supports([cli.Option("-a"), cli.Option("-a", dest="b")])


def _unsupported(opts: Any, args: list[str]) -> int:
    cli.to_stdout(f"{opts.pair} {args}")
    return 0


def test_generic_main_falls_back_to_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    commands: dict[str, cli.Command] = {
        "pair": (_unsupported, [cli.ArgUnknown()], [cli.Option("--pair", nargs=2)], "", "P")}
    assert cli.generic_main(commands, ["pair", "--pair", "a", "b", "c"], "gnt-t") == 0
    assert capsys.readouterr().out == "['a', 'b'] ['c']\n"


# --- agreement with argparse on the real verbs ----------------------------------------

def _argparse_result(prog: str, verb: str, command: cli.Command,
                     argv: list[str]) -> tuple[str, Any]:
    parser = climain._build_parser(prog, verb, command)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            ns = parser.parse_intermixed_args(argv)
    except SystemExit as exc:
        if exc.code == 0:
            return "help", None
        return "error", err.getvalue().splitlines()[-1].split(": error: ", 1)[1]
    return "ok", vars(ns)


def _lite_result(command: cli.Command, argv: list[str]) -> tuple[str, Any]:
    result = lite.parse(lite.OptionTable(climain._verb_options(command)), argv)
    if result.help:
        return "help", None
    if result.error is not None:
        return "error", result.error
    return "ok", vars(result.values)


_TOOLS = [("gnt-debug", gnt_debug), ("gnt-job", gnt_job), ("gnt-instance", gnt_instance),
          ("gnt-node", gnt_node), ("gnt-cluster", gnt_cluster), ("gnt-os", gnt_os)]

_SAMPLES = [
    [], ["x"], ["x", "-d", "y", "-dd"], ["--reason", "why", "a"], ["--reason=why"], ["-d", "--", "-1", "x"],
    ["--bogus"], ["-q"], ["--reason"], ["-1"], ["--help"], ["-", "x"], ["--rea", "r"],
    ["--submit", "--priority", "high", "-o", "name", "--no-headers", "--separator=:"],
    ["--priority", "nope"], ["--priority=-5"], ["-f", "-v", "-vv", "--units", "g"],
    ["--units", "zz"], ["--timeout", "x"], ["-n", "a", "-n", "b", "-r", "2", "--no-master", "0"],
    ["-r", "x"], ["--dry-run", "--dry-run=1"], ["-fd", "x"], ["-o+a,b", "-F", "x"],
    ["--count", "3", "--interval", "0.5"], ["--interval"], ["--node=a", "--no"],
    ["-t", "plain", "--disk", "0:size=1G", "-B", "maxmem=1G", "--no-start", "i1"],
    ["--sub"], ["-vh"], ["--no-headers=x"], ["-o"], ["a", "-o", "-x"], ["--s=1"],
]


def test_same_results_as_argparse_for_every_verb() -> None:
    checked = 0
    for prog, module in _TOOLS:
        for verb, command in module.commands.items():
            if not lite.supports(climain._verb_options(command)):
                continue
            for argv in _SAMPLES:
                expected = _argparse_result(prog, verb, command, argv)
                got = _lite_result(command, argv)
                if expected[0] == "error" and "invalid _priority_type value" in expected[1]:
                    # the converter's ValueError text, as the old ArgumentTypeError gave
                    expected = ("error", "argument --priority: invalid priority 'nope'"
                                " (use low, normal or high)")
                if expected[0] == "error" and expected[1].startswith("unrecognized"):
                    # argparse also lists some positional arguments after an unknown option
                    expected = ("error", " ".join(w for w in expected[1].split()
                                                  if w.startswith(("-", "unrec", "arg"))))
                assert got == expected, (prog, verb, argv)
                checked += 1
    assert checked > 100


def test_every_real_verb_is_handled_by_the_light_parser() -> None:
    for _prog, module in _TOOLS:
        for verb, command in module.commands.items():
            assert lite.supports(climain._verb_options(command)), verb


def test_parse_path_does_not_import_argparse() -> None:
    code = ("import sys\nfrom ganeti.client import gnt_debug\n"
            "from ganeti.cli import main as m\n"
            "opts, code = m._parse_verb_args('gnt-debug', 'delay', gnt_debug.commands['delay'],"
            " ['0', '--priority', 'high', '-n', 'a'])\n"
            "assert code is None and opts.args == ['0'] and opts.priority == -10\n"
            "print([n for n in ('argparse', 'gettext') if n in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "[]"


def test_generic_main_usage_error_text(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.generic_main(gnt_debug.commands, ["delay", "0", "-r", "x"], "gnt-debug",
                          client_factory=object)
    assert rc == cli.EXIT_USAGE
    assert capsys.readouterr().err == (
        "usage: gnt-debug delay [options] DURATION\n"
        "gnt-debug delay: error: argument -r/--repeat: invalid int value: 'x'\n")


def test_generic_main_verb_help_matches_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.generic_main(gnt_debug.commands, ["delay", "-f", "--help"], "gnt-debug") == 0
    out = capsys.readouterr().out
    parser = climain._build_parser("gnt-debug", "delay", gnt_debug.commands["delay"])
    assert out == parser.format_help()
    assert "--no-master" in out and "-h, --help" in out


@pytest.mark.parametrize("argv", [["n1", "--plan"], ["n1", "--plan=json"], ["n1", "--plan=x"],
                                  ["--plan"]], ids=lambda a: " ".join(a))
def test_optional_value_option_as_argparse(argv: list[str]) -> None:
    command = gnt_node.commands["evacuate"]
    assert _lite_result(command, argv) == _argparse_result("gnt-node", "evacuate", command, argv)


def test_optional_value_is_only_taken_inline() -> None:
    # unlike argparse, "--plan NODE" leaves NODE a positional argument
    kind, values = _lite_result(gnt_node.commands["evacuate"], ["--plan", "n1"])
    assert kind == "ok" and values["plan"] == "text" and values["args"] == ["n1"]
