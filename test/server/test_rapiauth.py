"""The RAPI daemon's tokens file (written atomically, 0600, digests only) and its reloads."""

from __future__ import annotations

import os
import stat

import pytest

from ganeti import errors
from ganeti.rapi.roles import Role
from ganeti.server import rapiauth
from ganeti.utils import localfile


def _file(tmp_path) -> rapiauth.TokenFile:
    return rapiauth.TokenFile(str(tmp_path / "tokens"), clock=lambda: 1000.0)


def test_a_new_token_is_on_disk_as_a_digest_with_mode_0600(tmp_path):
    tf = _file(tmp_path)
    token, text = tf.create("ann", Role.OPERATOR, expires=None, comment="")
    on_disk = (tmp_path / "tokens").read_text()
    assert stat.S_IMODE(os.stat(tmp_path / "tokens").st_mode) == 0o600
    assert token.digest in on_disk and text.split("_", 2)[2] not in on_disk
    assert _file(tmp_path).verify(text) == token          # a restarted daemon knows it
    assert [name for name in os.listdir(tmp_path)] == ["tokens"]   # no temporary left


def test_revocation_is_at_once_and_on_disk(tmp_path):
    tf = _file(tmp_path)
    token, text = tf.create("ann", Role.ADMIN, expires=None, comment="")
    assert tf.revoke(token.id) == token and tf.verify(text) is None
    assert token.id not in (tmp_path / "tokens").read_text()
    assert _file(tmp_path).verify(text) is None


def full_disk(*args: object, **kwargs: object) -> None:
    raise OSError(28, "No space left on device")


def test_a_revocation_not_saved_stays_revoked_through_a_reload(tmp_path, monkeypatch):
    tf = _file(tmp_path)
    token, text = tf.create("ann", Role.ADMIN, expires=None, comment="")
    monkeypatch.setattr(localfile, "write_local_atomic", full_disk)
    with pytest.raises(errors.HttpError, match="memory only") as caught:
        tf.revoke(token.id)
    assert caught.value.status == 503
    assert token.id in (tmp_path / "tokens").read_text()    # the file still has it
    assert tf.reload() and tf.verify(text) is None


def test_a_create_not_saved_is_undone(tmp_path, monkeypatch):
    tf = _file(tmp_path)
    monkeypatch.setattr(localfile, "write_local_atomic", full_disk)
    with pytest.raises(errors.HttpError, match="not made") as caught:
        tf.create("ann", Role.ADMIN, expires=None, comment="")
    assert caught.value.status == 503 and tf.list() == []


def test_reload_takes_a_copied_file_and_keeps_the_table_on_a_broken_one(tmp_path):
    master = rapiauth.TokenFile(str(tmp_path / "m" / "tokens"))
    os.makedirs(tmp_path / "m", exist_ok=True)
    token, text = master.create("ann", Role.ADMIN, expires=None, comment="")
    tf = _file(tmp_path)
    (tmp_path / "tokens").write_text((tmp_path / "m" / "tokens").read_text())
    assert tf.reload() and tf.verify(text) == token
    (tmp_path / "tokens").write_text("{broken")
    assert not tf.reload() and tf.verify(text) == token


def test_a_reload_in_flight_does_not_bring_back_a_token_revoked_meanwhile(tmp_path, monkeypatch):
    tf = _file(tmp_path)
    token, text = tf.create("ann", Role.ADMIN, expires=None, comment="")
    (tmp_path / "upload").write_bytes((tmp_path / "tokens").read_bytes())
    os.replace(tmp_path / "upload", tmp_path / "tokens")    # a cluster file upload
    read = localfile.read_local

    def read_then_revoke(*args: object, **kwargs: object) -> bytes:
        data = read(*args, **kwargs)   # the old file, still holding the token
        assert tf.revoke(token.id) == token
        return data

    monkeypatch.setattr(localfile, "read_local", read_then_revoke)
    assert tf.reload()
    assert tf.verify(text) is None and tf.list() == []


def test_the_reload_of_our_own_write_is_skipped(tmp_path, monkeypatch):
    tf = _file(tmp_path)
    token, text = tf.create("ann", Role.ADMIN, expires=None, comment="")
    reads: list[object] = []
    monkeypatch.setattr(localfile, "read_local", lambda *a, **k: reads.append(a) or b"")
    assert tf.reload() and reads == [] and tf.verify(text) == token
    (tmp_path / "tokens").write_text("")          # another writer: read again
    assert tf.reload() and len(reads) == 1 and tf.verify(text) is None
