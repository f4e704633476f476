"""gnt-cluster renew-crypto option handling and the master IP verbs' table rows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ganeti import errors
from ganeti.client import gnt_cluster


def _opts(**kw):
    base = {"new_cluster_cert": False, "new_rapi_cert": False, "rapi_cert_file": None,
            "new_cds": False, "cds_file": None, "force": True}
    base.update(kw)
    return SimpleNamespace(**base)


def test_renew_crypto_opcode_reads_the_given_files(tmp_path) -> None:
    pem = tmp_path / "rapi.pem"
    pem.write_text("PEM DATA")
    cds = tmp_path / "cds"
    cds.write_text("secret\n")
    op = gnt_cluster.renew_crypto_opcode(_opts(rapi_cert_file=str(pem), cds_file=str(cds)))
    assert op == {"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "new_cluster_certificate": False,
                  "new_rapi_cert": False, "new_cluster_domain_secret": False,
                  "rapi_cert_pem": "PEM DATA", "cluster_domain_secret": "secret\n"}


@pytest.mark.parametrize("kw,match", [
    ({}, "Nothing to do"),
    ({"new_rapi_cert": True, "rapi_cert_file": "/x"}, "Only one"),
    ({"new_cds": True, "cds_file": "/x"}, "Only one"),
    ({"cds_file": "/nonexistent/cds"}, "Cannot read"),
])
def test_renew_crypto_opcode_errors(kw, match) -> None:
    with pytest.raises(errors.OpPrereqError, match=match):
        gnt_cluster.renew_crypto_opcode(_opts(**kw))


def test_new_verbs_are_in_the_commands_table() -> None:
    for verb in ("activate-master-ip", "deactivate-master-ip", "renew-crypto"):
        assert verb in gnt_cluster.commands
