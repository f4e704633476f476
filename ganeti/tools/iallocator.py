"""``ganeti-iallocator INPUT_FILE``: the built-in allocator as an iallocator program.

Reads an iallocator input document (doc/protocols/iallocator.md) from INPUT_FILE (``-``
for stdin) and prints the JSON answer on stdout, like upstream's ``hail``:
exit status 0 with ``{"success": ..., "info": ..., "result": ...}`` for any
well-formed request (an unsatisfiable one gives ``success: false``), exit
status 1 with a message on stderr for input that is not a request.  So it
can be installed in an iallocator search path and used by upstream Ganeti
too.  Options (also what ``default_iallocator_params`` pass as
``--key=value``): ``--no-capacity-checks`` (no N+1), ``--ignore-soft-errors``
(exclusion tags may be violated); unknown ``--key=value`` options are ignored.
"""

from __future__ import annotations

import sys

from ganeti import errors, serializer
from ganeti.iallocator import builtin

__all__ = ["main", "USAGE"]

USAGE = "Usage: ganeti-iallocator [--no-capacity-checks] [--ignore-soft-errors] INPUT_FILE"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    files = [a for a in args if a == "-" or not a.startswith("--")]
    flags = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    if len(files) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        if files[0] == "-":
            text = sys.stdin.read()
        else:
            with open(files[0], encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        print(f"ganeti-iallocator: cannot read {files[0]}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        document = serializer.loads(text)
        answer = builtin.allocate(document,
                                  capacity_checks="--no-capacity-checks" not in flags,
                                  ignore_soft_errors="--ignore-soft-errors" in flags)
    except errors.GanetiError as exc:
        print(f"ganeti-iallocator: invalid input: {exc}", file=sys.stderr)
        return 1
    print(serializer.dumps(answer))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
