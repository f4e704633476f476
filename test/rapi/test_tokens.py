"""API tokens: hashing, verification, expiry, revocation, the file's text, and the rows."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fakes import FakeLuxi

from ganeti import constants, errors
from ganeti.opcodes import wire
from ganeti.rapi import auth, tokens
from ganeti.rapi import resources as res
from ganeti.rapi.roles import Role


def _table() -> tokens.TokenTable:
    ids = itertools.count(1)
    return tokens.TokenTable(randhex=lambda n: f"{next(ids):016x}")


def test_the_text_is_shown_once_and_only_its_digest_is_kept():
    table = _table()
    token, text = table.create("ann", Role.OPERATOR, 100.0, comment="ci")
    token_id, secret = tokens.split_token(text) or ("", "")
    assert token_id == token.id and len(secret) == 43
    assert token.digest == tokens.hash_secret(secret) != secret
    dumped = table.dumps()
    assert secret not in dumped and token.digest in dumped
    assert "digest" not in token.public(100.0)
    assert table.verify(text, 101.0) == token


@pytest.mark.parametrize("mangle", [
    lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),      # wrong secret
    lambda t: t.replace("gnt_", "gnx_"),                    # not a token
    lambda t: t[:-2],
    lambda t: "gnt_" + "f" * 16 + t[20:],                   # unknown id, same secret
    lambda t: "",
], ids=["secret", "prefix", "short", "id", "empty"])
def test_anything_but_the_text_fails(mangle):
    table = _table()
    _, text = table.create("ann", Role.ADMIN, 100.0)
    assert table.verify(mangle(text), 100.0) is None


def test_expired_and_revoked_tokens_fail_at_once():
    table = _table()
    token, text = table.create("ann", Role.ADMIN, 100.0, expires=200.0)
    assert table.verify(text, 199.9) == token
    assert table.verify(text, 200.0) is None and token.public(200.0)["expired"]
    other, text2 = table.create("ann", Role.ADMIN, 100.0)
    assert table.revoke(other.id) == other
    assert table.verify(text2, 100.0) is None
    assert table.revoke(other.id) is None and table.revoke("../../etc") is None


def test_an_expiry_in_the_past_is_refused():
    with pytest.raises(errors.HttpError) as exc:
        _table().create("ann", Role.ADMIN, 100.0, expires=100.0)
    assert exc.value.status == 400


def test_the_file_text_round_trips_and_bad_text_is_refused():
    table = _table()
    token, text = table.create("ann", Role.OPERATOR, 100.0, expires=500.0, comment="x")
    loaded = tokens.TokenTable(tokens.loads(table.dumps()))
    assert loaded.tokens == {token.id: token} and loaded.verify(text, 101.0) == token
    assert tokens.loads("") == {}
    for bad in ["[]", '{"version": 9, "tokens": []}', "{nope",
                '{"version": 1, "tokens": [{"id": "x", "role": "admin"}]}']:
        with pytest.raises(errors.ConfigurationError):
            tokens.loads(bad)


def test_purge_drops_only_expired():
    table = _table()
    table.create("a", Role.ADMIN, 0.0, expires=10.0)
    keep, _ = table.create("b", Role.ADMIN, 0.0)
    assert table.purge(20.0) == 1 and list(table.tokens) == [keep.id]


class _Service:
    """A TokenService over a table and a fixed clock."""

    def __init__(self) -> None:
        self.table = _table()

    def now(self) -> float:
        return 1000.0

    def create(self, user: str, role: Role, *, expires: float | None,
               comment: str) -> tuple[tokens.Token, str]:
        return self.table.create(user, role, self.now(), expires=expires, comment=comment)

    def list(self) -> list[tokens.Token]:
        return list(self.table.tokens.values())

    def get(self, token_id: str) -> tokens.Token | None:
        return self.table.tokens.get(token_id)

    def revoke(self, token_id: str) -> tokens.Token | None:
        return self.table.revoke(token_id)


def _luxi(status: str = constants.JOB_STATUS_SUCCESS) -> FakeLuxi:
    """A master whose jobs end with ``status`` at once."""
    failure = [["OpExecError", ["Copy of file to node2 failed"]]]
    return FakeLuxi({"WaitForJobChange": [[status], []],
                     "QueryJobs": [[status, [None] if status == constants.JOB_STATUS_SUCCESS
                                    else failure]]})


def _call(service: _Service, principal: auth.Principal | None, method: str, path: str,
          body: Any = None, *, client: FakeLuxi | None = None) -> Any:
    route, args = res.match(method, path)
    ctx = res.Ctx(method=method, args=args, query={}, body=body,
                  client=client if client is not None else _luxi(),
                  path=path, principal=principal, tokens=service)
    try:
        return res.dispatch(route, ctx)
    except errors.HttpError as exc:
        return exc.status


ANN = auth.Principal("ann", Role.OPERATOR, auth.VIA_BASIC)
BOB = auth.Principal("bob", Role.READONLY, auth.VIA_BASIC)
ROOT = auth.Principal("root", Role.ADMIN, auth.VIA_BASIC)


def test_rows_make_list_and_revoke_ones_own():
    svc = _Service()
    made = _call(svc, ANN, "POST", "/2/tokens", {"expires_in": 60, "comment": "ci"})
    assert made["user"] == "ann" and made["role"] == "operator"
    assert made["expires"] == 1060.0 and made["token"].startswith("gnt_")
    assert svc.table.verify(made["token"], 1000.0) is not None
    bobs = _call(svc, BOB, "POST", "/2/tokens", {"role": "readonly"})
    assert [t["id"] for t in _call(svc, ANN, "GET", "/2/tokens")] == [made["id"]]
    assert len(_call(svc, ROOT, "GET", "/2/tokens")) == 2
    assert _call(svc, BOB, "DELETE", f"/2/tokens/{made['id']}") == 404   # not bob's
    assert _call(svc, BOB, "GET", f"/2/tokens/{made['id']}") == 404
    assert _call(svc, ROOT, "DELETE", f"/2/tokens/{bobs['id']}")["id"] == bobs["id"]
    assert _call(svc, ANN, "DELETE", f"/2/tokens/{made['id']}")["id"] == made["id"]
    assert svc.table.tokens == {}


@pytest.mark.parametrize("principal, body, status", [
    (ANN, {"role": "admin"}, 403),                       # above its own role
    (ANN, {"role": "god"}, 400),
    (ANN, {"expires": 999.0}, 400),                      # in the past
    (ANN, {"expires_in": -1}, 400),
    (ANN, {"expires_in": 10 ** 400}, 400),               # float() overflows
    (ANN, {"expires": 10 ** 400}, 400),
    (ANN, {"expires_in": 1e300}, 400),                   # far beyond any lifetime
    (ANN, {"expires": 1e300}, 400),
    (ANN, {"expires": float("inf")}, 400),
    (ANN, {"expires": 2000.0, "expires_in": 5}, 400),
    (ANN, {"comment": 5}, 400),
    (ANN, {"user": "root"}, 400),                        # not a key: always oneself
    (auth.Principal("ann", Role.OPERATOR, auth.VIA_TOKEN, token_id="1"), {}, 403),
    (None, {}, 401),
], ids=["above", "unknown-role", "past", "negative", "huge-in", "huge-at", "far-in",
         "far-at", "infinite", "both", "comment", "user", "by-token",
        "anonymous"])
def test_rows_refuse(principal, body, status):
    svc = _Service()
    assert _call(svc, principal, "POST", "/2/tokens", body) == status
    assert svc.table.tokens == {}


def test_a_change_is_answered_once_the_file_is_on_every_node():
    svc, master = _Service(), _luxi()
    made = _call(svc, ANN, "POST", "/2/tokens", {}, client=master)
    assert _call(svc, ANN, "DELETE", f"/2/tokens/{made['id']}", client=master)["id"] == made["id"]
    assert [[op["OP_ID"] for op in job] for job in master.submitted] == [
        [wire.OP_CLUSTER_REDIST_CONF]] * 2


def test_a_change_not_copied_to_every_node_answers_503():
    svc = _Service()
    made = _call(svc, ANN, "POST", "/2/tokens", {})
    route, args = res.match("DELETE", f"/2/tokens/{made['id']}")
    ctx = res.Ctx(method="DELETE", args=args, query={}, body=None,
                  client=_luxi(constants.JOB_STATUS_ERROR), path="", principal=ANN, tokens=svc)
    with pytest.raises(errors.HttpError, match="saved on the master but not yet on every"
                       " node.*node2 failed") as caught:
        res.dispatch(route, ctx)
    assert caught.value.status == 503 and svc.table.tokens == {}   # revoked all the same
    assert _call(svc, ANN, "POST", "/2/tokens", {},
                 client=_luxi(constants.JOB_STATUS_ERROR)) == 503


def test_a_user_has_at_most_max_user_tokens():
    svc = _Service()
    for _ in range(tokens.MAX_USER_TOKENS):
        _call(svc, ANN, "POST", "/2/tokens", {})
    assert _call(svc, ANN, "POST", "/2/tokens", {}) == 409
    assert _call(svc, BOB, "POST", "/2/tokens", {})["user"] == "bob"   # others still may
    gone = next(iter(svc.table.tokens))
    _call(svc, ANN, "DELETE", f"/2/tokens/{gone}")
    assert _call(svc, ANN, "POST", "/2/tokens", {})["user"] == "ann"


def test_expired_tokens_do_not_count_against_the_cap():
    table = _table()
    for _ in range(tokens.MAX_USER_TOKENS):
        table.create("ann", Role.ADMIN, 100.0, expires=150.0)
    assert table.create("ann", Role.ADMIN, 200.0)[0].user == "ann"
    assert len(table.tokens) == 1


def test_a_token_sees_and_revokes_itself_only():
    svc = _Service()
    first = _call(svc, ROOT, "POST", "/2/tokens", {})
    second = _call(svc, ROOT, "POST", "/2/tokens", {})
    via_first = auth.Principal("root", Role.ADMIN, auth.VIA_TOKEN, token_id=first["id"])
    assert [t["id"] for t in _call(svc, via_first, "GET", "/2/tokens")] == [first["id"]]
    assert _call(svc, via_first, "GET", f"/2/tokens/{second['id']}") == 404
    assert _call(svc, via_first, "DELETE", f"/2/tokens/{second['id']}") == 404
    assert second["id"] in svc.table.tokens
    assert _call(svc, via_first, "DELETE", f"/2/tokens/{first['id']}")["id"] == first["id"]
    assert list(svc.table.tokens) == [second["id"]]
