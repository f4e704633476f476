"""The pure parts of a cluster SSH key renewal: key sizes, authorized_keys edits, the plan."""

from __future__ import annotations

import pytest

from ganeti import errors, ssh, sshkeys
from ganeti.sshkeys import Step

OLD = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLDOLD ganeti@c"
NEW = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEWNEW ganeti@c"
MINE = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY= admin@laptop"


# --- key types and sizes ----------------------------------------------------------

@pytest.mark.parametrize("key_type,bits,old_type,old_bits,want", [
    ("rsa", None, "rsa", 4096, 4096),
    ("rsa", None, "ed25519", 256, 2048),
    ("ecdsa", None, None, None, 384),
    ("ed25519", None, "rsa", 2048, 256),
    ("ecdsa", 521, "rsa", 2048, 521),
], ids=["same-type-keeps-bits", "new-type-default", "no-old", "ed25519", "given"])
def test_determine_key_bits(key_type, bits, old_type, old_bits, want) -> None:
    assert sshkeys.determine_key_bits(key_type, bits, old_type, old_bits) == want


@pytest.mark.parametrize("key_type,bits,match", [
    ("rsa", 521, "rsa with 521 bits"),
    ("ecdsa", 4096, "ecdsa with 4096"),
    ("ed25519", 512, "ed25519 with 512"),
    ("dsa", None, "DSA keys are not supported"),
    ("blowfish", None, "Unknown SSH key type"),
], ids=["rsa-521", "ecdsa-4096", "ed25519-512", "dsa", "unknown"])
def test_determine_key_bits_refuses(key_type, bits, match) -> None:
    with pytest.raises(errors.OpPrereqError, match=match):
        sshkeys.determine_key_bits(key_type, bits, "rsa", 2048)


@pytest.mark.parametrize("key_type,bits,name", [
    ("ed25519", None, "ssh-ed25519"),
    ("rsa", 1024, "ssh-rsa"),
    ("ecdsa", 256, "ecdsa-sha2-nistp256"),
    ("ecdsa", 521, "ecdsa-sha2-nistp521"),
], ids=["ed25519", "rsa", "ecdsa-256", "ecdsa-521"])
def test_generated_key_pair_loads_and_matches(key_type, bits, name) -> None:
    private, line = ssh.generate_key_pair(key_type, bits, comment="ganeti@c")
    assert line.startswith(name + " ") and line.endswith(" ganeti@c")
    key = ssh.load_key_data(private)
    assert key.get_name() == name
    assert ssh.parse_public_key_line(line) == (name, key.asbytes())
    assert ssh.public_key_size(line) == (key_type, bits or 256)


def test_generate_key_pair_refuses_a_bad_size() -> None:
    with pytest.raises(errors.OpPrereqError, match="rsa with 512"):
        ssh.generate_key_pair("rsa", 512)


def test_load_key_data_refuses_garbage() -> None:
    with pytest.raises(errors.CommandError, match="Cannot load"):
        ssh.load_key_data(b"not a key")


# --- authorized_keys text ------------------------------------------------------------

def test_with_key_adds_once_and_keeps_the_rest() -> None:
    text = f"# mine\n{MINE}\n{OLD}"
    added = sshkeys.with_key(text, NEW)
    assert added == f"# mine\n{MINE}\n{OLD}\n{NEW}\n"
    assert sshkeys.with_key(added, NEW + " other-comment") == added


def test_without_key_removes_every_line_of_that_key_only() -> None:
    text = f"{OLD}\n{MINE}\nfrom=\"10.0.0.1\" {OLD.rsplit(' ', 1)[0]} x\n{NEW}\n"
    assert sshkeys.without_key(text, OLD) == f"{MINE}\n{NEW}\n"
    assert sshkeys.without_key("", OLD) == ""


def test_key_edits_refuse_a_line_that_is_no_key() -> None:
    with pytest.raises(errors.ParameterError):
        sshkeys.with_key("", "hello world")
    with pytest.raises(errors.ParameterError):
        sshkeys.without_key(OLD, "")


# --- the plan ------------------------------------------------------------------------

PLAN = sshkeys.plan_renewal("n1", {"n3": False, "n1": False, "n2": False, "n4": True})


def test_plan_puts_the_master_first_and_skips_offline_nodes() -> None:
    assert PLAN.nodes == ("n1", "n2", "n3")
    assert PLAN.others == ("n2", "n3")
    assert PLAN.offline == ("n4",)


def test_plan_needs_an_online_master() -> None:
    with pytest.raises(errors.OpPrereqError, match="master"):
        sshkeys.plan_renewal("n1", {"n1": True, "n2": False})


@pytest.mark.parametrize("step", [Step.ADD, Step.PROVE, Step.COMMIT_MASTER, Step.COMMIT],
                         ids=lambda s: s.value)
def test_no_failure_goes_on(step) -> None:
    assert sshkeys.decide(PLAN, step, {}) == sshkeys.StepOutcome(True)


@pytest.mark.parametrize("step", [Step.ADD, Step.PROVE], ids=["add", "prove"])
def test_failure_before_commit_undoes_everywhere(step) -> None:
    outcome = sshkeys.decide(PLAN, step, {"n3": "connection refused"})
    assert not outcome.proceed
    assert outcome.undo == ("n1", "n2", "n3")     # also on n3: it may be half-way
    assert "n3: connection refused" in outcome.message
    assert "old key still works on every node" in outcome.message


def test_master_commit_failure_stops_without_undo() -> None:
    outcome = sshkeys.decide(PLAN, Step.COMMIT_MASTER, {"n1": "disk full"})
    assert not outcome.proceed and outcome.undo == ()
    assert "accept both" in outcome.message and "Run the renewal again" in outcome.message


def test_commit_failure_names_the_nodes_left_on_the_old_pair() -> None:
    outcome = sshkeys.decide(PLAN, Step.COMMIT, {"n2": "timeout"})
    assert not outcome.proceed and outcome.undo == ()
    assert "n2 could not switch" in outcome.message
    assert "master no longer accepts" in outcome.message


def test_a_plan_with_an_offline_node_does_not_reach_every_node() -> None:
    assert not PLAN.reaches_every_node
    assert sshkeys.plan_renewal("n1", {"n1": False, "n2": False}).reaches_every_node


# --- retired keys --------------------------------------------------------------------

def test_same_key_ignores_comments_and_refuses_non_keys() -> None:
    assert sshkeys.same_key(OLD, OLD.rsplit(" ", 1)[0] + " other")
    assert not sshkeys.same_key(OLD, NEW)
    assert not sshkeys.same_key("", "") and not sshkeys.same_key("x y", "x y")


def test_with_retired_appends_a_key_once() -> None:
    assert sshkeys.with_retired([], OLD) == [OLD]
    assert sshkeys.with_retired([OLD], NEW) == [OLD, NEW]
    assert sshkeys.with_retired([OLD, NEW], OLD + " again") == [OLD, NEW]
    with pytest.raises(errors.ParameterError):
        sshkeys.with_retired([OLD], "hello world")
