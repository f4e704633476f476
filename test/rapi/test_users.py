"""The RAPI users file parser and the authorisation decision."""

from __future__ import annotations

import base64
import hashlib

import pytest

from ganeti import errors
from ganeti.rapi import users


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
    assert users.authorize(TABLE, header, needs_write=True, require_auth=False).status == 401


def test_matrix():
    def status(header, write, require=False):
        return users.authorize(TABLE, header, needs_write=write, require_auth=require).status
    assert status(None, False) == 200
    assert status(None, False, require=True) == 401
    assert status(None, True) == 401
    assert status(_basic("jill", "pw2"), True) == 403
    assert status(_basic("jill", "pw2"), False, require=True) == 200
    assert status(_basic("jack", "pw1"), True) == 200
    assert status(_basic("jack", "bad"), True) == 401
    assert status(_basic("bob", "pw4"), True) == 403


def test_unknown_user_and_bad_password_look_the_same():
    a = users.authorize(TABLE, _basic("nobody", "x"), needs_write=True, require_auth=False)
    b = users.authorize(TABLE, _basic("jack", "x"), needs_write=True, require_auth=False)
    assert (a.status, a.message, a.user) == (b.status, b.message, b.user) == \
        (401, a.message, None)
