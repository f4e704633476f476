"""``/2/openapi.json`` against a committed copy (``openapi_golden.json``).

The copy was generated from the resource table before the OpenAPI text
moved into the rows; the document must stay the same, key order included
(the served bytes follow it).  Only the release number in ``info.version``
is left out, so a release bump does not fail the test.  A deliberate
change of a row's documentation regenerates the copy::

    python test/rapi/test_openapi_golden.py
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


def test_document_equals_the_golden_copy() -> None:
    got = _text(openapi.document(res.ROUTES))
    want = GOLDEN.read_text()
    assert json.loads(got) == json.loads(want)   # the content (a readable diff first)
    assert got == want                           # then the key order too


def test_the_comparison_sees_a_changed_summary() -> None:
    doc = openapi.document(res.ROUTES)
    doc["paths"]["/2/info"]["get"]["summary"] += "!"
    assert _text(doc) != GOLDEN.read_text()


if __name__ == "__main__":
    GOLDEN.write_text(_text(openapi.document(res.ROUTES)))
