"""Command line option objects (``*_OPT``) and positional argument specs.

An :class:`Option` is argparse's flags plus keyword arguments, kept as data
so that a ``commands`` table can list the options of each verb.  Positional
arguments are described by :class:`Arg` objects (``[ArgJobId(min=1)]``) and
checked by :func:`check_arguments`.
"""

from __future__ import annotations

from ganeti import constants, errors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Option", "Arg", "ArgJobId", "ArgNode", "ArgFile", "ArgUnknown",
    "ARGS_NONE", "ARGS_MANY_JOBS", "ARGS_ONE_JOB", "check_arguments",
    "parse_fields", "parse_priority", "parse_timespec", "split_escaped", "PRIORITY_NAMES",
    "SUBMIT_OPT", "PRINT_JOBID_OPT", "PRIORITY_OPT", "NOHDR_OPT", "SEP_OPT",
    "FIELDS_OPT", "UNITS_OPT", "FILTER_OPT", "VERBOSE_OPT", "DEBUG_OPT",
    "FORCE_OPT", "DRY_RUN_OPT", "REASON_OPT", "TIMEOUT_OPT", "COMMON_OPTS",
]

PRIORITY_NAMES = {
    "low": constants.OP_PRIO_LOW,
    "normal": constants.OP_PRIO_NORMAL,
    "high": constants.OP_PRIO_HIGH,
}


class Option:
    """One command line option: argparse flags and keyword arguments."""

    __slots__ = ("flags", "kwargs")

    def __init__(self, *flags: str, **kwargs: Any) -> None:
        if not flags or not all(f.startswith("-") for f in flags):
            raise errors.ProgrammerError(f"Option flags must start with '-': {flags!r}")
        self.flags = flags
        self.kwargs = kwargs

    @property
    def dest(self) -> str:
        """The attribute name the parsed value is stored under."""
        if "dest" in self.kwargs:
            return self.kwargs["dest"]
        longest = max(self.flags, key=len)
        return longest.lstrip("-").replace("-", "_")

    def add_to(self, parser: Any) -> None:
        """Add this option to an argparse parser (``--help`` output)."""
        parser.add_argument(*self.flags, **self.kwargs)

    def __repr__(self) -> str:
        return f"Option({', '.join(self.flags)})"


class Arg:
    """A positional argument of a verb: a name and how many may be given."""

    __slots__ = ("name", "min", "max")
    label = "ARG"

    def __init__(self, min: int = 0, max: int | None = None, name: str | None = None) -> None:
        self.min = min
        self.max = max
        self.name = name or self.label

    def usage(self) -> str:
        """How the argument appears in a usage line (``JOB_ID...``)."""
        if self.min == 1 and self.max == 1:
            return self.name
        text = self.name + ("..." if self.max is None or self.max > 1 else "")
        return text if self.min else f"[{text}]"


class ArgJobId(Arg):
    """Job ids."""

    label = "JOB_ID"


class ArgNode(Arg):
    """Node names."""

    label = "NODE"


class ArgFile(Arg):
    """File names."""

    label = "FILE"


class ArgUnknown(Arg):
    """Free-form arguments."""

    label = "ARG"


ARGS_NONE: list[Arg] = []
ARGS_MANY_JOBS: list[Arg] = [ArgJobId()]
ARGS_ONE_JOB: list[Arg] = [ArgJobId(min=1, max=1)]


def check_arguments(spec: list[Arg], args: list[str]) -> str | None:
    """Check the number of positional arguments; returns an error text or None."""
    low = sum(a.min for a in spec)
    high: int | None = 0
    for a in spec:
        if a.max is None or high is None:
            high = None
        else:
            high += a.max
    if len(args) < low:
        names = " ".join(a.usage() for a in spec)
        return f"Not enough arguments (expected {names})"
    if high is not None and len(args) > high:
        if high == 0:
            return "This command takes no arguments"
        return f"Too many arguments (at most {high} allowed)"
    return None


def parse_fields(selected: str | None, default: list[str]) -> list[str]:
    """The output fields for ``-o``: None gives ``default``, ``+a,b`` appends."""
    if not selected:
        return list(default)
    if selected.startswith("+"):
        return list(default) + [f for f in selected[1:].split(",") if f]
    return [f for f in selected.split(",") if f]


