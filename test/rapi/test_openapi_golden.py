"""``/2/openapi.json`` against a committed copy (``openapi_golden.json``).

The copy was generated from the resource table before the OpenAPI text
moved into the rows (it was a second table keyed by method and path); the
rows it has must keep producing the same document, byte for byte in the
served key order.  A row added since is left out of the comparison (it
is checked like every row by ``test_openapi.py``), so adding a resource
does not touch the copy; changing a documented row on purpose regenerates
it::

    python test/rapi/test_openapi_golden.py

Only the release number in ``info.version`` is masked, so a release bump
does not fail the test.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from ganeti import constants
from ganeti.rapi import openapi
from ganeti.rapi import resources as res

GOLDEN = pathlib.Path(__file__).with_name("openapi_golden.json")
_RELEASE_MARK = "RELEASE"


def _text(doc: dict[str, Any]) -> str:
    """``doc`` as the golden file holds it: indented, in the served key order,
    the release number replaced by a mark."""
    doc = {**doc, "info": {**doc["info"], "version": doc["info"]["version"].replace(
        constants.RELEASE_VERSION, _RELEASE_MARK)}}
    return json.dumps(doc, indent=1) + "\n"


def _known_rows(doc: dict[str, Any], golden: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without the operations (and paths) the golden copy does not have."""
    paths = {}
    for path, item in doc["paths"].items():
        kept = {m: op for m, op in item.items() if m in golden["paths"].get(path, {})}
        if kept:
            paths[path] = kept
    return {**doc, "paths": paths}


def _compare(doc: dict[str, Any]) -> None:
    want = GOLDEN.read_text()
    got = _text(_known_rows(doc, json.loads(want)))
    assert json.loads(got) == json.loads(want)   # the content (a readable diff first)
    assert got == want                           # then the key order too


def test_document_equals_the_golden_copy() -> None:
    _compare(openapi.document(res.ROUTES))


def test_the_comparison_sees_a_changed_summary() -> None:
    doc = openapi.document(res.ROUTES)
    doc["paths"]["/2/info"]["get"]["summary"] += "!"
    try:
        _compare(doc)
    except AssertionError:
        return
    raise AssertionError("a changed summary went unnoticed")


def test_the_comparison_sees_a_lost_row_and_ignores_a_new_one() -> None:
    doc = openapi.document(res.ROUTES)
    doc["paths"]["/2/new-thing"] = {"post": {"summary": "new"}}
    _compare(doc)
    del doc["paths"]["/2/os"]
    try:
        _compare(doc)
    except AssertionError:
        return
    raise AssertionError("a lost row went unnoticed")


if __name__ == "__main__":
    GOLDEN.write_text(_text(openapi.document(res.ROUTES)))
