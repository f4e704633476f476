"""Who sent a request and may they: Basic, Bearer and session credentials against roles."""

from __future__ import annotations

import base64

import pytest

from ganeti.rapi import auth, sessions, tokens, users
from ganeti.rapi.roles import Role

TABLE = users.parse_users("""
jack  pw1  write
jill  pw2  read
olga  pw3  operator
bob   pw4
""")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


TOKENS = tokens.TokenTable()
OLGA_ADMIN_TOKEN = TOKENS.create("olga", Role.ADMIN, 0.0)[1]     # capped by olga's role
JACK_TOKEN = TOKENS.create("jack", Role.OPERATOR, 0.0)[1]
GONE_TOKEN = TOKENS.create("ghost", Role.ADMIN, 0.0)[1]          # its user left the file
STORE = sessions.SessionStore(clock=lambda: 0.0)
SID, SESSION = STORE.create("olga")


def _identify(authorization: str | None = None, cookie: str | None = None) -> auth.Decision:
    return auth.identify(TABLE, authorization, cookie,
                         token=lambda t: TOKENS.verify(t, 1.0), session=STORE.lookup)


def _status(authorization: str | None = None, *, need: Role = Role.ADMIN,
            needs_auth: bool = True, method: str = "POST", cookie: str | None = None,
            csrf: str | None = None) -> int:
    return auth.decide(_identify(authorization, cookie), need=need, needs_auth=needs_auth,
                       method=method, csrf=csrf, what="X").status


def test_basic_matrix():
    assert _status(None, need=Role.READONLY, needs_auth=False) == 200
    assert _status(None, need=Role.READONLY) == 401
    assert _status(None) == 401
    assert _status(_basic("jill", "pw2")) == 403
    assert _status(_basic("jill", "pw2"), need=Role.READONLY) == 200
    assert _status(_basic("jack", "pw1")) == 200
    assert _status(_basic("jack", "bad")) == 401
    assert _status(_basic("bob", "pw4")) == 403
    assert _status(_basic("olga", "pw3")) == 403
    assert _status(_basic("olga", "pw3"), need=Role.OPERATOR) == 200


@pytest.mark.parametrize("header", ["Basic", "Basic !!!", "Digest abc",
                                    "Basic " + base64.b64encode(b"nocolon").decode()])
def test_malformed_headers_are_401(header):
    assert _status(header) == 401


def test_unknown_user_and_bad_password_look_the_same():
    a, b = _identify(_basic("nobody", "x")), _identify(_basic("jack", "x"))
    assert (a.status, a.message, a.user) == (b.status, b.message, b.user) == \
        (401, a.message, None)


def test_bearer_tokens_take_the_smaller_role():
    ident = _identify("Bearer " + OLGA_ADMIN_TOKEN)
    assert ident.principal is not None and ident.principal.role == Role.OPERATOR
    assert ident.principal.via == auth.VIA_TOKEN
    assert _status("Bearer " + OLGA_ADMIN_TOKEN) == 403
    assert _status("Bearer " + JACK_TOKEN) == 403             # an operator token of an admin
    assert _status("Bearer " + JACK_TOKEN, need=Role.OPERATOR) == 200
    assert _status("Bearer " + GONE_TOKEN, need=Role.READONLY) == 401
    assert _status("Bearer " + JACK_TOKEN[:-1] + "x", need=Role.READONLY) == 401
    assert _status("Bearer ", need=Role.READONLY) == 401


def test_a_refusal_names_user_and_roles():
    decision = auth.decide(_identify(_basic("jill", "pw2")), need=Role.ADMIN, needs_auth=True,
                           method="DELETE", csrf=None, what="DELETE /2/instances/{instance}")
    assert decision.status == 403 and decision.user == "jill"
    assert "'jill'" in decision.message and "readonly" in decision.message
    assert "needs admin" in decision.message and "pw2" not in decision.message


def test_session_writes_need_the_csrf_token():
    cookie = f"__Host-ganeti_session={SID}"
    assert _status(cookie=cookie, need=Role.OPERATOR) == 403                  # none
    assert _status(cookie=cookie, need=Role.OPERATOR, csrf="wrong") == 403
    assert _status(cookie=cookie, need=Role.OPERATOR, csrf=SESSION.csrf) == 200
    assert _status(cookie=cookie, need=Role.READONLY, method="GET") == 200   # reads need none
    assert _status(cookie=cookie, need=Role.ADMIN, csrf=SESSION.csrf) == 403  # olga: operator
    assert _status(cookie="__Host-ganeti_session=stale", need=Role.READONLY, method="GET") == 401


def test_a_session_get_on_a_write_row_needs_the_csrf_token():
    cookie = f"__Host-ganeti_session={SID}"
    decide = auth.decide
    ident = _identify(None, cookie)
    refused = decide(ident, need=Role.OPERATOR, needs_auth=True, method="GET", csrf=None,
                     what="GET /2/instances/[instance]/console", write=True)
    assert refused.status == 403 and "X-CSRF-Token" in refused.message
    assert decide(ident, need=Role.OPERATOR, needs_auth=True, method="GET",
                  csrf=SESSION.csrf, what="X", write=True).status == 200
    # Basic credentials need none (a browser does not send them by itself cross-site)
    assert decide(_identify(_basic("jack", "pw1")), need=Role.OPERATOR, needs_auth=True,
                  method="GET", csrf=None, what="X", write=True).status == 200


def test_authorization_wins_over_the_cookie_and_needs_no_csrf():
    cookie = f"__Host-ganeti_session={SID}"
    assert _status(_basic("jack", "pw1"), cookie=cookie) == 200
    assert _identify(_basic("jack", "pw1"), cookie).user == "jack"
