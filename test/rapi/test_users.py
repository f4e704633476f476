"""The RAPI users file parser and the authorisation decision."""

from __future__ import annotations

import base64
import hashlib

import pytest

from ganeti import errors
from ganeti.rapi import roles, users


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


HA1 = hashlib.md5(b"jill:Ganeti Remote API:pw2").hexdigest()
TABLE = users.parse_users(f"""
# comment line
jack  pw1            write
jill  {{HA1}}{HA1}   read
anne  {{CLEARTEXT}}pw3 read,write,bogus
bob   pw4
""")


def test_parse_schemes_and_options():
    assert set(TABLE) == {"jack", "jill", "anne", "bob"}
    assert TABLE["jack"].can_write and TABLE["anne"].can_write
    assert not TABLE["jill"].can_write and not TABLE["bob"].can_write
    assert TABLE["anne"].options == {"read", "write"}      # unknown option dropped
    assert (TABLE["jack"].role, TABLE["jill"].role, TABLE["bob"].role) == (
        roles.Role.ADMIN, roles.Role.READONLY, roles.Role.READONLY)
    assert users.check_password(TABLE["jack"], "pw1")
    assert users.check_password(TABLE["jill"], "pw2")
    assert not users.check_password(TABLE["jill"], HA1)    # the digest is not the password
    assert users.check_password(TABLE["anne"], "pw3")      # prefix case-insensitive
    assert not users.check_password(TABLE["jack"], "pw1 ")


@pytest.mark.parametrize("text", ["lonely", "a b c d", "x p\nx q"])
def test_parse_errors_name_the_line(text):
    with pytest.raises(errors.ConfigurationError, match="line"):
        users.parse_users(text)


@pytest.mark.parametrize("header", ["Basic", "Basic !!!", "Digest abc",
                                    "Basic " + base64.b64encode(b"nocolon").decode(),
                                    "Basic " + base64.b64encode(b":pw").decode(),
                                    "Basic " + base64.b64encode(b"\xff:\xfe").decode()])
def test_malformed_headers(header):
    assert users.parse_basic_auth(header) is None


@pytest.mark.parametrize("options, role", [
    ("", roles.Role.READONLY), ("read", roles.Role.READONLY), ("readonly", roles.Role.READONLY),
    ("write", roles.Role.ADMIN), ("read,write", roles.Role.ADMIN), ("admin", roles.Role.ADMIN),
    ("operator", roles.Role.OPERATOR), ("read,operator", roles.Role.OPERATOR),
    ("OPERATOR,bogus", roles.Role.OPERATOR), ("operator,write", roles.Role.ADMIN),
], ids=lambda v: v if isinstance(v, str) else v.label)
def test_options_name_the_role(options, role):
    user = users.parse_users(f"u pw {options}\n")["u"]
    assert user.role == role
    assert user.can_write == (role == roles.Role.ADMIN)


def test_owner_option_limits_operators_not_admins():
    table = users.parse_users("op pw operator,owner\nad pw write,owner\nplain pw operator\n")
    assert table["op"].owner_only
    assert not table["ad"].owner_only and not table["plain"].owner_only
