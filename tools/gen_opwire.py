#!/usr/bin/env python3
"""Rewrite ganeti/opcodes/wire.py and its parts from the opcode classes (or ``--check`` them).

Run after adding or changing an opcode (doc/design/contracts.md, "Adding an
opcode").  The generated modules are ``wire.py`` (the face callers import),
``wire_base.py`` and the parts of ``PARTS`` in ganeti/opcodes/wiregen.py;
a left-over generated module is removed.  ``--check`` exits 1 when one is
stale, missing or left over, as test/opcodes/test_wire.py fails then.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ganeti.opcodes import wiregen  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only say whether the committed modules are current (exit 1 if not)")
    opts = parser.parse_args(argv)
    wanted = wiregen.current()
    if opts.check:
        stale = wiregen.stale(wanted)
        if stale:
            print(f"stale in {wiregen.WIRE_DIR}: {', '.join(stale)}: run {sys.argv[0]}",
                  file=sys.stderr)
            return 1
        return 0
    changed = wiregen.write(wanted)
    print(f"{wiregen.WIRE_DIR}: " + (f"wrote {', '.join(changed)}" if changed else "current"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
