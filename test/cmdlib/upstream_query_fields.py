"""Print Ganeti 3.0's query2 fields as JSON: ``{resource: {name: [title, kind]}}``,
plus ``{"nicesorted": {resource: [names in upstream's NiceSort order]}}``.

Run by test/cmdlib/test_query_upstream.py with Debian's ``python3 -E -s``
(package ``ganeti-3.0``); it imports upstream's ``ganeti.query`` from
/usr/share/ganeti/3.0, never this project's package.
"""

import json
import sys

sys.path.insert(0, "/usr/share/ganeti/3.0")

from ganeti import query, utils  # noqa: E402  (upstream's package)


def main() -> None:
    result = {}
    for what, table in query.ALL_FIELDS.items():
        result[what] = {name: [entry[0].title, entry[0].kind] for name, entry in table.items()}
    result["nicesorted"] = {what: utils.NiceSort(list(table))
                            for what, table in query.ALL_FIELDS.items()}
    json.dump(result, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
