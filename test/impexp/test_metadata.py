"""The metadata service's entries and answers (ganeti/impexp/metadata.py): bytes in, bytes out."""

from __future__ import annotations

import json

import pytest

from ganeti import errors
from ganeti.impexp import metadata

DOCS = {"meta-data": 'instance-id: "u1"\nlocal-hostname: "web1"\n',
        "user-data": "#cloud-config\n", "network-config": "version: 2\nethernets: {}\n"}


def _entry(name: str, *addresses: str, docs=DOCS) -> metadata.Entry:
    return metadata.parse_entry(metadata.entry_text(name, f"uuid-{name}", addresses, docs))


def test_entry_round_trip_keeps_the_documents_and_drops_prefix_lengths() -> None:
    text = metadata.entry_text("web1", "u1", ["192.0.2.10/24", "2001:db8::0:5/64"], DOCS)
    data = json.loads(text)
    assert data["addresses"] == ["192.0.2.10", "2001:db8::5"]
    entry = metadata.parse_entry(text)
    assert entry.name == "web1" and entry.uuid == "u1"
    assert entry.documents == {**DOCS, "vendor-data": ""}


@pytest.mark.parametrize("text", ["", "[]", '{"version": 99}', '{"version": 1, "name": "x"}',
                                  '{"version": 1, "name": "x", "uuid": "u", "addresses": "a",'
                                  ' "documents": {}}'])
def test_a_bad_entry_is_refused(text: str) -> None:
    with pytest.raises(errors.ParameterError):
        metadata.parse_entry(text)


def test_an_invalid_address_is_refused_when_written() -> None:
    with pytest.raises(errors.ParameterError):
        metadata.entry_text("web1", "u1", ["not-an-ip"], DOCS)


def test_each_instance_gets_its_own_documents() -> None:
    table = metadata.build_table([_entry("web1", "192.0.2.10", "198.51.100.7"),
                                  _entry("web2", "192.0.2.11",
                                         docs={**DOCS, "meta-data": "local-hostname: web2\n"})])
    ans = metadata.answer(table, "192.0.2.10", "GET", "/meta-data")
    assert (ans.status, ans.body) == (200, DOCS["meta-data"].encode())
    assert metadata.answer(table, "198.51.100.7", "GET", "/user-data").body == b"#cloud-config\n"
    assert metadata.answer(table, "192.0.2.11", "GET", "/meta-data").body == \
        b"local-hostname: web2\n"
    assert metadata.answer(table, "192.0.2.11", "HEAD", "/network-config?x=1").status == 200
    assert metadata.answer(table, "192.0.2.10", "GET", "/vendor-data").body == b""
    index = metadata.answer(table, "192.0.2.10", "GET", "/")
    assert index.body.decode().split() == list(metadata.DOCUMENTS)


def test_an_ipv4_mapped_source_is_its_ipv4_address() -> None:
    table = metadata.build_table([_entry("web1", "192.0.2.10")])
    assert metadata.answer(table, "::ffff:192.0.2.10", "GET", "/meta-data").status == 200


@pytest.mark.parametrize("source", ["192.0.2.99", "127.0.0.1", "", "garbage"])
def test_any_other_source_is_forbidden_whatever_it_asks(source: str) -> None:
    table = metadata.build_table([_entry("web1", "192.0.2.10")])
    for target in ("/meta-data", "/user-data", "/", "/nothing"):
        ans = metadata.answer(table, source, "GET", target)
        assert ans.status == 403 and b"cloud-config" not in ans.body


def test_an_address_two_instances_claim_is_forbidden() -> None:
    table = metadata.build_table([_entry("web1", "192.0.2.10", "192.0.2.20"),
                                  _entry("web2", "192.0.2.20")])
    assert metadata.answer(table, "192.0.2.20", "GET", "/meta-data").status == 403
    assert metadata.answer(table, "192.0.2.10", "GET", "/meta-data").status == 200


@pytest.mark.parametrize("method,target,status", [
    ("POST", "/user-data", 405), ("PUT", "/meta-data", 405), ("GET", "/../etc/passwd", 404),
    ("GET", "/meta-data/", 404), ("GET", "/latest/meta-data", 404), ("GET", "user-data", 404),
    ("GET", "//user-data", 200)])
def test_methods_and_paths(method: str, target: str, status: int) -> None:
    table = metadata.build_table([_entry("web1", "192.0.2.10")])
    assert metadata.answer(table, "192.0.2.10", method, target).status == status
