"""The image store's pure parts: names, the index, what an os-image names
(ganeti/impexp/imagestore.py, doc/images.md "The image store")."""

from __future__ import annotations

import json

import pytest

from ganeti import errors
from ganeti.impexp import imagestore

SHA = "ab" * 32


def _entry(name: str = "debian-13", **over) -> dict:
    facts = {"format": "qcow2", "size": 1000, "virtual_size": 4096, "sha256": SHA}
    return {**imagestore.make_entry(name, facts, "/srv/images/d.qcow2", 1700000000.5), **over}


@pytest.mark.parametrize("name", ["debian-13", "a", "Ubuntu_24.04+cloud", "x" * 100, "9lives"])
def test_valid_names(name):
    assert imagestore.check_name(name) == name


@pytest.mark.parametrize("name", ["", "-x", ".hidden", "a/b", "../etc", "x" * 101, "sp ace",
                                  "é", "a\nb", "index.json/", ".x.tmp1", "default"])
def test_invalid_names(name):
    with pytest.raises(errors.OpPrereqError, match="Invalid image name") as exc:
        imagestore.check_name(name)
    assert exc.value.args[1] == errors.ECODE_INVAL


@pytest.mark.parametrize("image,kind", [
    ("http://10.0.0.1/d.raw", "url"), ("https://x/d.qcow2", "url"), ("ftp://x/d", "url"),
    ("ftps://x/d", "url"), ("/srv/images/d.raw", "path"), ("images/d.raw", "path"),
    ("debian-13", "store"), ("d.qcow2", "store"),
])
def test_kind_of(image, kind):
    assert imagestore.kind_of(image) == kind


def test_index_round_trip_is_stable_and_sorted():
    entries = {"b": _entry("b"), "a": _entry("a", format="raw")}
    text = imagestore.dump_index(entries)
    assert imagestore.parse_index(text) == entries
    assert text == imagestore.dump_index(dict(reversed(list(entries.items()))))
    assert list(json.loads(text)["images"]) == ["a", "b"]


def test_empty_index_text_is_an_empty_store():
    assert imagestore.parse_index("") == {}
    assert imagestore.parse_index(imagestore.dump_index({})) == {}


@pytest.mark.parametrize("mangle", [
    lambda d: d.update(version=2),
    lambda d: d.update(images=[]),
    lambda d: d["images"]["a"].update(name="b"),
    lambda d: d["images"]["a"].update(format="vmdk"),
    lambda d: d["images"]["a"].update(sha256="xyz"),
    lambda d: d["images"]["a"].update(size=-1),
    lambda d: d["images"]["a"].update(extra=1),
    lambda d: d["images"]["a"].pop("added"),
    lambda d: d["images"].update({"../x": d["images"]["a"]}),
])
def test_malformed_index_is_refused(mangle):
    data = json.loads(imagestore.dump_index({"a": _entry("a")}))
    mangle(data)
    with pytest.raises((errors.ConfigurationError, errors.OpPrereqError)):
        imagestore.parse_index(json.dumps(data))


def test_not_json_is_refused():
    with pytest.raises(errors.ConfigurationError, match="not JSON"):
        imagestore.parse_index("{")


def test_make_entry_refuses_an_unrecognised_image():
    with pytest.raises(errors.OpPrereqError, match="unknown format"):
        imagestore.make_entry("a", {"format": None, "size": 1, "virtual_size": 1,
                                    "sha256": SHA}, "/x", 0)


def test_short_checksum():
    assert imagestore.short_checksum(SHA) == "sha256:abababababab"
