"""Short-name matching (ganeti.utils.names)."""

from __future__ import annotations

import pytest

from ganeti.utils.names import expand_names, match_name

NAMES = ["node1.example.com", "node2.example.com", "node20.example.com", "web.a.org",
         "web.b.org", "Mail.example.com"]


@pytest.mark.parametrize(("key", "expected"), [
    ("node2.example.com", "node2.example.com"),     # exact
    ("node2", "node2.example.com"),                 # not node20
    ("node2.example", "node2.example.com"),         # more components
    ("NODE1", "node1.example.com"),                 # case-insensitive
    ("mail", "Mail.example.com"),
    ("web", None),                                  # ambiguous
    ("node", None),                                 # a prefix, not a component
    ("example.com", None),                          # components from the left only
    ("", None),
], ids=repr)
def test_match_name(key, expected) -> None:
    assert match_name(key, NAMES) == expected


def test_exact_name_wins_over_longer_ones() -> None:
    assert match_name("web", ["web", "web.example.com"]) == "web"


def test_expand_names_keeps_unknown_names() -> None:
    assert expand_names(["node1", "nosuch", "web"], NAMES) == \
        ["node1.example.com", "nosuch", "web"]
