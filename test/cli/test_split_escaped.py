"""``key=value`` lists with commas inside values, as Ganeti's tools write them."""

from __future__ import annotations

import pytest

from ganeti import cli
from ganeti.client.gnt_cluster import parse_keyval
from ganeti.client.gnt_instance import parse_kv


@pytest.mark.parametrize(("text", "items"), [
    ("a=1,b=2", ["a=1", "b=2"]),
    ("", [""]),
    ("a=1\\,2,b", ["a=1,2", "b"]),                # an escaped comma stays in the value
    ("a=x\\\\,b", ["a=x\\", "b"]),               # two backslashes: one, then a separator
    ("a=c:\\dir,b", ["a=c:\\dir", "b"]),          # other backslashes are kept
    ("a=1\\", ["a=1\\"]),                         # a trailing backslash too
    ("a=\\,\\,", ["a=,,"]),
])
def test_split_escaped(text, items) -> None:
    assert cli.split_escaped(text) == items


def test_user_data_with_commas_reaches_the_opcode_whole() -> None:
    text = "user_data=#cloud-config\\,packages: [a\\, b],hostname=web1"
    assert parse_kv(text) == {"user_data": "#cloud-config,packages: [a, b]",
                              "hostname": "web1"}
    assert parse_keyval(text) == {"user_data": "#cloud-config,packages: [a, b]",
                                  "hostname": "web1"}