def parse_priority(value: str) -> int:
    """Map ``low``/``normal``/``high`` (or an integer -20..19) to a priority."""
    try:
        return PRIORITY_NAMES[value.lower()]
    except KeyError:
        pass
    try:
        prio = int(value)
    except ValueError:
        raise ValueError(f"invalid priority {value!r} (use low, normal or high)") from None
    if not constants.OP_PRIO_HIGHEST <= prio <= constants.OP_PRIO_LOWEST:
        raise ValueError(f"priority {prio} out of range "
                         f"{constants.OP_PRIO_HIGHEST}..{constants.OP_PRIO_LOWEST}")
    return prio


def _priority_type(value: str) -> int:
    # A ValueError's text becomes the usage error ("argument --priority: ...").
    return parse_priority(value)


SUBMIT_OPT = Option("--submit", dest="submit_only", action="store_true", default=False,
                    help="Submit the job and return the job ID (printed on stderr),"
                         " without waiting for it to finish")
PRINT_JOBID_OPT = Option("--print-jobid", dest="print_jobid", action="store_true",
                         default=False, help="Print the job ID on stdout before waiting")
PRIORITY_OPT = Option("--priority", dest="priority", type=_priority_type, default=None,
                      metavar="low|normal|high", help="Priority of the submitted job(s)")
NOHDR_OPT = Option("--no-headers", dest="no_headers", action="store_true", default=False,
                   help="Do not print the header line")
SEP_OPT = Option("--separator", dest="separator", default=None, metavar="SEP",
                 help="Separate columns with SEP instead of aligning them")
FIELDS_OPT = Option("-o", "--output", dest="output", default=None, metavar="FIELDS",
                    help="Comma-separated list of output fields; '+a,b' appends"
                         " to the default fields")
UNITS_OPT = Option("--units", dest="units", default=None, choices=["h", "m", "g", "t"],
                   help="Units for sizes: h (human readable, default), m, g or t")
FILTER_OPT = Option("-F", "--filter", dest="force_filter", action="store_true", default=False,
                    help="Treat the arguments as a query filter expression")
VERBOSE_OPT = Option("-v", "--verbose", dest="verbose", action="count", default=0,
                     help="Be more verbose (repeatable)")
DEBUG_OPT = Option("-d", "--debug", dest="debug", action="count", default=0,
                   help="Debug output: log to stderr, show tracebacks (repeatable)")
FORCE_OPT = Option("-f", "--force", dest="force", action="store_true", default=False,
                   help="Do not ask for confirmation")
DRY_RUN_OPT = Option("--dry-run", dest="dry_run", action="store_true", default=False,
                     help="Only check the parameters, do not run the operation")
REASON_OPT = Option("--reason", dest="reason", default=None, metavar="TEXT",
                    help="The reason for this operation (recorded in the job)")
TIMEOUT_OPT = Option("--timeout", dest="timeout", type=float, default=None, metavar="SECONDS",
                     help="Give up waiting after this many seconds")

# Added to every verb by generic_main.
COMMON_OPTS = [DEBUG_OPT, REASON_OPT]


_TIMESPEC_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_timespec(value: str) -> int:
    """Parse an age such as ``30``, ``30s``, ``30m``, ``6h``, ``1d``, ``2w`` into seconds.

    Raises :class:`errors.OpPrereqError` (``wrong_input``) for anything else.
    """
    text = value.strip().lower()
    factor = 1
    if text and text[-1] in _TIMESPEC_UNITS:
        factor = _TIMESPEC_UNITS[text[-1]]
        text = text[:-1]
    if not text.isdigit():
        raise errors.OpPrereqError(f"Invalid time specification '{value}' (use e.g. 30, 30m,"
                                   " 6h, 1d or 2w)", errors.ECODE_INVAL)
    return int(text) * factor


def split_escaped(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` at ``sep``, as Ganeti's tools split ``key=value`` lists.

    ``\\,`` (a backslash before the separator) is a separator that belongs
    to the value; ``\\\\,`` (two backslashes) is a backslash ending the
    value, then a separator.  Other backslashes are kept as they are.
    ``"a=1\\,2,b"`` -> ``["a=1,2", "b"]``.
    """
    items: list[str] = []
    cur: list[str] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "\\" and i + 1 < end:
            if text[i + 1] == sep:
                cur.append(sep)
                i += 2
                continue
            if text[i + 1] == "\\" and i + 2 < end and text[i + 2] == sep:
                items.append("".join(cur) + "\\")
                cur = []
                i += 3
                continue
        if char == sep:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(char)
        i += 1
    items.append("".join(cur))
    return items
