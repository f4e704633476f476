#!/usr/bin/env python3
"""Rewrite ganeti/opcodes/wire.py from the opcode classes (or ``--check`` it).

Run after adding or changing an opcode (doc/design/contracts.md, "Adding an
opcode"); ``--check`` exits 1 when the committed file is stale, as
test/opcodes/test_wire.py fails then.
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
                        help="only say whether the committed file is current (exit 1 if not)")
    opts = parser.parse_args(argv)
    text = wiregen.current()
    if opts.check:
        if wiregen.WIRE_PATH.read_text() != text:
            print(f"{wiregen.WIRE_PATH} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    wiregen.WIRE_PATH.write_text(text)
    print(f"wrote {wiregen.WIRE_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
