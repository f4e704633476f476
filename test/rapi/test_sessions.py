"""Web console sessions: the store with a stepped clock, the cookie and the CSRF check."""

from __future__ import annotations

import itertools

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
    third, _ = store.create("c")
    assert store.lookup(first) is None and store.lookup(second) and store.lookup(third)
    assert first not in repr(vars(store)) and third not in repr(vars(store)["_sessions"])


def test_cookie_flags_and_parsing():
    value = sessions.set_cookie("abc")
    attrs = {a.strip().split("=")[0] for a in value.split(";")}
    assert value.startswith("ganeti_session=abc;")
    assert {"Secure", "HttpOnly", "SameSite", "Path"} <= attrs
    assert "SameSite=Strict" in value
    assert "Max-Age=0" in sessions.clear_cookie()
    assert sessions.cookie_value("a=1; ganeti_session=xyz; b=2") == "xyz"
    assert sessions.cookie_value("ganeti_session=") is None
    assert sessions.cookie_value(None) is None and sessions.cookie_value("x=y") is None


def test_csrf_check():
    session = sessions.Session("ann", "tok123", 0.0, 0.0)
    assert sessions.csrf_ok(session, "tok123")
    assert not sessions.csrf_ok(session, None) and not sessions.csrf_ok(session, "")
    assert not sessions.csrf_ok(session, "tok124") and not sessions.csrf_ok(session, "tok12")
