"""``gnt-os image add|list|remove`` on the client side (ganeti/client/gnt_os.py)."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.client import gnt_os
from ganeti.opcodes import wire

SHA = "0123456789ab" + "f" * 52
ENTRIES = [
    {"name": "deb", "format": "qcow2", "size": 3 * 1024 * 1024, "virtual_size": 64 * 1024 * 1024,
     "sha256": SHA, "source": "/srv/d.qcow2", "added": 0.0},
    {"name": "ubuntu-24.04", "format": "raw", "size": 1024 * 1024, "virtual_size": 1024 * 1024,
     "sha256": "e" * 64, "source": "http://10.0.0.1/u.raw", "added": 86400.0},
]


def test_default_table_is_upstream_style():
    assert gnt_os.image_table(ENTRIES, gnt_os.IMAGE_DEFAULT_FIELDS) == [
        "Name         Format Size Checksum            Added",
        "deb          qcow2  3.0M sha256:0123456789ab 1970-01-01 00:00:00",
        "ubuntu-24.04 raw    1.0M sha256:eeeeeeeeeeee 1970-01-02 00:00:00",
    ]


def test_fields_headers_and_separator():
    assert gnt_os.image_table(ENTRIES, ["name", "virtual_size", "source"], headers=False,
                              separator="|") == ["deb|64.0M|/srv/d.qcow2",
                                                 "ubuntu-24.04|1.0M|http://10.0.0.1/u.raw"]
    with pytest.raises(errors.OpPrereqError, match="Unknown output field"):
        gnt_os.image_table(ENTRIES, ["name", "colour"])


def test_verbs_send_their_opcodes(monkeypatch):
    sent = []
    monkeypatch.setattr(gnt_os.cli, "submit_or_send", lambda op, opts: sent.append(op))
    assert gnt_os.main(["image", "add", "--checksum", f"sha256:{SHA}", "deb", "/srv/d.raw"]) == 0
    assert gnt_os.main(["image", "add", "web", "http://10.0.0.1/u.raw"]) == 0
    assert gnt_os.main(["image", "remove", "deb"]) == 0
    assert sent == [
        wire.os_image_add(name="deb", source="/srv/d.raw", checksum=f"sha256:{SHA}"),
        {"OP_ID": wire.OP_OS_IMAGE_ADD, "name": "web", "source": "http://10.0.0.1/u.raw"},
        wire.os_image_remove(name="deb"),
    ]


def test_add_needs_a_name_and_a_source(capsys):
    assert gnt_os.main(["image", "add", "deb"]) != 0
    assert "Not enough arguments" in capsys.readouterr().err
