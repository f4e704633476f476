"""Print Ganeti 3.0's parameters and defaults of the given opcodes as JSON.

Run by test/opcodes/test_upstream_params.py with Debian's ``python3 -E -s``
(package ``ganeti-3.0``), never with the project's interpreter: it imports
upstream's ``ganeti.opcodes`` from /usr/share/ganeti/3.0.  Input on stdin:
a JSON list of OP_IDs.  Output: ``{OP_ID: {name: default} or null}``; a
required parameter's default is ``"<required>"``, a computed one
``"<computed>"``; null marks an OP_ID upstream does not have.
"""

import json
import sys

sys.path.insert(0, "/usr/share/ganeti/3.0")

from ganeti import ht, opcodes  # noqa: E402  (upstream's package)


def main() -> None:
    result = {}
    for op_id in json.load(sys.stdin):
        cls = opcodes.OP_MAPPING.get(op_id)
        if cls is None:
            result[op_id] = None
            continue
        params = {}
        for name, default, _check, _doc in cls.GetAllParams():
            if default is ht.NoDefault:
                params[name] = "<required>"
            elif callable(default):
                params[name] = "<computed>"
            else:
                params[name] = default
        result[op_id] = params
    json.dump(result, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
