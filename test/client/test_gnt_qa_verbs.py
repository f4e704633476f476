"""Issue 34's verbs and options on the client side: gnt-os modify, gnt-cluster
show-ispecs-cmd, renew-crypto's upstream options, the parsers behind them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ganeti import cli, errors
from ganeti.cli import ipolicy_opts
from ganeti.client import gnt_cluster, gnt_cluster_maint, gnt_os

POLICY = {
    "minmax": [{"min": {"memory-size": 128, "cpu-count": 1, "disk-size": 1024},
                "max": {"memory-size": 4096, "cpu-count": 8, "disk-size": 8192}},
               {"min": {"memory-size": 8192, "cpu-count": 8, "disk-size": 8192},
                "max": {"memory-size": 65536, "cpu-count": 64, "disk-size": 65536}}],
    "std": {"memory-size": 256, "cpu-count": 1, "disk-size": 1024},
    "disk-templates": ["file"], "vcpu-ratio": 4.0, "spindle-ratio": 32.0,
}


def _os_opts(**kw):
    base = {"hvparams": [], "osparams": None, "osparams_private": None, "hidden": None,
            "blacklisted": None}
    base.update(kw)
    return SimpleNamespace(**base)


def test_os_modify_builds_upstreams_cluster_opcode() -> None:
    op = gnt_os.modify_os_opcode(_os_opts(
        hvparams=["fake:migration_mode=live", "kvm:kernel_path=/k,-initrd_path"],
        osparams="dhcp=yes,no_root", hidden="yes", blacklisted="no"), "debootstrap+default")
    assert op == {
        "OP_ID": "OP_CLUSTER_SET_PARAMS",
        "os_hvp": {"debootstrap+default": {"fake": {"migration_mode": "live"},
                                           "kvm": {"kernel_path": "/k",
                                                   "initrd_path": "default"}}},
        "osparams": {"debootstrap+default": {"dhcp": "yes", "root": "False"}},
        "hidden_os": [["add", "debootstrap+default"]],
        "blacklisted_os": [["remove", "debootstrap+default"]],
    }


def test_os_modify_without_changes_is_none_and_the_verb_fails(capsys) -> None:
    assert gnt_os.modify_os_opcode(_os_opts(), "tinyos") is None
    assert cli.generic_main(gnt_os.commands, ["modify", "tinyos"], "gnt-os",
                            client_factory=lambda: pytest.fail("nothing to submit")) == 1
    assert "At least one of OS parameters" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["", "-x", "a b", "os/evil", "ö"])
def test_os_modify_refuses_bad_os_names(name) -> None:
    with pytest.raises(errors.ParameterError, match="Invalid OS name"):
        gnt_os.modify_os_opcode(_os_opts(hidden="yes"), name)


def test_os_modify_hidden_takes_yes_or_no(capsys) -> None:
    code = cli.generic_main(gnt_os.commands, ["modify", "--hidden", "maybe", "tinyos"],
                            "gnt-os", client_factory=lambda: pytest.fail("no client"))
    assert code == 2 and "--hidden" in capsys.readouterr().err


def test_ipolicy_command_matches_upstreams_layout_and_parses_back() -> None:
    text = ipolicy_opts.ipolicy_command(POLICY, group=False)
    assert text == (" --ipolicy-std-specs cpu-count=1,disk-size=1024,memory-size=256"
                    " --ipolicy-bounds-specs"
                    " min:cpu-count=1,disk-size=1024,memory-size=128"
                    "/max:cpu-count=8,disk-size=8192,memory-size=4096"
                    "//min:cpu-count=8,disk-size=8192,memory-size=8192"
                    "/max:cpu-count=64,disk-size=65536,memory-size=65536")
    bounds = text.split(" --ipolicy-bounds-specs ", 1)[1]
    parsed = ipolicy_opts.parse_bounds_specs(bounds)
    assert [{k: {s: int(v) for s, v in p[k].items()} for k in p} for p in parsed] == \
        POLICY["minmax"]
    group = ipolicy_opts.ipolicy_command(POLICY, group=True)
    assert group.startswith(" --ipolicy-bounds-specs ") and "std" not in group
    assert ipolicy_opts.ipolicy_command({}, group=False) == ""
    assert ipolicy_opts.ipolicy_command({"minmax": [{"min": {"cpu-count": 1}}]},
                                        group=True) == ""


def test_show_ispecs_cmd_prints_the_init_command(capsys) -> None:
    info = {"name": "cluster.example.com", "ipolicy": POLICY}
    client = SimpleNamespace(QueryClusterInfo=lambda: info)
    assert cli.generic_main(gnt_cluster.commands, ["show-ispecs-cmd"], "gnt-cluster",
                            client_factory=lambda: client) == 0
    out = capsys.readouterr().out.strip()
    assert out == gnt_cluster_maint.create_command(info)
    assert out.startswith("gnt-cluster init --ipolicy-std-specs ")
    assert out.endswith(" cluster.example.com")


def _crypto_opts(**kw):
    base = {"new_cluster_cert": False, "new_rapi_cert": False, "rapi_cert_file": None,
            "new_cds": False, "cds_file": None, "force": True, "new_confd_hmac_key": False,
            "new_node_cert": False, "new_ssh_keys": False, "ssh_key_type": None,
            "ssh_key_bits": None, "new_spice_cert": False, "spice_cert": None,
            "spice_cacert": None, "verbose": 0}
    base.update(kw)
    return SimpleNamespace(**base)


def test_renew_crypto_upstream_options() -> None:
    op = gnt_cluster.renew_crypto_opcode(_crypto_opts(new_confd_hmac_key=True,
                                                      new_node_cert=True, verbose=1))
    assert op["new_confd_hmac_key"] is True and op["node_certificates"] is True
    assert op["verbose"] is True and op["new_cluster_certificate"] is False


@pytest.mark.parametrize("kw,flag", [
    ({"new_spice_cert": True}, "--new-spice-certificate"),
    ({"spice_cert": "/x"}, "--spice-certificate"),
], ids=["new-spice", "spice-file"])
def test_renew_crypto_unsupported_options_are_refused(kw, flag) -> None:
    with pytest.raises(errors.OpPrereqError, match=flag):
        gnt_cluster.renew_crypto_opcode(_crypto_opts(new_confd_hmac_key=True, **kw))


def test_renew_crypto_new_ssh_keys_opcode() -> None:
    op = gnt_cluster.renew_crypto_opcode(_crypto_opts(new_ssh_keys=True, ssh_key_type="rsa",
                                                      ssh_key_bits=4096))
    assert op["renew_ssh_keys"] is True and op["new_cluster_certificate"] is False
    assert (op["ssh_key_type"], op["ssh_key_bits"]) == ("rsa", 4096)
    plain = gnt_cluster.renew_crypto_opcode(_crypto_opts(new_ssh_keys=True))
    assert "ssh_key_type" not in plain and "ssh_key_bits" not in plain


def test_renew_crypto_key_type_needs_new_ssh_keys() -> None:
    with pytest.raises(errors.OpPrereqError, match="need --new-ssh-keys"):
        gnt_cluster.renew_crypto_opcode(_crypto_opts(new_confd_hmac_key=True,
                                                     ssh_key_type="ecdsa"))


@pytest.mark.parametrize("verb,flags", [
    ("rename", ["--force", "--dry-run"]),
    ("repair-disk-sizes", ["--dry-run", "--priority"]),
    ("modify", ["--max-tracked-jobs", "--install-image", "--instance-communication-network"]),
    ("init", ["--primary-ip-version"]),
    ("renew-crypto", ["--new-confd-hmac-key", "--new-node-certificates", "--new-ssh-keys",
                      "--no-ssh-key-check", "--verbose"]),
])
def test_cluster_verbs_have_upstreams_options(verb, flags) -> None:
    have = {f for opt in gnt_cluster.commands[verb][2] for f in opt.flags}
    assert set(flags) <= have, set(flags) - have


def test_node_verbs_have_upstreams_options() -> None:
    from ganeti.client import gnt_node
    add = {f for opt in gnt_node.commands["add"][2] for f in opt.flags}
    modify = {f for opt in gnt_node.commands["modify"][2] for f in opt.flags}
    assert {"--no-ssh-key-check", "--secondary-ip", "-s"} <= add
    assert {"--secondary-ip", "-s"} <= modify
