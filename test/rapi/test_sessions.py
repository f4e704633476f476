"""Web console sessions: the store with a stepped clock, the cookie and the CSRF check."""

from __future__ import annotations

import itertools

import pytest

from ganeti import errors
from ganeti.rapi import sessions


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _store(clock: Clock, **kw: float) -> sessions.SessionStore:
    n = itertools.count(1)
    return sessions.SessionStore(clock=clock, rand=lambda k: f"r{next(n):02d}", **kw)  # type: ignore[arg-type]


def test_login_lookup_and_logout():
    clock = Clock()
    store = _store(clock)
    sid, session = store.create("ann")
    assert session.csrf != sid and store.lookup(sid) is session
    assert store.lookup("other") is None
    assert store.drop(sid) and store.lookup(sid) is None and not store.drop(sid)


def test_idle_expiry_restarts_with_use():
    clock = Clock()
    store = _store(clock, idle=100.0, max_age=1000.0)
    sid, _ = store.create("ann")
    clock.now = 99.0
    assert store.lookup(sid) is not None       # used: idle clock restarts
    clock.now = 198.0
    assert store.lookup(sid) is not None
    clock.now = 298.0
    assert store.lookup(sid) is None            # 100 s idle
    assert len(store) == 0


def test_max_age_ends_a_busy_session():
    clock = Clock()
    store = _store(clock, idle=100.0, max_age=250.0)
    sid, _ = store.create("ann")
    for t in (90.0, 180.0, 249.0):
        clock.now = t
        assert store.lookup(sid) is not None
    clock.now = 250.0
    assert store.lookup(sid) is None


def test_the_store_is_bounded_and_keeps_no_session_id():
    clock = Clock()
    store = _store(clock, limit=2)
    first, _ = store.create("a")
    clock.now = 1.0
    second, _ = store.create("b")
    clock.now = 2.0
    with pytest.raises(errors.HttpError, match="Too many") as caught:
        store.create("c")                       # refused: nobody else is logged out
    assert caught.value.status == 503
    assert store.lookup(first) and store.lookup(second) and len(store) == 2
    assert first not in repr(vars(store)) and second not in repr(vars(store)["_sessions"])
    clock.now = 2.0 + sessions.IDLE_TIMEOUT    # both idle: a login gets in
    assert store.create("c")[0] not in repr(vars(store))


def test_a_user_beyond_its_cap_ends_its_own_oldest_session_only():
    clock = Clock()
    store = _store(clock, limit=10, user_limit=3)
    others, _ = store.create("bob")
    mine = []
    for t in range(5):
        clock.now = float(t + 1)
        mine.append(store.create("ann")[0])
    assert [store.lookup(s) is not None for s in mine] == [False, False, True, True, True]
    assert store.lookup(others) is not None and len(store) == 4


def test_cookie_flags_and_parsing():
    value = sessions.set_cookie("abc")
    attrs = {a.strip().split("=")[0] for a in value.split(";")}
    assert value.startswith("__Host-ganeti_session=abc;") and "Domain" not in value
    assert {"Secure", "HttpOnly", "SameSite", "Path"} <= attrs
    assert "SameSite=Strict" in value
    assert "Max-Age=0" in sessions.clear_cookie()
    assert sessions.cookie_value("a=1; __Host-ganeti_session=xyz; b=2") == "xyz"
    assert sessions.cookie_value("a=1; ganeti_session=xyz; b=2") is None   # no prefix
    assert sessions.cookie_value("__Host-ganeti_session=") is None
    assert sessions.cookie_value(None) is None and sessions.cookie_value("x=y") is None


def test_csrf_check():
    session = sessions.Session("ann", "tok123", 0.0, 0.0)
    assert sessions.csrf_ok(session, "tok123")
    assert not sessions.csrf_ok(session, None) and not sessions.csrf_ok(session, "")
    assert not sessions.csrf_ok(session, "tok124") and not sessions.csrf_ok(session, "tok12")


@pytest.mark.parametrize("origin, host, ok", [
    (None, "node1:5080", True),                         # not a browser form
    ("https://node1:5080", "node1:5080", True),
    ("https://NODE1:5080", "node1:5080", True),
    ("http://node1:5080", "node1:5080", False),         # plain http
    ("https://node1:5081", "node1:5080", False),        # another port
    ("https://node1", "node1:5080", False),
    ("https://evil.example", "node1:5080", False),
    ("https://evil.example@node1:5080", "node1:5080", False),
    ("null", "node1:5080", False),                      # a sandboxed or file page
    ("https://node1:5080", None, False),
    ("node1:5080", "node1:5080", False),
    ("https://", "", False),
], ids=["none", "same", "case", "http", "port", "no-port", "other", "userinfo", "null",
        "no-host", "no-scheme", "empty"])
def test_login_origin(origin, host, ok):
    assert sessions.same_origin(origin, host) is ok
